package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/llmtest"
)

func TestRepairJSON(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{`{"a": 1,}`, `{"a": 1}`, true},
		{"[1, 2,\n]", "[1, 2\n]", true},
		{`{'path': 'it\'s "here"'}`, `{"path": "it's \"here\""}`, true},
		{"{\"text\": \"line 1\nline 2\tend\"}", `{"text": "line 1\nline 2\tend"}`, true},
		{`{"a": "x,}"}`, `{"a": "x,}"}`, false}, // valid already: nothing to repair
		{`{"a": 1`, `{"a": 1`, false},           // a missing brace is not guessed
		{`not json`, `not json`, false},
		{`{"a": [1,], "b": {"c": 'd',},}`, `{"a": [1], "b": {"c": "d"}}`, true},
	}
	for _, tt := range tests {
		got, ok := llm.RepairJSON(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("RepairJSON(%q) = %q, %t; want %q, %t", tt.in, got, ok, tt.want, tt.ok)
		}
		if ok && !json.Valid([]byte(got)) {
			t.Errorf("RepairJSON(%q) = %q, not valid JSON", tt.in, got)
		}
	}
}

func TestLooksLikeToolCall(t *testing.T) {
	for _, tt := range []struct {
		text string
		want bool
	}{
		{"<tool_call>{\"name\": \"Bash\",</tool_call>", true},
		{"[TOOL_CALLS]Delete[ARGS]{}", true},
		{`{"name": "Delete", "arguments": {}}`, true},
		{"```json\n{\"name\": \"Bash\", \"arguments\": {\"command\": \n```", true},
		{"All done: the file is written.", false},
		{`The config is {"port": 8080}.`, false},
		{`{"name": "Alice", "age": 3}`, false},
		{`{"tool": "Write", "args": {"path": "a"`, true},
	} {
		if got := llm.LooksLikeToolCall(tt.text); got != tt.want {
			t.Errorf("LooksLikeToolCall(%q) = %t, want %t", tt.text, got, tt.want)
		}
	}
}

// TestTextCallsCounted: the client says which calls came from the text,
// which arguments it repaired, and when text looks like a call it could
// not read.
func TestTextCallsCounted(t *testing.T) {
	h := newHarness(t, nil)
	tools := []llm.ToolDef{{Name: "Bash"}, {Name: "Read"}}
	h.srv.Script(
		llmtest.Text("<tool_call>{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}</tool_call>"),
		llmtest.Call("Read", `{'path': 'a.txt',}`),
		llmtest.Text(`<tool_call>{"name": "Delete", "arguments": {}}</tool_call>`),
	)
	ctx := context.Background()
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "go"}}, Tools: tools}

	r, err := h.client.Complete(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r.TextCalls != 1 || len(r.Message.ToolCalls) != 1 || r.Message.ToolCalls[0].Name != "Bash" || r.UnreadCall {
		t.Errorf("Hermes text call: %+v", r)
	}
	r, err = h.client.Complete(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r.TextCalls != 0 || r.RepairedCalls != 1 || r.Message.ToolCalls[0].Arguments != `{"path": "a.txt"}` {
		t.Errorf("native call with single quotes: %+v", r)
	}
	r, err = h.client.Complete(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Message.ToolCalls) != 0 || !r.UnreadCall {
		t.Errorf("a call naming a tool not offered: %+v, want no calls and UnreadCall", r)
	}
}

// TestNumCtx: with Config.NumCtx every request carries options.num_ctx,
// which Ollama reads; without it, no options at all.
func TestNumCtx(t *testing.T) {
	for _, n := range []int{0, 32768} {
		h := newHarness(t, func(c *llm.Config) { c.NumCtx = n })
		h.srv.Script(llmtest.Text("ok"))
		if _, err := h.client.Complete(context.Background(), userRequest("hi")); err != nil {
			t.Fatal(err)
		}
		var body struct {
			Options *struct {
				NumCtx int `json:"num_ctx"`
			} `json:"options"`
		}
		if err := json.Unmarshal(h.srv.Requests()[0].Raw, &body); err != nil {
			t.Fatal(err)
		}
		switch {
		case n == 0 && body.Options != nil:
			t.Errorf("NumCtx 0: options %+v sent", body.Options)
		case n > 0 && (body.Options == nil || body.Options.NumCtx != n):
			t.Errorf("NumCtx %d: options %+v", n, body.Options)
		}
	}
}

// TestUsageShapes: usage with fields beyond OpenAI's (Groq's timings,
// DeepSeek's cache hits, reasoning details) is read for what Baton needs;
// a reply without usage says so.
func TestUsageShapes(t *testing.T) {
	reply := func(usage string) string {
		return `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]` + usage + `}`
	}
	tests := []struct {
		name string
		body string
		want llm.Usage
	}{
		{"OpenAI with details", reply(`,"usage":{"prompt_tokens":2000,"completion_tokens":5,"total_tokens":2005,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"accepted_prediction_tokens":0}}`),
			llm.Usage{PromptTokens: 2000, CompletionTokens: 5, CachedTokens: 1920, Reported: true}},
		{"Groq's timings", reply(`,"usage":{"queue_time":0.02,"prompt_tokens":30,"prompt_time":0.001,"completion_tokens":4,"completion_time":0.003,"total_tokens":34,"total_time":0.004}`),
			llm.Usage{PromptTokens: 30, CompletionTokens: 4, Reported: true}},
		{"DeepSeek's cache hits", reply(`,"usage":{"prompt_tokens":1500,"completion_tokens":7,"total_tokens":1507,"prompt_cache_hit_tokens":1280,"prompt_cache_miss_tokens":220}`),
			llm.Usage{PromptTokens: 1500, CompletionTokens: 7, CachedTokens: 1280, Reported: true}},
		{"no usage", reply(``), llm.Usage{}},
		{"null usage", reply(`,"usage":null`), llm.Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.srv.Script(llmtest.Raw(tt.body))
			r, err := h.client.Complete(context.Background(), userRequest("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if r.Usage != tt.want {
				t.Errorf("usage %+v, want %+v", r.Usage, tt.want)
			}
		})
	}
}

// TestJinjaMissingNotRetried: llama.cpp's 500 for tools without --jinja
// is not transient, so it is not retried.
func TestJinjaMissingNotRetried(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Script(llmtest.Status(500).WithBody(`{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}`))
	_, err := h.client.Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "go"}}, Tools: []llm.ToolDef{{Name: "Bash"}}})
	var se *llm.StatusError
	if !errors.As(err, &se) || se.StatusCode != 500 || !strings.Contains(err.Error(), "requires --jinja") {
		t.Fatalf("err = %v, want the server's 500", err)
	}
	if n := len(h.srv.Requests()); n != 1 || len(h.waits()) != 0 {
		t.Errorf("%d requests, %d waits; want one request, no retry", n, len(h.waits()))
	}
}
