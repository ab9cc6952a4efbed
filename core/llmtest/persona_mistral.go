package llmtest

import (
	"crypto/sha256"
	"strings"
)

// PersonaMistral answers as Mistral's API does: tool call ids of nine
// letters and digits, each call whole in one chunk, usage in the finish
// chunk itself.
var PersonaMistral = Persona{
	Name:  "mistral",
	Title: "Mistral: nine-character call ids, usage in the finish chunk",
	Sources: []string{
		"https://docs.mistral.ai/api/#tag/chat/operation/chat_completion_v1_chat_completions_post",
		"https://docs.mistral.ai/capabilities/function_calling/",
	},
	Model: "mistral-large-latest",
	Body:  func(r Rendered) string { return openaiBody(mistralIDs(r), openaiStyle{}) },
	Stream: func(r Rendered) []string {
		return openaiStream(mistralIDs(r), openaiStyle{wholeCalls: true, usageInLast: true})
	},
}

// mistralIDs gives r's calls ids in Mistral's form, derived from the
// scripted ones.
func mistralIDs(r Rendered) Rendered {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	calls := append([]ToolCall(nil), r.Calls...)
	for i := range calls {
		sum := sha256.Sum256([]byte(calls[i].ID))
		var b strings.Builder
		for _, c := range sum[:9] {
			b.WriteByte(alnum[int(c)%len(alnum)])
		}
		calls[i].ID = b.String()
	}
	r.Calls = calls
	return r
}
