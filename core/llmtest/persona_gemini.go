package llmtest

import "net/http"

// PersonaGemini answers as Gemini's OpenAI compatibility endpoint does:
// tool calls streamed whole without an index and with empty ids, and
// errors as a JSON array of error objects; it opens with its 503
// "model is overloaded".
var PersonaGemini = Persona{
	Name:  "gemini",
	Title: "Gemini OpenAI compatibility: calls without index or id, errors as an array",
	Sources: []string{
		"https://ai.google.dev/gemini-api/docs/openai",
		"https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes",
	},
	Model: "gemini-2.5-flash",
	Body:  func(r Rendered) string { return openaiBody(geminiIDs(r), openaiStyle{}) },
	Stream: func(r Rendered) []string {
		return openaiStream(geminiIDs(r), openaiStyle{noIndex: true, wholeCalls: true, usageInLast: true})
	},
	Quirk: func(Request) (Step, bool) {
		return Status(http.StatusServiceUnavailable).WithBody(`[{
  "error": {
    "code": 503,
    "message": "The model is overloaded. Please try again later.",
    "status": "UNAVAILABLE"
  }
}
]`), true
	},
}

// geminiIDs empties r's call ids, as the endpoint sends them.
func geminiIDs(r Rendered) Rendered {
	calls := append([]ToolCall(nil), r.Calls...)
	for i := range calls {
		calls[i].ID = ""
	}
	r.Calls = calls
	return r
}
