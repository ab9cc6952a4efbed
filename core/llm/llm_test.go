package llm_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const testKey = "sk-test-5d1e0c9a7b"

// harness is a client wired to a scripted server, with its waits and logs
// recorded.
type harness struct {
	srv    *llmtest.Server
	client *llm.Client
	logs   *syncBuffer

	mu     sync.Mutex
	sleeps []time.Duration // guarded by mu
}

func newHarness(t testing.TB, mod func(*llm.Config)) *harness {
	t.Helper()
	h := &harness{srv: llmtest.NewServer(t, llmtest.WithAPIKey(testKey)), logs: &syncBuffer{}}
	cfg := llm.Config{
		BaseURL:    h.srv.URL(),
		APIKey:     testKey,
		Model:      "test-model",
		Timeout:    30 * time.Second,
		MaxRetries: 5,
		Logger:     slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Sleep: func(ctx context.Context, d time.Duration) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.sleeps = append(h.sleeps, d)
			return ctx.Err()
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.client = c
	return h
}

func (h *harness) waits() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.sleeps...)
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func userRequest(text string) llm.Request {
	return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: text}}}
}

var transitionSchema = `{"type":"object","properties":{"next_step":{"type":"string","enum":["COMPLETE","ASK"]},"summary":{"type":"string"}},"required":["next_step","summary"]}`

func TestRequestMapping(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\n fake image bytes")
	h := newHarness(t, nil)
	h.srv.Script(llmtest.Text("ok"))
	req := llm.Request{
		Model: "gpt-4o-mini",
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "You are Baton."},
			{Role: llm.RoleUser, Content: "List the files."},
			{Role: llm.RoleAssistant, Content: "Looking.", ToolCalls: []llm.ToolCall{
				{ID: "call_a", Name: "Bash", Arguments: `{"command":"ls"}`},
				{ID: "call_b", Name: "Glob"},
			}},
			{Role: llm.RoleTool, ToolCallID: "call_a", Name: "Bash", Content: "a.txt\nb.png"},
			{Role: llm.RoleTool, ToolCallID: "call_b", Content: "(none)"},
			{Role: llm.RoleUser, Content: "Here is b.png:", Parts: []llm.Part{
				{Type: llm.PartImage, ImageMIME: "image/png", ImageData: png},
				{Type: llm.PartText, Text: "What is in it?"},
			}},
		},
		Tools: []llm.ToolDef{
			{Name: "transition", Description: "End the step.", Parameters: []byte(transitionSchema)},
			{Name: "Glob", Description: "Find files."},
		},
		MaxTokens:  512,
		ToolChoice: llm.ToolChoiceAuto,
	}
	if _, err := h.client.Complete(context.Background(), req); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	reqs := h.srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server got %d requests, want 1", len(reqs))
	}
	want := llmtest.Request{
		Model: "gpt-4o-mini",
		Messages: []llmtest.Message{
			{Role: "system", Content: "You are Baton."},
			{Role: "user", Content: "List the files."},
			{Role: "assistant", Content: "Looking.", ToolCalls: []llmtest.ToolCall{
				{ID: "call_a", Name: "Bash", Arguments: `{"command":"ls"}`},
				{ID: "call_b", Name: "Glob", Arguments: `{}`},
			}},
			{Role: "tool", ToolCallID: "call_a", Name: "Bash", Content: "a.txt\nb.png"},
			{Role: "tool", ToolCallID: "call_b", Content: "(none)"},
			{Role: "user", Parts: []llmtest.Part{
				{Type: "text", Text: "Here is b.png:"},
				{Type: "image_url", ImageURL: "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)},
				{Type: "text", Text: "What is in it?"},
			}},
		},
		Tools: []llmtest.Tool{
			{Name: "transition", Description: "End the step.", Parameters: []byte(transitionSchema)},
			{Name: "Glob", Description: "Find files.", Parameters: []byte(`{"type":"object","properties":{}}`)},
		},
		ToolChoice: "auto",
		MaxTokens:  512,
	}
	if diff := cmp.Diff(want, reqs[0], cmpopts.IgnoreFields(llmtest.Request{}, "Raw")); diff != "" {
		t.Errorf("request sent (-want +got):\n%s", diff)
	}
	if !bytes.Contains(reqs[0].Raw, []byte(`"max_tokens":512`)) {
		t.Errorf("raw body lacks max_tokens: %s", reqs[0].Raw)
	}
}

func TestRequestModel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		model     string
		wantModel string
		wantField string
	}{
		{"config model", "", "test-model", `"max_tokens":100`},
		{"request model", "llama3.1:8b", "llama3.1:8b", `"max_tokens":100`},
		{"reasoning model wants max_completion_tokens", "o3-mini", "o3-mini", `"max_completion_tokens":100`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil)
			h.srv.Script(llmtest.Text("ok"))
			req := userRequest("hi")
			req.Model, req.MaxTokens = tt.model, 100
			if _, err := h.client.Complete(context.Background(), req); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			got := h.srv.Requests()[0]
			if got.Model != tt.wantModel {
				t.Errorf("model = %q, want %q", got.Model, tt.wantModel)
			}
			if !bytes.Contains(got.Raw, []byte(tt.wantField)) {
				t.Errorf("body lacks %s: %s", tt.wantField, got.Raw)
			}
		})
	}
}

func TestRequestInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  llm.Request
	}{
		{"no messages", llm.Request{}},
		{"unknown role", llm.Request{Messages: []llm.Message{{Role: "robot", Content: "x"}}}},
		{"unknown part", llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: "audio"}}}}}},
		{"empty image", llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartImage}}}}}},
		{"bad schema", llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}},
			Tools: []llm.ToolDef{{Name: "t", Parameters: []byte(`{"type":`)}}}},
		{"bad tool choice", llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}, ToolChoice: "required!"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil)
			if _, err := h.client.Complete(context.Background(), tt.req); err == nil {
				t.Fatal("Complete succeeded, want an error")
			}
			if n := len(h.srv.Requests()); n != 0 {
				t.Errorf("server got %d requests, want none", n)
			}
		})
	}
}

func TestResponseMapping(t *testing.T) {
	t.Parallel()
	tools := []llm.ToolDef{{Name: "transition"}, {Name: "Bash"}}
	tests := []struct {
		name   string
		step   llmtest.Step
		tools  []llm.ToolDef
		choice string
		want   llm.Response
	}{
		{
			name: "text with usage",
			step: llmtest.Text("Hello.").WithUsage(120, 7),
			want: llm.Response{
				Message:      llm.Message{Role: llm.RoleAssistant, Content: "Hello."},
				FinishReason: "stop",
				Usage:        llm.Usage{PromptTokens: 120, CompletionTokens: 7, Reported: true},
			},
		},
		{
			name: "text without usage",
			step: llmtest.Text("Hello."),
			want: llm.Response{
				Message:      llm.Message{Role: llm.RoleAssistant, Content: "Hello."},
				FinishReason: "stop",
			},
		},
		{
			name: "usage reported as zeros is still reported",
			step: llmtest.Text("Hello.").WithUsage(0, 0),
			want: llm.Response{
				Message:      llm.Message{Role: llm.RoleAssistant, Content: "Hello."},
				FinishReason: "stop",
				Usage:        llm.Usage{Reported: true},
			},
		},
		{
			name:  "tool calls with cached tokens",
			tools: tools,
			step: llmtest.Calls(
				llmtest.Call("Bash", `{"command":"ls"}`),
				llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"done"}`),
			).WithUsage(2000, 40).WithCached(1536),
			want: llm.Response{
				Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
					{ID: "call_1", Name: "Bash", Arguments: `{"command":"ls"}`},
					{ID: "call_2", Name: "transition", Arguments: `{"next_step":"COMPLETE","summary":"done"}`},
				}},
				FinishReason: "tool_calls",
				Usage:        llm.Usage{PromptTokens: 2000, CompletionTokens: 40, CachedTokens: 1536, Reported: true},
			},
		},
		{
			name:  "length finish",
			step:  llmtest.Text("cut sh").WithFinish("length"),
			tools: tools,
			want: llm.Response{
				Message:      llm.Message{Role: llm.RoleAssistant, Content: "cut sh"},
				FinishReason: "length",
			},
		},
		{
			name:  "tool call in content",
			tools: tools,
			step:  llmtest.Text(`{"name":"Bash","arguments":{"command":"ls"}}`),
			want: llm.Response{
				Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
					{Name: "Bash", Arguments: `{"command":"ls"}`},
				}},
				FinishReason: "stop",
				TextCalls:    1,
			},
		},
		{
			name:   "tool-call-shaped content when tool choice is none",
			tools:  tools,
			choice: llm.ToolChoiceNone,
			step:   llmtest.Text(`{"name":"Bash","arguments":{}}`),
			want: llm.Response{
				Message:      llm.Message{Role: llm.RoleAssistant, Content: `{"name":"Bash","arguments":{}}`},
				FinishReason: "stop",
			},
		},
		{
			name: "tool-call-shaped content when no tools were offered",
			step: llmtest.Text(`{"name":"Bash","arguments":{}}`),
			want: llm.Response{
				Message:      llm.Message{Role: llm.RoleAssistant, Content: `{"name":"Bash","arguments":{}}`},
				FinishReason: "stop",
			},
		},
		{
			name:  "content naming an unknown tool stays text",
			tools: tools,
			step:  llmtest.Text(`<tool_call>{"name":"rm_rf","arguments":{}}</tool_call>`),
			want: llm.Response{
				Message:      llm.Message{Role: llm.RoleAssistant, Content: `<tool_call>{"name":"rm_rf","arguments":{}}</tool_call>`},
				FinishReason: "stop",
				UnreadCall:   true,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil)
			h.srv.Script(tt.step)
			req := userRequest("go")
			req.Tools, req.ToolChoice = tt.tools, tt.choice
			got, err := h.client.Complete(context.Background(), req)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			opts := cmp.Options{}
			if len(tt.want.Message.ToolCalls) > 0 && tt.want.Message.ToolCalls[0].ID == "" {
				// Ids of calls found in text are generated; check them apart.
				opts = append(opts, cmpopts.IgnoreFields(llm.ToolCall{}, "ID"))
				for _, c := range got.Message.ToolCalls {
					if c.ID == "" {
						t.Errorf("call %q has no id", c.Name)
					}
				}
			}
			if diff := cmp.Diff(tt.want, got, opts); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetriesThenSuccess(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		steps     []llmtest.Step
		timeout   time.Duration
		wantWaits []time.Duration // exact; nil checks count and bounds only
		wantCount int
	}{
		{
			name:      "429 with Retry-After in seconds",
			steps:     []llmtest.Step{llmtest.Status(429).WithRetryAfter("7"), llmtest.Text("ok")},
			wantWaits: []time.Duration{7 * time.Second},
		},
		{
			name:      "429 twice, Retry-After honoured each time",
			steps:     []llmtest.Step{llmtest.Status(429).WithRetryAfter("2"), llmtest.Status(429).WithRetryAfter("3"), llmtest.Text("ok")},
			wantWaits: []time.Duration{2 * time.Second, 3 * time.Second},
		},
		{
			name:      "Retry-After beyond five minutes is capped",
			steps:     []llmtest.Step{llmtest.Status(503).WithRetryAfter("86400"), llmtest.Text("ok")},
			wantWaits: []time.Duration{5 * time.Minute},
		},
		{
			name:      "429 without Retry-After backs off",
			steps:     []llmtest.Step{llmtest.Status(429), llmtest.Text("ok")},
			wantCount: 1,
		},
		{
			name:      "500, 502, 503",
			steps:     []llmtest.Step{llmtest.Status(500), llmtest.Status(502), llmtest.Status(503), llmtest.Text("ok")},
			wantCount: 3,
		},
		{
			name:      "non-JSON gateway error page",
			steps:     []llmtest.Step{llmtest.Status(502).WithBody("<html>Bad Gateway</html>"), llmtest.Text("ok")},
			wantCount: 1,
		},
		{
			name:      "timeout",
			steps:     []llmtest.Step{llmtest.Text("too late").After(time.Hour), llmtest.Text("ok")},
			timeout:   2 * time.Second,
			wantCount: 1,
		},
		{
			name:      "truncated reply",
			steps:     []llmtest.Step{llmtest.Raw(`{"id":"x","choices":[{"message":{"role":"assis`), llmtest.Text("ok")},
			wantCount: 1,
		},
		{
			name:      "rate-limit message as text",
			steps:     []llmtest.Step{llmtest.Text("Rate limit reached for gpt-4o in organization org-x on tokens per min."), llmtest.Text("ok")},
			wantCount: 1,
		},
		{
			name:      "quota message in Japanese",
			steps:     []llmtest.Step{llmtest.Text("レート制限に達しました。しばらくしてから再試行してください。"), llmtest.Text("ok")},
			wantCount: 1,
		},
		{
			name:      "no choices",
			steps:     []llmtest.Step{llmtest.Raw(`{"id":"x","object":"chat.completion","choices":[]}`), llmtest.Text("ok")},
			wantCount: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *llm.Config) {
				if tt.timeout > 0 {
					c.Timeout = tt.timeout
				}
			})
			h.srv.Script(tt.steps...)
			got, err := h.client.Complete(context.Background(), userRequest("go"))
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if got.Message.Content != "ok" {
				t.Errorf("content = %q, want %q", got.Message.Content, "ok")
			}
			if n := len(h.srv.Requests()); n != len(tt.steps) {
				t.Errorf("server got %d requests, want %d", n, len(tt.steps))
			}
			waits := h.waits()
			if tt.wantWaits != nil {
				if diff := cmp.Diff(tt.wantWaits, waits); diff != "" {
					t.Errorf("waits (-want +got):\n%s", diff)
				}
				return
			}
			if len(waits) != tt.wantCount {
				t.Fatalf("waited %d times (%v), want %d", len(waits), waits, tt.wantCount)
			}
			for i, w := range waits {
				if w <= 0 || w > 30*time.Second {
					t.Errorf("wait %d = %v, want in (0, 30s]", i, w)
				}
			}
		})
	}
}

func TestBackoffGrows(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *llm.Config) { c.MaxRetries = 8 })
	for range 8 {
		h.srv.Script(llmtest.Status(503))
	}
	h.srv.Script(llmtest.Text("ok"))
	if _, err := h.client.Complete(context.Background(), userRequest("go")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	waits := h.waits()
	if len(waits) != 8 {
		t.Fatalf("waited %d times, want 8", len(waits))
	}
	// Jitter keeps each wait within [d/2, d] of the nominal 1s·2ⁿ, capped at 30s.
	for i, w := range waits {
		nominal := min(time.Second<<i, 30*time.Second)
		if w < nominal/2 || w > nominal {
			t.Errorf("wait %d = %v, want within [%v, %v]", i, w, nominal/2, nominal)
		}
	}
}

func TestGivesUp(t *testing.T) {
	t.Parallel()
	// The server echoes the key back, as some providers do in error messages.
	leak := `{"error":{"message":"slow down, key ` + testKey + `","type":"server_error"}}`
	tests := []struct {
		name       string
		maxRetries int
		step       llmtest.Step
		wantErr    string
		wantStatus int
	}{
		{"429", 5, llmtest.Status(429).WithBody(leak),
			"the language model kept failing: 429 Too Many Requests after 5 retries", 429},
		{"503", 2, llmtest.Status(503).WithBody(leak),
			"the language model kept failing: 503 Service Unavailable after 2 retries", 503},
		{"one retry", 1, llmtest.Status(500).WithBody(leak),
			"the language model kept failing: 500 Internal Server Error after 1 retry", 500},
		{"no retries", 0, llmtest.Status(502).WithBody(leak),
			"the language model kept failing: 502 Bad Gateway after 0 retries", 502},
		{"rate-limit text", 2, llmtest.Text("You exceeded your current quota, please check your plan (" + testKey + ")."),
			"the language model kept failing: a rate-limit message instead of an answer after 2 retries", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *llm.Config) { c.MaxRetries = tt.maxRetries })
			for range tt.maxRetries + 1 {
				h.srv.Script(tt.step)
			}
			_, err := h.client.Complete(context.Background(), userRequest("go"))
			if !errors.Is(err, llm.ErrUnavailable) {
				t.Fatalf("err = %v, want ErrUnavailable", err)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("err = %q, want %q", err, tt.wantErr)
			}
			var se *llm.StatusError
			if tt.wantStatus != 0 {
				if !errors.As(err, &se) || se.StatusCode != tt.wantStatus {
					t.Errorf("err does not wrap a StatusError %d: %#v", tt.wantStatus, err)
				} else if !strings.Contains(se.Message, "slow down") {
					t.Errorf("StatusError.Message = %q, want the server's message", se.Message)
				}
			}
			if n := len(h.srv.Requests()); n != tt.maxRetries+1 {
				t.Errorf("server got %d requests, want %d", n, tt.maxRetries+1)
			}
			assertNoKey(t, err, h.logs.String())
			if h.srv.Pending() != 0 {
				t.Errorf("%d scripted steps left", h.srv.Pending())
			}
		})
	}
}

func assertNoKey(t *testing.T, err error, logs string) {
	t.Helper()
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.Contains(e.Error(), testKey) {
			t.Errorf("error reveals the API key: %q", e)
		}
	}
	var se *llm.StatusError
	if errors.As(err, &se) && strings.Contains(se.Message, testKey) {
		t.Errorf("StatusError reveals the API key: %q", se.Message)
	}
	if strings.Contains(logs, testKey) {
		t.Errorf("logs reveal the API key:\n%s", logs)
	}
	if logs == "" {
		t.Error("nothing was logged")
	}
}

func TestNotRetried(t *testing.T) {
	t.Parallel()
	leak := `{"error":{"message":"Incorrect API key provided: ` + testKey + `","type":"invalid_request_error","code":"invalid_api_key"}}`
	tests := []struct {
		name     string
		step     llmtest.Step
		key      string // sent by the client; empty means the right one
		wantCode int
		wantText string
	}{
		{"400 context too long", llmtest.Status(400).WithBody(`{"error":{"message":"maximum context length is 128000 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`),
			"", 400, "400 Bad Request: maximum context length is 128000 tokens"},
		{"401 echoing the key", llmtest.Status(401).WithBody(leak), "", 401,
			"401 Unauthorized: Incorrect API key provided: [redacted]"},
		{"401 from a wrong key", llmtest.Text("never sent"), "sk-wrong", 401,
			"401 Unauthorized: Incorrect API key provided."},
		{"403", llmtest.Status(403), "", 403, "403 Forbidden: scripted Forbidden"},
		{"404", llmtest.Status(404), "", 404, "404 Not Found: scripted Not Found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *llm.Config) {
				if tt.key != "" {
					c.APIKey = tt.key
				}
			})
			h.srv.Script(tt.step)
			_, err := h.client.Complete(context.Background(), userRequest("go"))
			if err == nil {
				t.Fatal("Complete succeeded, want an error")
			}
			if errors.Is(err, llm.ErrUnavailable) {
				t.Errorf("err = %v, must not be ErrUnavailable", err)
			}
			var se *llm.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a *StatusError", err)
			}
			if se.StatusCode != tt.wantCode {
				t.Errorf("status = %d, want %d", se.StatusCode, tt.wantCode)
			}
			if se.Error() != tt.wantText {
				t.Errorf("StatusError = %q, want %q", se.Error(), tt.wantText)
			}
			if w := h.waits(); len(w) != 0 {
				t.Errorf("waited %v, want no retry", w)
			}
			if tt.key == "" {
				if n := len(h.srv.Requests()); n != 1 {
					t.Errorf("server got %d requests, want 1", n)
				}
			}
			assertNoKey(t, err, h.logs.String())
		})
	}
}

func TestStatusErrorCode(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Script(llmtest.Status(400).WithBody(`{"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}`))
	_, err := h.client.Complete(context.Background(), userRequest("go"))
	var se *llm.StatusError
	if !errors.As(err, &se) || se.Code != "context_length_exceeded" {
		t.Fatalf("err = %#v, want a StatusError with code context_length_exceeded", err)
	}
}

func TestConnectionErrors(t *testing.T) {
	t.Parallel()
	// A server that hangs up on every request.
	var hits atomic.Int32
	hangup := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(hangup.Close)
	var waits []time.Duration
	c, err := llm.New(llm.Config{
		BaseURL: hangup.URL + "/v1", APIKey: testKey, Model: "m", MaxRetries: 3,
		Sleep: func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Complete(context.Background(), userRequest("go"))
	want := "the language model kept failing: the connection closed before the reply after 3 retries"
	if !errors.Is(err, llm.ErrUnavailable) || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if hits.Load() != 4 || len(waits) != 3 {
		t.Errorf("hits = %d, waits = %d; want 4 and 3", hits.Load(), len(waits))
	}
}

func TestContextEnds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	h.srv.Handle(func(llmtest.Request) llmtest.Step {
		cancel() // the job is aborted while the server is failing
		return llmtest.Status(503)
	})
	_, err := h.client.Complete(ctx, userRequest("go"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if errors.Is(err, llm.ErrUnavailable) {
		t.Errorf("err = %v, must not be ErrUnavailable", err)
	}
	if n := len(h.srv.Requests()); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, base := range []string{"", "localhost:8080", "ftp://x/v1", "http://"} {
		if _, err := llm.New(llm.Config{BaseURL: base}); err == nil {
			t.Errorf("New(%q) succeeded, want an error", base)
		}
	}
	if _, err := llm.New(llm.Config{BaseURL: "http://localhost:11434/v1"}); err != nil {
		t.Errorf("New: %v", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.srv.Handle(func(req llmtest.Request) llmtest.Step {
		return llmtest.Text("echo "+req.Messages[0].Content).WithUsage(1, 1)
	})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			msg := strings.Repeat("x", i)
			resp, err := h.client.Complete(context.Background(), userRequest(msg))
			if err == nil && resp.Message.Content != "echo "+msg {
				err = errors.New("crossed reply: " + resp.Message.Content)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
}

func TestIsContextOverflow(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&llm.StatusError{StatusCode: 400, Code: "context_length_exceeded"}, true},
		{fmt.Errorf("wrapped: %w", &llm.StatusError{StatusCode: 400, Message: "This model's maximum context length is 8192 tokens"}), true},
		{&llm.StatusError{StatusCode: 400, Message: "the request exceeds the context window"}, true},
		{&llm.StatusError{StatusCode: 413, Message: "prompt is too long"}, true},
		{&llm.StatusError{StatusCode: 400, Message: "invalid tool schema"}, false},
		{&llm.StatusError{StatusCode: 500, Message: "context length"}, false},
		{errors.New("context length"), false},
	}
	for _, tt := range tests {
		if got := llm.IsContextOverflow(tt.err); got != tt.want {
			t.Errorf("IsContextOverflow(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
