package llmtest

// azureFilter is the content_filter_results Azure OpenAI puts on choices.
const azureFilter = `"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}`

// PersonaAzure answers as Azure OpenAI does: OpenAI's shapes with
// content filter results on each choice and the prompt's filter results
// on the reply, which in a stream come first as a chunk without choices.
// Azure takes the key in api-key and needs api-version.
var PersonaAzure = Persona{
	Name:  "azure",
	Title: "Azure OpenAI: content filter results, a first chunk without choices",
	Sources: []string{
		"https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference#chat-completions",
		"https://learn.microsoft.com/en-us/azure/ai-foundry/openai/concepts/content-filter#sample-response-stream",
	},
	Model: "gpt-4o",
	Body: func(r Rendered) string {
		return openaiBody(r, openaiStyle{fingerprint: "fp_ee1d74bde0", choiceExtra: "," + azureFilter,
			extra: `,"prompt_filter_results":[{"prompt_index":0,` + azureFilter + `}]`})
	},
	Stream: func(r Rendered) []string {
		return openaiStream(r, openaiStyle{fingerprint: "fp_ee1d74bde0",
			first: `{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,` + azureFilter + `}]}`})
	},
}
