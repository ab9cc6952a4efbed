package llm_test

import (
	"context"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/google/go-cmp/cmp"
)

func streaming(c *llm.Config) { c.Stream = true }

func toolsReq(text string, names ...string) llm.Request {
	r := userRequest(text)
	for _, n := range names {
		r.Tools = append(r.Tools, llm.ToolDef{Name: n})
	}
	return r
}

func TestStreamAssemblesInterleavedCalls(t *testing.T) {
	t.Parallel()
	h := newHarness(t, streaming)
	h.srv.Script(llmtest.Calls(
		llmtest.Text("Reading three files — 日本語 too."),
		llmtest.Call("Read", `{"path":"a.txt"}`),
		llmtest.Call("Read", `{"path":"b/日本.txt"}`),
		llmtest.Call("Bash", `{"command":"echo hello world"}`),
	).Streamed(3).Interleaved().WithUsage(120, 30).WithKeepAlives().WrittenIn(5))
	var deltas []string
	req := toolsReq("go", "Read", "Bash")
	req.OnText = func(d string) { deltas = append(deltas, d) }
	resp, err := h.client.Complete(context.Background(), req)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	got := h.srv.Requests()[0]
	if !got.Stream || !got.IncludeUsage {
		t.Errorf("request stream=%v include_usage=%v, want both", got.Stream, got.IncludeUsage)
	}
	want := []llm.ToolCall{
		{ID: "call_1", Name: "Read", Arguments: `{"path":"a.txt"}`},
		{ID: "call_2", Name: "Read", Arguments: `{"path":"b/日本.txt"}`},
		{ID: "call_3", Name: "Bash", Arguments: `{"command":"echo hello world"}`},
	}
	if d := cmp.Diff(want, resp.Message.ToolCalls); d != "" {
		t.Errorf("tool calls (-want +got):\n%s", d)
	}
	if resp.Message.Content != "Reading three files — 日本語 too." || strings.Join(deltas, "") != resp.Message.Content || len(deltas) < 5 {
		t.Errorf("content %q from %d deltas %q", resp.Message.Content, len(deltas), deltas)
	}
	if resp.Usage != (llm.Usage{PromptTokens: 120, CompletionTokens: 30, Reported: true}) || resp.FinishReason != "tool_calls" {
		t.Errorf("usage %+v finish %q", resp.Usage, resp.FinishReason)
	}
}

func TestStreamCutIsRetriedWhole(t *testing.T) {
	t.Parallel()
	h := newHarness(t, streaming)
	answer := llmtest.Text("the whole answer, at last").Streamed(4)
	h.srv.Script(answer.CutAfterEvents(3), answer)
	var text strings.Builder
	restarts := 0
	req := userRequest("go")
	req.OnText = func(d string) { text.WriteString(d) }
	req.OnRestart = func() { restarts++; text.Reset() }
	resp, err := h.client.Complete(context.Background(), req)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if resp.Message.Content != "the whole answer, at last" || text.String() != resp.Message.Content || restarts != 1 {
		t.Errorf("content %q, text seen %q, restarts %d", resp.Message.Content, text.String(), restarts)
	}
	if n := len(h.srv.Requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
	if !strings.Contains(h.logs.String(), "the stream stopped before the reply was complete") {
		t.Errorf("logs do not name the cut:\n%s", h.logs.String())
	}
}

func TestStreamBadInput(t *testing.T) {
	t.Parallel()
	big := `{"content":"` + strings.Repeat("x", 5<<20) + `"}`
	for _, tc := range []struct {
		name string
		step llmtest.Step
		want string // content, or the call's arguments
	}{
		{"utf-8 split by the network", llmtest.Text("日本語のテキスト🎉").Streamed(4).WrittenIn(1), "日本語のテキスト🎉"},
		{"comments and keep-alives", llmtest.Text("kept alive").WithKeepAlives(), "kept alive"},
		{"crlf and multi-line data", llmtest.SSEBody(": hi\r\n\r\ndata: {\"choices\":[{\"index\":0,\r\ndata: \"delta\":{\"content\":\"crlf\"}}]}\r\n\r\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\ndata: [DONE]\r\n\r\n"), "crlf"},
		{"a plain reply to a stream request", llmtest.Raw(`{"choices":[{"index":0,"message":{"role":"assistant","content":"plain"},"finish_reason":"stop"}]}`), "plain"},
		{"5 MB arguments", llmtest.Call("Write", big).Streamed(1 << 20), big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, streaming)
			h.srv.Script(tc.step)
			resp, err := h.client.Complete(context.Background(), toolsReq("go", "Write"))
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			got := resp.Message.Content
			if len(resp.Message.ToolCalls) > 0 {
				got = resp.Message.ToolCalls[0].Arguments
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", clipped(got), clipped(tc.want))
			}
		})
	}
}

func clipped(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func TestErrorInside200(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		h := newHarness(t, func(c *llm.Config) { c.Stream = stream; c.MaxRetries = 1 })
		body := `{"error":{"message":"Upstream error from provider: overloaded","code":502}}`
		h.srv.Script(llmtest.Raw(body), llmtest.Text("fine"))
		resp, err := h.client.Complete(context.Background(), userRequest("go"))
		if err != nil || resp.Message.Content != "fine" {
			t.Errorf("stream %v: %q, %v; want the retry's answer", stream, resp.Message.Content, err)
		}
		if !strings.Contains(h.logs.String(), "an error inside a 200 reply: 502 Bad Gateway") {
			t.Errorf("stream %v: logs do not name the error in the 200:\n%s", stream, h.logs.String())
		}
		if !stream {
			continue
		}
		// A non-retryable one in a stream event comes back as it is.
		h.srv.Script(llmtest.SSEBody("data: {\"error\":{\"message\":\"This model's maximum context length is 8192 tokens\",\"code\":\"context_length_exceeded\"}}\n\n"))
		if _, err = h.client.Complete(context.Background(), userRequest("go")); !llm.IsContextOverflow(err) {
			t.Errorf("an overflow in a stream event: %v, want a context overflow", err)
		}
	}
}

func TestStreamToolCallIDsOfEarlierTurnAreReplaced(t *testing.T) {
	t.Parallel()
	h := newHarness(t, streaming)
	h.srv.Script(llmtest.Calls(
		llmtest.Step{ToolCalls: []llmtest.ToolCall{{ID: "call_0", Name: "Read", Arguments: `{}`}}},
		llmtest.Step{ToolCalls: []llmtest.ToolCall{{ID: "call_0", Name: "Bash", Arguments: `{}`}}},
	))
	req := toolsReq("go", "Read", "Bash")
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "Read", Arguments: `{}`}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "call_0", Content: "ok"},
		llm.Message{Role: llm.RoleUser, Content: "again"})
	resp, err := h.client.Complete(context.Background(), req)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	ids := map[string]bool{"call_0": true}
	for _, c := range resp.Message.ToolCalls {
		if ids[c.ID] || c.ID == "" {
			t.Errorf("call id %q repeats an earlier one", c.ID)
		}
		ids[c.ID] = true
	}
}

func TestStreamEndings(t *testing.T) {
	t.Parallel()
	h := newHarness(t, streaming)
	finishThenBreak := llmtest.Text("whole").Streamed(2)
	h.srv.Script(
		// finish_reason error: the provider failed; sent again.
		llmtest.SSEBody(`data: {"choices":[{"index":0,"delta":{"content":"par"},"finish_reason":null}]}`+"\n\n"+
			`data: {"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`+"\n\n"),
		llmtest.Text("after the error"),
		// The connection breaks after the finish chunk, before usage and
		// [DONE]: the answer is whole and taken.
		finishThenBreak.WithUsage(5, 5).CutAfterEvents(len(h.srv.Events(llmtest.Request{Model: "m"}, finishThenBreak))-1),
	)
	resp, err := h.client.Complete(context.Background(), userRequest("go"))
	if err != nil || resp.Message.Content != "after the error" {
		t.Errorf("after finish_reason error: %q, %v", resp.Message.Content, err)
	}
	resp, err = h.client.Complete(context.Background(), userRequest("go"))
	if err != nil || resp.Message.Content != "whole" || resp.Usage.Reported {
		t.Errorf("broken after the finish: %q %+v, %v", resp.Message.Content, resp.Usage, err)
	}
	if n := len(h.srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}
