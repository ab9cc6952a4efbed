package llmtest

import "strings"

// PersonaAnthropic answers as Anthropic's OpenAI SDK compatibility layer
// does: Claude's message and tool-use ids (msg_…, toolu_…), no system
// fingerprint, no reasoning returned.
var PersonaAnthropic = Persona{
	Name:  "anthropic",
	Title: "Anthropic OpenAI compatibility: toolu_ ids",
	Sources: []string{
		"https://docs.anthropic.com/en/api/openai-sdk",
	},
	Model:  "claude-sonnet-4-5",
	Body:   func(r Rendered) string { return openaiBody(anthropicIDs(r), openaiStyle{}) },
	Stream: func(r Rendered) []string { return openaiStream(anthropicIDs(r), openaiStyle{}) },
}

func anthropicIDs(r Rendered) Rendered {
	r.ID = "msg_01" + strings.TrimPrefix(r.ID, "chatcmpl-")
	calls := append([]ToolCall(nil), r.Calls...)
	for i := range calls {
		calls[i].ID = "toolu_01" + calls[i].ID
	}
	r.Calls = calls
	return r
}
