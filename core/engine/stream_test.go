package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/llmtest"
)

// streamingLLM streams, retries at once, and never sleeps.
func streamingLLM(c *llm.Config) {
	c.Stream, c.MaxRetries = true, 2
	c.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
}

// textLog records what the engine publishes of the streamed text.
type textLog struct {
	mu       sync.Mutex
	text     map[int64]string
	restarts int
}

func (l *textLog) options(c *engine.Config) {
	l.text = map[int64]string{}
	c.OnText = func(job int64, d string) { l.mu.Lock(); defer l.mu.Unlock(); l.text[job] += d }
	c.OnTextRestart = func(job int64) { l.mu.Lock(); defer l.mu.Unlock(); l.text[job] = ""; l.restarts++ }
}

func TestStreamedParallelToolCallsRunOnce(t *testing.T) {
	var tl textLog
	f := newFixtureLLM(t, map[string]string{"two-step": twoStep}, streamingLLM, tl.options)
	f.srv.Script(
		llmtest.Calls(
			llmtest.Text("Writing three files."),
			llmtest.Call("Write", `{"path":"output/a.txt","content":"alpha — α"}`),
			llmtest.Call("Write", `{"path":"output/b.txt","content":"bravo\nline two"}`),
			llmtest.Call("Write", `{"path":"output/c.txt","content":"charlie"}`),
		).Streamed(4).Interleaved().WithUsage(500, 60),
		llmtest.Transition("second", "written"),
		llmtest.Transition("COMPLETE", "all done"),
	)
	j := f.start("two-step", "write three files")
	if fin := f.run(j); fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	for name, want := range map[string]string{"a.txt": "alpha — α", "b.txt": "bravo\nline two", "c.txt": "charlie"} {
		got, err := os.ReadFile(filepath.Join(f.ws, "output", name))
		if err != nil || string(got) != want {
			t.Errorf("output/%s = %q, %v; want %q", name, got, err, want)
		}
	}
	reqs := f.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	results := map[string]int{}
	for _, m := range reqs[1].Messages {
		if m.Role == "tool" {
			results[m.ToolCallID]++
		}
	}
	if len(results) != 3 || results["call_1"] != 1 || results["call_2"] != 1 || results["call_3"] != 1 {
		t.Errorf("tool results by call id: %v; want one each for call_1..3", results)
	}
	if got := tl.text[j.ID]; got != "Writing three files." {
		t.Errorf("published text %q", got)
	}
}

func TestStreamCutMidwayRetriedJobEndsOnce(t *testing.T) {
	var tl textLog
	f := newFixtureLLM(t, map[string]string{"two-step": twoStep}, streamingLLM, tl.options)
	first := llmtest.Calls(
		llmtest.Text("Writing the file now."),
		llmtest.Call("Write", `{"path":"output/once.txt","content":"exactly once"}`),
	).Streamed(4)
	events := len(f.srv.Events(llmtest.Request{Model: "test-model"}, first))
	f.srv.Script(
		first.CutAfterEvents(events/2),
		first,
		llmtest.Transition("second", "written"),
		llmtest.Transition("COMPLETE", "all done"),
	)
	j := f.start("two-step", "write a file")
	fin := f.run(j)
	if fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	if got, err := os.ReadFile(filepath.Join(f.ws, "output", "once.txt")); err != nil || string(got) != "exactly once" {
		t.Errorf("output/once.txt = %q, %v", got, err)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 4 || f.srv.Pending() != 0 {
		t.Fatalf("%d requests (%d steps left), want 4: the cut one, its retry, two transitions", len(reqs), f.srv.Pending())
	}
	writes := 0
	for _, m := range reqs[2].Messages {
		if m.Role == "tool" {
			writes++
		}
	}
	if writes != 1 {
		t.Errorf("%d tool results after the retry, want 1", writes)
	}
	if tl.restarts != 1 || tl.text[j.ID] != "Writing the file now." {
		t.Errorf("restarts %d, text %q", tl.restarts, tl.text[j.ID])
	}
	// The same request twice: the retry is the whole request again.
	if string(reqs[0].Raw) != string(reqs[1].Raw) {
		t.Errorf("the retry differs from the cut request")
	}
}

func TestCutToolCallNotRunModelTold(t *testing.T) {
	for _, stream := range []bool{false, true} {
		f := newFixtureLLM(t, map[string]string{"two-step": twoStep}, func(c *llm.Config) { c.Stream = stream })
		f.srv.Script(
			llmtest.Calls(
				llmtest.Call("Write", `{"path":"output/whole.txt","content":"whole"}`),
				llmtest.Call("Write", `{"path":"output/cut.txt","content":"this is cu`),
			).WithFinish("length"),
			llmtest.Call("Write", `{"path":"output/cut.txt","content":"now whole"}`),
			llmtest.Transition("second", "written"),
			llmtest.Transition("COMPLETE", "all done"),
		)
		if fin := f.run(f.start("two-step", "write")); fin.To != core.JobSucceeded {
			t.Fatalf("stream %v: finish = %+v", stream, fin)
		}
		reqs := f.srv.Requests()
		msgs := reqs[1].Messages
		last := msgs[len(msgs)-1]
		asst := msgs[len(msgs)-3]
		if last.Role != "user" || !strings.Contains(last.Text(), "output token limit") || !strings.Contains(last.Text(), "Write") {
			t.Errorf("stream %v: the model is not told of the cut call: %+v", stream, last)
		}
		if len(asst.ToolCalls) != 1 || msgs[len(msgs)-2].Role != "tool" {
			t.Errorf("stream %v: the cut call is kept in the conversation: %+v", stream, msgs[len(msgs)-3:])
		}
		if got, _ := os.ReadFile(filepath.Join(f.ws, "output", "cut.txt")); string(got) != "now whole" {
			t.Errorf("stream %v: output/cut.txt = %q", stream, got)
		}
	}
}

func TestStreamedCallOfToolNotOffered(t *testing.T) {
	f := newFixtureLLM(t, map[string]string{"two-step": twoStep}, streamingLLM)
	f.srv.Script(
		llmtest.Call("Deploy", `{"to":"production"}`).Streamed(3),
		llmtest.Transition("second", "done"),
		llmtest.Transition("COMPLETE", "all done"),
	)
	if fin := f.run(f.start("two-step", "x")); fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	msgs := f.srv.Requests()[1].Messages
	if res := msgs[len(msgs)-1]; res.Role != "tool" || !strings.Contains(res.Text(), `There is no tool named "Deploy"`) {
		t.Errorf("the call of a tool not offered got %+v", res)
	}
}

func TestStreamedHugeArgumentsAndRepeatedIDs(t *testing.T) {
	f := newFixtureLLM(t, map[string]string{"two-step": twoStep}, streamingLLM)
	big := strings.Repeat("0123456789abcdef", 5<<20/16) // 5 MiB
	call := func(path, content string) llmtest.Step {
		// Every turn's call has the id call_0, as servers counting from
		// call_0 each turn send.
		return llmtest.Step{ToolCalls: []llmtest.ToolCall{{ID: "call_0", Name: "Write", Arguments: `{"path":"` + path + `","content":"` + content + `"}`}}}
	}
	f.srv.Script(
		call("output/one.txt", "one"),
		call("output/two.txt", "two"),
		// 5 MiB of arguments in pieces of 64 KiB; in the conversation they
		// fill the window, and the movement is moved on.
		call("output/big.txt", big).Streamed(64<<10),
		llmtest.Transition("COMPLETE", "all done"),
	)
	if fin := f.run(f.start("two-step", "write")); fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	if got, err := os.ReadFile(filepath.Join(f.ws, "output", "big.txt")); err != nil || len(got) != len(big) {
		t.Errorf("output/big.txt has %d bytes (%v), want %d", len(got), err, len(big))
	}
	for _, name := range []string{"one", "two"} {
		if got, _ := os.ReadFile(filepath.Join(f.ws, "output", name+".txt")); string(got) != name {
			t.Errorf("output/%s.txt = %q", name, got)
		}
	}
	reqs := f.srv.Requests()
	checkPairs(t, "the third request", reqs[2])
	ids := map[string]int{}
	for _, m := range reqs[2].Messages {
		if m.Role == "tool" {
			ids[m.ToolCallID]++
		}
	}
	if len(ids) != 2 {
		t.Errorf("tool results by id %v: want two distinct ids", ids)
	}
}

func TestOnlyCallCutLeavesNoEmptyAnswer(t *testing.T) {
	f := newFixtureLLM(t, map[string]string{"two-step": twoStep}, streamingLLM)
	f.srv.Script(
		llmtest.Call("Write", `{"path":"output/cut.txt","content":"this is cu`).WithFinish("length"),
		llmtest.Call("Write", `{"path":"output/cut.txt","content":"whole"}`),
		llmtest.Transition("second", "written"),
		llmtest.Transition("COMPLETE", "all done"),
	)
	if fin := f.run(f.start("two-step", "write")); fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	msgs := f.srv.Requests()[1].Messages
	last, before := msgs[len(msgs)-1], msgs[len(msgs)-2]
	if last.Role != "user" || !strings.Contains(last.Text(), "output token limit") || before.Role == "assistant" {
		t.Errorf("after a reply that was only the cut call: %+v then %+v", before, last)
	}
	if got, _ := os.ReadFile(filepath.Join(f.ws, "output", "cut.txt")); string(got) != "whole" {
		t.Errorf("output/cut.txt = %q", got)
	}
}
