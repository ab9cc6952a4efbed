package llmtest

import (
	"encoding/json"
	"net/http"
	"time"
)

// Step is one scripted answer of the Server: either a completion (Text,
// ToolCalls, Usage, FinishReason) or, when Status is set, an HTTP error.
// Build steps with Text, Call, Calls and Status and refine them with the
// With… and After methods; each returns a modified copy.
type Step struct {
	// Text is the assistant's content.
	Text string
	// ToolCalls are the assistant's tool calls; an empty ID gets "call_<n>",
	// n counting calls across the server's life.
	ToolCalls []ToolCall
	// Usage is sent as the reply's usage; nil sends no usage at all.
	Usage *Usage
	// FinishReason defaults to "tool_calls" with tool calls, else "stop".
	FinishReason string

	// Status, when non-zero, answers with this HTTP status instead.
	Status int
	// Body is the error body; empty sends an OpenAI-style error object.
	Body string
	// RetryAfter, when not empty, is sent as the Retry-After header.
	RetryAfter string

	// Delay holds the answer back; it ends early when the client gives up.
	Delay time.Duration
	// Raw, when not empty, is sent verbatim as a 200 reply body (also to
	// a stream request, as application/json).
	Raw string

	// Reasoning is a reasoning model's thinking, sent as
	// reasoning_content (in the message, or in the stream's deltas).
	Reasoning string

	// How a stream request (stream: true) is answered; a request that is
	// not a stream ignores these.

	// SSE, when not empty, is sent verbatim as the stream's body
	// (Content-Type text/event-stream).
	SSE string
	// ChunkBytes is the size of the pieces the text and each call's
	// arguments are cut into, one delta each (cut on character
	// boundaries); 0 means 8.
	ChunkBytes int
	// Interleave sends the argument pieces of several tool calls in turns
	// (call 0, call 1, call 2, call 0, …) instead of call after call.
	Interleave bool
	// CutAfter, when positive, breaks the connection after that many
	// events, as a server or proxy dying midway does.
	CutAfter int
	// KeepAlives puts comments and blank keep-alive lines between events.
	KeepAlives bool
	// WriteBytes, when positive, sends the stream in network writes of at
	// most that many bytes, each flushed: events (and characters) then
	// arrive split.
	WriteBytes int
	// NoStreamUsage leaves usage out of the stream even when the request
	// asked for it (as Ollama does).
	NoStreamUsage bool
}

// ToolCall is one tool call in a scripted answer or a recorded request.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text
}

// Usage is the token usage a scripted answer reports.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int // sent as prompt_tokens_details.cached_tokens when > 0
}

// Text answers with assistant text.
func Text(s string) Step { return Step{Text: s} }

// Call answers with one tool call; args is its JSON arguments text.
func Call(name, args string) Step {
	return Step{ToolCalls: []ToolCall{{Name: name, Arguments: args}}}
}

// Transition is a call of Baton's transition tool to next with summary;
// extra adds string arguments in pairs ("question", "Which year?").
func Transition(next, summary string, extra ...string) Step {
	args := map[string]any{"next_step": next, "summary": summary}
	for i := 0; i+1 < len(extra); i += 2 {
		args[extra[i]] = extra[i+1]
	}
	b, _ := json.Marshal(args)
	return Call("transition", string(b))
}

// Calls answers with the tool calls (and text) of all the given steps in one
// reply, e.g. Calls(Call("Read", `{}`), Call("Bash", `{}`)).
func Calls(steps ...Step) Step {
	var s Step
	for _, p := range steps {
		s.ToolCalls = append(s.ToolCalls, p.ToolCalls...)
		s.Text += p.Text
	}
	return s
}

// Status answers with an HTTP error of that status.
func Status(code int) Step { return Step{Status: code} }

// Raw answers 200 with body sent verbatim (e.g. malformed JSON).
func Raw(body string) Step { return Step{Raw: body} }

// WithUsage returns s reporting the given token counts.
func (s Step) WithUsage(prompt, completion int) Step {
	u := Usage{PromptTokens: prompt, CompletionTokens: completion}
	if s.Usage != nil {
		u.CachedTokens = s.Usage.CachedTokens
	}
	s.Usage = &u
	return s
}

// WithCached returns s reporting cached prompt tokens (and usage at all).
func (s Step) WithCached(cached int) Step {
	u := Usage{}
	if s.Usage != nil {
		u = *s.Usage
	}
	u.CachedTokens = cached
	s.Usage = &u
	return s
}

// WithFinish returns s with the finish reason.
func (s Step) WithFinish(reason string) Step { s.FinishReason = reason; return s }

// WithBody returns s with the error body.
func (s Step) WithBody(body string) Step { s.Body = body; return s }

// WithRetryAfter returns s sending the Retry-After header.
func (s Step) WithRetryAfter(v string) Step { s.RetryAfter = v; return s }

// WithReasoning returns s carrying reasoning text (reasoning_content).
func (s Step) WithReasoning(text string) Step { s.Reasoning = text; return s }

// Streamed returns s streamed in pieces of n bytes (see ChunkBytes).
func (s Step) Streamed(n int) Step { s.ChunkBytes = n; return s }

// Interleaved returns s streaming its tool calls' arguments in turns.
func (s Step) Interleaved() Step { s.Interleave = true; return s }

// CutAfterEvents returns s whose stream breaks after n events.
func (s Step) CutAfterEvents(n int) Step { s.CutAfter = n; return s }

// WithKeepAlives returns s whose stream carries comments and blank lines.
func (s Step) WithKeepAlives() Step { s.KeepAlives = true; return s }

// WrittenIn returns s whose stream is written n bytes at a time.
func (s Step) WrittenIn(n int) Step { s.WriteBytes = n; return s }

// SSEBody answers a stream request with body verbatim.
func SSEBody(body string) Step { return Step{SSE: body} }

// After returns s answered only after d (or when the client gives up).
func (s Step) After(d time.Duration) Step { s.Delay = d; return s }

// Handler answers a request dynamically once the script is used up.
type Handler func(req Request) Step

func (s Step) errorBody() string {
	if s.Body != "" {
		return s.Body
	}
	typ := "server_error"
	switch {
	case s.Status == http.StatusTooManyRequests:
		typ = "rate_limit_exceeded"
	case s.Status < 500:
		typ = "invalid_request_error"
	}
	return `{"error":{"message":"scripted ` + http.StatusText(s.Status) + `","type":"` + typ + `","code":"` + typ + `"}}`
}
