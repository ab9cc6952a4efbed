// Package llmtest is a scripted OpenAI-compatible chat completions server for
// Baton's tests. A test starts one with NewServer, points the client (through
// core/llm and the real go-openai client) at URL(), scripts the answers with
// Script, and afterwards asserts on what was sent with Requests:
//
//	srv := llmtest.NewServer(t)
//	srv.Script(llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"done"}`).WithUsage(120, 8))
//	… run the code under test against srv.URL() …
//	got := srv.Requests()[0].Messages
//
// The server answers POST /v1/chat/completions only (404 otherwise; GET
// /v1/models too when started WithModels), and fails the test with a clear message when a request arrives
// after the script is used up and no Handler is set. A request with
// stream: true is answered as a server-sent event stream, cut into deltas
// as the Step says (stream.go). SetPersona makes it answer as a given
// provider does (persona.go, persona_*.go).
package llmtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Reporter receives what the server finds wrong with a request it cannot
// answer as scripted; a *testing.T is one.
type Reporter interface {
	Errorf(format string, args ...any)
}

// Server is the scripted server. Its methods are safe for concurrent use.
type Server struct {
	t      Reporter
	srv    *httptest.Server
	apiKey string
	models []Model // served at GET /v1/models; nil: 404 there, as many servers answer

	mu       sync.Mutex
	steps    []Step    // guarded by mu: what is left of the script
	handler  Handler   // guarded by mu
	requests []Request // guarded by mu
	received int       // guarded by mu: requests received, kept or not
	forget   bool      // requests are counted, not kept (WithoutRequestLog)
	calls    int       // guarded by mu: tool call ids handed out
	replies  int       // guarded by mu: completion ids handed out

	cache   *prefixCache // guarded by mu; nil: no prompt cache (cache.go)
	persona *Persona     // guarded by mu: how completions are shaped; nil: as OpenAI documents
	quirked bool         // guarded by mu: the persona's quirk was sent
}

// Option configures a Server.
type Option func(*Server)

// WithoutRequestLog makes the server count the requests it receives
// without keeping them (Requests returns none): a load generator's server
// answering millions of requests would otherwise hold every one.
func WithoutRequestLog() Option { return func(s *Server) { s.forget = true } }

// WithAPIKey makes the server answer 401 to requests without the header
// "Authorization: Bearer <key>".
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// Model is one entry of the model list WithModels serves.
type Model struct {
	ID string
	// ContextLength, when positive, is sent as the entry's context_length
	// (OpenRouter's name for the model's context window).
	ContextLength int
	// OwnedBy is the entry's owned_by ("llmtest" when empty): "library"
	// as Ollama lists its models, "vllm" as vLLM does.
	OwnedBy string
}

// WithModels makes the server answer GET /v1/models with these models, in
// order (behind the API key, when WithAPIKey set one). Without it that
// path answers 404, as servers without a model list do.
func WithModels(models ...Model) Option {
	return func(s *Server) { s.models = append([]Model{}, models...) }
}

// NewServer starts a server closed by t.Cleanup.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := Start(t, opts...)
	t.Cleanup(s.Close)
	return s
}

// Start starts a server outside a test (a load generator, say), reporting
// to r; the caller stops it with Close.
func Start(r Reporter, opts ...Option) *Server {
	s := &Server{t: r}
	for _, o := range opts {
		o(s)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Close stops the server, waiting for the requests in flight.
func (s *Server) Close() { s.srv.Close() }

// URL is the base URL to configure a client with; it ends in /v1.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Script appends steps to the script; each request takes the next one.
func (s *Server) Script(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, steps...)
}

// Handle sets the handler that answers requests once the script is used up.
func (s *Server) Handle(h Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
}

// Pending is how many scripted steps are not used yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steps)
}

// Requests returns the chat completion requests received so far, in order of
// arrival (including those answered with an error).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if s.models != nil && r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
		s.serveModels(w, r)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeError(w, http.StatusNotFound, "", `{"error":{"message":"llmtest serves POST /v1/chat/completions only","type":"invalid_request_error"}}`)
		return
	}
	if s.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		writeError(w, http.StatusUnauthorized, "", `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "", `{"error":{"message":"unreadable body"}}`)
		return
	}
	req, err := decodeRequest(body)
	if err != nil {
		s.t.Errorf("llmtest: request body is not a chat completion request: %v\n%s", err, body)
		writeError(w, http.StatusBadRequest, "", `{"error":{"message":"malformed request"}}`)
		return
	}
	req.Header, req.Query = r.Header.Clone(), r.URL.Query()
	s.mu.Lock()
	if !s.forget {
		s.requests = append(s.requests, req)
	}
	s.received++
	n := s.received
	var step Step
	scripted := len(s.steps) > 0
	if scripted {
		step, s.steps = s.steps[0], s.steps[1:]
	}
	h := s.handler
	s.mu.Unlock()

	if !scripted {
		if h == nil {
			s.t.Errorf("llmtest: request %d arrived but the script is used up; the last message sent was %s",
				n, lastMessage(req))
			writeError(w, http.StatusInternalServerError, "", `{"error":{"message":"llmtest: script used up","type":"server_error"}}`)
			return
		}
		step = h(req)
	}

	if ps, quirk := s.personaStep(req, step); quirk {
		if scripted {
			s.mu.Lock()
			s.steps = append([]Step{step}, s.steps...)
			s.mu.Unlock()
		}
		step = ps
	} else {
		step = ps
	}

	step = s.cached(body, step)
	if step.Delay > 0 {
		t := time.NewTimer(step.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	switch {
	case step.Status != 0:
		writeError(w, step.Status, step.RetryAfter, step.errorBody())
	case step.Raw != "":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, step.Raw)
	case req.Stream:
		s.serveStream(w, req, step)
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.reply(req, step))
	}
}

// serveModels answers GET /v1/models as OpenAI documents the list.
func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	if s.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		writeError(w, http.StatusUnauthorized, "", `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`)
		return
	}
	type entry struct {
		ID            string `json:"id"`
		Object        string `json:"object"`
		OwnedBy       string `json:"owned_by"`
		ContextLength int    `json:"context_length,omitempty"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []entry `json:"data"`
	}{Object: "list", Data: []entry{}}
	for _, m := range s.models {
		list.Data = append(list.Data, entry{ID: m.ID, Object: "model", OwnedBy: cmp.Or(m.OwnedBy, "llmtest"), ContextLength: m.ContextLength})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

func writeError(w http.ResponseWriter, status int, retryAfter, body string) {
	w.Header().Set("Content-Type", "application/json")
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func lastMessage(req Request) string {
	if len(req.Messages) == 0 {
		return "(none)"
	}
	m := req.Messages[len(req.Messages)-1]
	text := m.Content
	if len(text) > 300 {
		text = text[:300] + "…"
	}
	return fmt.Sprintf("%s: %q", m.Role, text)
}

// The reply's wire form, as OpenAI documents it.
type (
	wireReply struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []wireChoice `json:"choices"`
		Usage   *wireUsage   `json:"usage,omitempty"`
	}
	wireChoice struct {
		Index        int           `json:"index"`
		Message      wireAssistant `json:"message"`
		FinishReason string        `json:"finish_reason"`
	}
	wireAssistant struct {
		Role             string         `json:"role"`
		Content          *string        `json:"content"`
		ReasoningContent string         `json:"reasoning_content,omitempty"`
		ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
	}
	wireToolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function wireFunction `json:"function"`
	}
	wireFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	wireUsage struct {
		PromptTokens        int                `json:"prompt_tokens"`
		CompletionTokens    int                `json:"completion_tokens"`
		TotalTokens         int                `json:"total_tokens"`
		PromptTokensDetails *wirePromptDetails `json:"prompt_tokens_details,omitempty"`
	}
	wirePromptDetails struct {
		CachedTokens int `json:"cached_tokens"`
	}
)

func (s *Server) reply(req Request, step Step) wireReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies++
	msg := wireAssistant{Role: "assistant", ReasoningContent: step.Reasoning}
	if step.Text != "" || len(step.ToolCalls) == 0 {
		text := step.Text
		msg.Content = &text
	}
	for _, c := range step.ToolCalls {
		id := c.ID
		if id == "" {
			s.calls++
			id = fmt.Sprintf("call_%d", s.calls)
		}
		msg.ToolCalls = append(msg.ToolCalls, wireToolCall{ID: id, Type: "function",
			Function: wireFunction{Name: c.Name, Arguments: c.Arguments}})
	}
	finish := step.FinishReason
	if finish == "" {
		finish = "stop"
		if len(step.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	out := wireReply{
		ID:      fmt.Sprintf("chatcmpl-llmtest-%d", s.replies),
		Object:  "chat.completion",
		Created: 1700000000,
		Model:   req.Model,
		Choices: []wireChoice{{Message: msg, FinishReason: finish}},
	}
	if u := step.Usage; u != nil {
		out.Usage = &wireUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
			TotalTokens: u.PromptTokens + u.CompletionTokens}
		if u.CachedTokens > 0 {
			out.Usage.PromptTokensDetails = &wirePromptDetails{CachedTokens: u.CachedTokens}
		}
	}
	return out
}
