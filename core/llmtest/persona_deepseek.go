package llmtest

// PersonaDeepSeek answers as DeepSeek's thinking mode does: the
// reasoning in reasoning_content beside content (streamed with content
// null), prompt cache hit and miss counts in usage, reasoning tokens in
// completion_tokens_details.
var PersonaDeepSeek = Persona{
	Name:  "deepseek",
	Title: "DeepSeek thinking mode: reasoning_content, cache hit counts",
	Sources: []string{
		"https://api-docs.deepseek.com/guides/reasoning_model",
		"https://api-docs.deepseek.com/guides/thinking_mode_api_example_streaming",
		"https://api-docs.deepseek.com/api/create-chat-completion",
	},
	Model: "deepseek-reasoner",
	Body: func(r Rendered) string {
		return openaiBody(r, openaiStyle{fingerprint: "fp_3a5770e1b4_prod0225", reasoning: true, reasoningAs: "reasoning_content", usageExtra: deepseekCache(r)})
	},
	Stream: func(r Rendered) []string {
		return openaiStream(r, openaiStyle{fingerprint: "fp_3a5770e1b4_prod0225", reasoning: true, reasoningAs: "reasoning_content", usageExtra: deepseekCache(r)})
	},
}

func deepseekCache(r Rendered) string {
	p, _, cached := usageCounts(r.Usage)
	return `,"prompt_cache_hit_tokens":` + js(cached) + `,"prompt_cache_miss_tokens":` + js(p-cached)
}
