package llmtest

// llamaTimings is the timings object llama.cpp's server adds to replies.
const llamaTimings = `,"timings":{"prompt_n":412,"prompt_ms":180.3,"prompt_per_token_ms":0.44,"prompt_per_second":2285.1,"predicted_n":38,"predicted_ms":610.2,"predicted_per_token_ms":16.06,"predicted_per_second":62.27}`

// PersonaLlamaCpp answers as llama.cpp's llama-server (with --jinja): its
// build as system_fingerprint, timings on the reply, and usage in the
// stream's finish chunk.
var PersonaLlamaCpp = Persona{
	Name:  "llamacpp",
	Title: "llama.cpp server: timings, usage in the finish chunk",
	Sources: []string{
		"https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md#post-v1chatcompletions-openai-compatible-chat-completions-api",
		"https://github.com/ggml-org/llama.cpp/blob/master/docs/function-calling.md",
	},
	Model: "qwen2.5-7b-instruct-q4_k_m.gguf",
	Body: func(r Rendered) string {
		return openaiBody(r, openaiStyle{fingerprint: "b5120-a4e8cd6e", extra: llamaTimings})
	},
	Stream: func(r Rendered) []string {
		return openaiStream(r, openaiStyle{fingerprint: "b5120-a4e8cd6e", usageInLast: true})
	},
}
