package llmtest

import (
	"fmt"
	"net/http"
	"strings"
)

// PersonaGroq answers as Groq does: x_groq on the reply with its request
// id, timing fields in usage, and in streams the usage inside x_groq of
// the finish chunk. It opens with its documented 429 (tokens per minute)
// and a retry-after header.
var PersonaGroq = Persona{
	Name:  "groq",
	Title: "Groq: x_groq usage in streams, a 429 with retry-after first",
	Sources: []string{
		"https://console.groq.com/docs/api-reference#chat-create",
		"https://console.groq.com/docs/rate-limits#handling-rate-limits",
		"https://console.groq.com/docs/errors",
	},
	Model: "llama-3.3-70b-versatile",
	Body: func(r Rendered) string {
		return openaiBody(r, openaiStyle{fingerprint: "fp_c0cfa69934", extra: `,"x_groq":{"id":"req_01jbd6g2qdfw2adyrt2az8hz4w"}`,
			usageExtra: `,"queue_time":0.037,"prompt_time":0.012,"completion_time":0.020,"total_time":0.032`})
	},
	Stream: func(r Rendered) []string {
		st := openaiStyle{fingerprint: "fp_c0cfa69934", noUsage: true}
		out := openaiStream(r, st)
		if r.Usage != nil {
			// The finish chunk is the one before [DONE].
			i := len(out) - 2
			out[i] = strings.TrimSuffix(out[i], "}") + fmt.Sprintf(`,"x_groq":{"id":"req_01jbd6g2qdfw2adyrt2az8hz4w","usage":%s}}`, openaiUsage(r, st))
		}
		return out
	},
	Quirk: func(Request) (Step, bool) {
		return Status(http.StatusTooManyRequests).WithRetryAfter("2").WithBody(`{"error":{"message":"Rate limit reached for model ` + "`llama-3.3-70b-versatile`" + ` in organization ` + "`org_01hxyz`" + ` service tier ` + "`on_demand`" + ` on tokens per minute (TPM): Limit 6000, Used 5812, Requested 911. Please try again in 7.23s. Need more tokens? Upgrade to Dev Tier today at https://console.groq.com/settings/billing","type":"tokens","code":"rate_limit_exceeded"}}`), true
	},
}
