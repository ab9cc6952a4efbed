package llmtest

// PersonaOpenRouter answers as OpenRouter does: ": OPENROUTER
// PROCESSING" comments in streams, the provider's name and the cost on
// replies, and it opens with the provider's failure inside a 200: an
// error object as the body, or, streaming, as a chunk whose
// finish_reason is error.
var PersonaOpenRouter = Persona{
	Name:  "openrouter",
	Title: "OpenRouter: comments in streams, the provider's error inside a 200",
	Sources: []string{
		"https://openrouter.ai/docs/api-reference/streaming",
		"https://openrouter.ai/docs/api-reference/errors",
	},
	Model: "openai/gpt-4o-mini",
	Body: func(r Rendered) string {
		return openaiBody(r, openaiStyle{extra: `,"provider":"OpenAI"`, usageExtra: `,"cost":0.000142`})
	},
	Stream: func(r Rendered) []string {
		return append([]string{": OPENROUTER PROCESSING", ": OPENROUTER PROCESSING"}, openaiStream(r, openaiStyle{extra: `,"provider":"OpenAI"`, usageExtra: `,"cost":0.000142`})...)
	},
	Quirk: func(req Request) (Step, bool) {
		if req.Stream {
			return SSEBody(": OPENROUTER PROCESSING\n\n" +
				`data: {"id":"gen-1741570283-abc123","object":"chat.completion.chunk","created":1741570283,"model":"openai/gpt-4o-mini","provider":"OpenAI","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me"},"finish_reason":null}]}` + "\n\n" +
				`data: {"id":"gen-1741570283-abc123","object":"chat.completion.chunk","created":1741570283,"model":"openai/gpt-4o-mini","provider":"OpenAI","error":{"code":"server_error","message":"Provider disconnected unexpectedly"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}` + "\n\n"), true
		}
		return Raw(`{"error":{"code":502,"message":"Provider returned error","metadata":{"provider_name":"Fireworks","raw":"{\"error\":\"upstream connect error or disconnect/reset before headers\"}"}}}`), true
	},
}
