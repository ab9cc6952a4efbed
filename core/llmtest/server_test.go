package llmtest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// recordingTB keeps the errors a Server reports instead of failing the test.
type recordingTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string // guarded by mu
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

const minimal = `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false}`

// post sends body to the server and returns the status, headers and decoded body.
func post(t testing.TB, url, key, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("reply is not JSON: %v\n%s", err, raw)
	}
	return resp.StatusCode, resp.Header, out
}

func TestReplies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		step Step
		want string // the reply's choices and usage as JSON
	}{
		{
			name: "text without usage",
			step: Text("hello"),
			want: `{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"hello","role":"assistant"}}]}`,
		},
		{
			name: "tool calls with usage",
			step: Calls(Call("Bash", `{"command":"ls"}`), Call("transition", `{}`)).WithUsage(10, 2).WithCached(4),
			want: `{"choices":[{"finish_reason":"tool_calls","index":0,"message":{"content":null,"role":"assistant","tool_calls":[` +
				`{"function":{"arguments":"{\"command\":\"ls\"}","name":"Bash"},"id":"call_1","type":"function"},` +
				`{"function":{"arguments":"{}","name":"transition"},"id":"call_2","type":"function"}]}}],` +
				`"usage":{"completion_tokens":2,"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":4},"total_tokens":12}}`,
		},
		{
			name: "finish reason",
			step: Text("cut").WithFinish("length").WithUsage(1, 1),
			want: `{"choices":[{"finish_reason":"length","index":0,"message":{"content":"cut","role":"assistant"}}],` +
				`"usage":{"completion_tokens":1,"prompt_tokens":1,"total_tokens":2}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := NewServer(t)
			s.Script(tt.step)
			code, _, body := post(t, s.URL()+"/chat/completions", "", minimal)
			if code != http.StatusOK {
				t.Fatalf("status = %d", code)
			}
			if body["model"] != "m" || body["object"] != "chat.completion" {
				t.Errorf("model/object = %v/%v", body["model"], body["object"])
			}
			got := map[string]any{"choices": body["choices"]}
			if u, ok := body["usage"]; ok {
				got["usage"] = u
			}
			var want map[string]any
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorStep(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	s.Script(Status(429).WithRetryAfter("3"), Status(400).WithBody(`{"error":{"message":"custom"}}`))
	code, h, body := post(t, s.URL()+"/chat/completions", "", minimal)
	if code != 429 || h.Get("Retry-After") != "3" {
		t.Errorf("status %d, Retry-After %q; want 429, 3", code, h.Get("Retry-After"))
	}
	if e, _ := body["error"].(map[string]any); e == nil || e["code"] != "rate_limit_exceeded" {
		t.Errorf("error body = %v", body)
	}
	code, _, body = post(t, s.URL()+"/chat/completions", "", minimal)
	if e, _ := body["error"].(map[string]any); code != 400 || e == nil || e["message"] != "custom" {
		t.Errorf("status %d, body %v; want 400 with the custom body", code, body)
	}
}

func TestScriptUsedUp(t *testing.T) {
	t.Parallel()
	rec := &recordingTB{TB: t}
	s := NewServer(rec)
	code, _, _ := post(t, s.URL()+"/chat/completions", "", minimal)
	if code != http.StatusInternalServerError {
		t.Errorf("status = %d, want 500", code)
	}
	errs := rec.errors()
	if len(errs) != 1 || !strings.Contains(errs[0], "script is used up") || !strings.Contains(errs[0], `user: "hi"`) {
		t.Errorf("reported %q, want one error naming the used-up script and the last message", errs)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("recorded %d requests, want 1", n)
	}
}

func TestHandlerAfterScript(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	s.Script(Text("scripted"))
	s.Handle(func(req Request) Step { return Text("dynamic " + req.Messages[0].Content) })
	var got []string
	for range 2 {
		_, _, body := post(t, s.URL()+"/chat/completions", "", minimal)
		msg := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
		got = append(got, msg["content"].(string))
	}
	if diff := cmp.Diff([]string{"scripted", "dynamic hi"}, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
	if s.Pending() != 0 {
		t.Errorf("Pending = %d, want 0", s.Pending())
	}
}

func TestRouting(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithAPIKey("sk-right"))
	s.Script(Text("ok"))
	tests := []struct {
		name, method, path, key string
		want                    int
	}{
		{"other path", http.MethodPost, "/v1/completions", "sk-right", 404},
		{"GET", http.MethodGet, "/v1/chat/completions", "sk-right", 404},
		{"no key", http.MethodPost, "/v1/chat/completions", "", 401},
		{"wrong key", http.MethodPost, "/v1/chat/completions", "sk-wrong", 401},
		{"right key", http.MethodPost, "/v1/chat/completions", "sk-right", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, strings.TrimSuffix(s.URL(), "/v1")+tt.path, strings.NewReader(minimal))
			if err != nil {
				t.Fatal(err)
			}
			if tt.key != "" {
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("recorded %d requests, want only the authorised one", n)
	}
}

func TestRecordsRequest(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	s.Script(Text("ok"))
	body := `{"model":"gpt-x","max_completion_tokens":64,"tool_choice":"auto","stream":false,
	"messages":[
	 {"role":"system","content":"sys"},
	 {"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAA="}}]},
	 {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"Read","arguments":"{\"path\":\"a\"}"}}]},
	 {"role":"tool","tool_call_id":"c1","name":"Read","content":"text"}],
	"tools":[{"type":"function","function":{"name":"Read","description":"Read a file.","parameters":{ "type": "object" }}}]}`
	if code, _, _ := post(t, s.URL()+"/chat/completions", "", body); code != 200 {
		t.Fatalf("status = %d", code)
	}
	got := s.Requests()
	want := []Request{{
		Model: "gpt-x", MaxTokens: 64, MaxTokensParam: "max_completion_tokens", ToolChoice: "auto",
		Messages: []Message{
			{Role: "system", Content: "sys"},
			{Role: "user", Parts: []Part{{Type: "text", Text: "look"}, {Type: "image_url", ImageURL: "data:image/png;base64,AAA="}}},
			{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Name: "Read", Arguments: `{"path":"a"}`}}},
			{Role: "tool", ToolCallID: "c1", Name: "Read", Content: "text"},
		},
		Tools: []Tool{{Name: "Read", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object"}`)}},
		Raw:   []byte(body),
	}}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Request{}, "Header", "Query")); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
	}
	if got[0].Messages[1].Text() != "look" || got[0].ToolNames()[0] != "Read" {
		t.Errorf("Text/ToolNames = %q/%q", got[0].Messages[1].Text(), got[0].ToolNames())
	}
}

func TestStreamServed(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	s.Script(Text("never mind").Streamed(5).WithUsage(3, 2))
	resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	code, body := resp.StatusCode, string(raw)
	if code != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") || !strings.Contains(body, `"content":"never"`) ||
		!strings.Contains(body, `"content":" mind"`) || !strings.Contains(body, `"usage":{"prompt_tokens":3`) {
		t.Errorf("status %d, stream:\n%s", code, body)
	}
	if r := s.Requests()[0]; !r.Stream || !r.IncludeUsage {
		t.Errorf("recorded %+v", r)
	}
}

func TestDelayEndsWhenClientGivesUp(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	s.Script(Text("late").After(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(minimal))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	// Wait until the server holds the request, then give up.
	for len(s.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("request succeeded, want it cancelled")
	}
	// Cleanup closes the server; it would hang for an hour were the delay not cut.
}

// TestModels: GET /v1/models answers the list WithModels gives, behind the
// key; without the option it answers 404, as before.
func TestModels(t *testing.T) {
	t.Parallel()
	get := func(t *testing.T, s *Server, key string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, s.URL()+"/models", nil)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	s := NewServer(t, WithAPIKey("sk-right"), WithModels(Model{ID: "m1", ContextLength: 8192}, Model{ID: "m2"}))
	code, body := get(t, s, "sk-right")
	want := `{"object":"list","data":[{"id":"m1","object":"model","owned_by":"llmtest","context_length":8192},{"id":"m2","object":"model","owned_by":"llmtest"}]}`
	if code != 200 || body != want {
		t.Errorf("GET /v1/models = %d %s, want 200 %s", code, body, want)
	}
	if code, _ := get(t, s, "sk-wrong"); code != 401 {
		t.Errorf("wrong key: %d, want 401", code)
	}
	if code, _ := get(t, NewServer(t), ""); code != 404 {
		t.Errorf("without WithModels: %d, want 404", code)
	}
}

// TestPersonasNameSources: every persona names the published pages its
// shapes follow, and renders a reply its client can read as JSON.
func TestPersonasNameSources(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, p := range Personas() {
		if seen[p.Title] {
			t.Errorf("two personas titled %q", p.Title)
		}
		seen[p.Title] = true
		if len(p.Sources) == 0 || p.Model == "" || p.Body == nil || p.Stream == nil {
			t.Errorf("persona %q lacks sources, a model or a renderer", p.Title)
		}
		for _, src := range p.Sources {
			if !strings.HasPrefix(src, "https://") {
				t.Errorf("persona %q: source %q is not a URL", p.Title, src)
			}
		}
		r := Rendered{ID: "chatcmpl-1", Model: p.Model, Text: "hi", Calls: []ToolCall{{ID: "call_1", Name: "Read", Arguments: `{"path":"a"}`}},
			Finish: "tool_calls", Usage: &Usage{PromptTokens: 10, CompletionTokens: 2}, IncludeUsage: true, Piece: 4}
		if !json.Valid([]byte(p.Body(r))) {
			t.Errorf("persona %q: the body is not JSON:\n%s", p.Title, p.Body(r))
		}
		events := p.Stream(r)
		if events[len(events)-1] != "[DONE]" {
			t.Errorf("persona %q: the stream does not end with [DONE]", p.Title)
		}
		for _, e := range events[:len(events)-1] {
			if !strings.HasPrefix(e, ":") && !json.Valid([]byte(e)) {
				t.Errorf("persona %q: an event is not JSON: %s", p.Title, e)
			}
		}
	}
}

var updateSources = flag.Bool("update", false, "rewrite testdata/personas.md")

// TestPersonaSourcesListed: testdata/personas.md lists every persona with
// the pages its replies follow (regenerate with -update).
func TestPersonaSourcesListed(t *testing.T) {
	var b strings.Builder
	b.WriteString("# Provider personas and their sources\n\nGenerated from core/llmtest/persona_*.go by `go test ./core/llmtest -run TestPersonaSourcesListed -update`.\n")
	for _, p := range Personas() {
		fmt.Fprintf(&b, "\n## %s (llm.provider %s, model %s)\n\n", p.Title, p.Name, p.Model)
		for _, src := range p.Sources {
			b.WriteString("- " + src + "\n")
		}
	}
	const path = "testdata/personas.md"
	if *updateSources {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != b.String() {
		t.Errorf("%s is out of date (%v); run go test ./core/llmtest -run TestPersonaSourcesListed -update", path, err)
	}
}
