package llmtest

// PersonaOllama answers as Ollama's OpenAI compatibility (/v1) does:
// system_fingerprint fp_ollama, each tool call whole in one chunk, and no
// usage in streams even when stream_options asks for it.
var PersonaOllama = Persona{
	Name:  "ollama",
	Title: "Ollama /v1: whole tool calls per chunk, no usage in streams",
	Sources: []string{
		"https://github.com/ollama/ollama/blob/main/docs/openai.md",
		"https://docs.ollama.com/api/openai-compatibility",
	},
	Model:         "qwen3:8b",
	NoStreamUsage: true,
	Body:          func(r Rendered) string { return openaiBody(r, openaiStyle{fingerprint: "fp_ollama"}) },
	Stream: func(r Rendered) []string {
		return openaiStream(r, openaiStyle{fingerprint: "fp_ollama", wholeCalls: true, noUsage: true})
	},
}
