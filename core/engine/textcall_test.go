package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/llmtest"
)

// textCallMeter is an engine.TextCallMeter that counts what it is told.
type textCallMeter struct {
	mu     sync.Mutex
	counts map[string]int // guarded by mu: by outcome
}

func (m *textCallMeter) LLMCall(string, time.Duration, llm.Usage, error) {}
func (m *textCallMeter) ToolCall(string, time.Duration, bool)            {}
func (m *textCallMeter) ContextLevel(string)                             {}
func (m *textCallMeter) Movement(string, string, time.Duration)          {}
func (m *textCallMeter) TokenEstimate(string, int, int, float64)         {}
func (m *textCallMeter) TextCalls(_, outcome string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = map[string]int{}
	}
	m.counts[outcome] += n
}

func (m *textCallMeter) count(outcome string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[outcome]
}

// eventsOf returns the details of job j's events of kind.
func eventsOf(t *testing.T, f *fixture, j core.Job, kind string) []string {
	t.Helper()
	evs, err := f.store.Events(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Kind == kind {
			out = append(out, e.Detail)
		}
	}
	return out
}

// TestHermesTextCallWrites: a model that writes its Write call as a
// Hermes <tool_call> block in its text, arguments in single quotes with a
// trailing comma, gets the file written in the workspace; the recovery is
// a job event and counted.
func TestHermesTextCallWrites(t *testing.T) {
	meter := &textCallMeter{}
	f := newFixture(t, map[string]string{"two-step": twoStep}, func(c *engine.Config) { c.Meter = meter })
	f.srv.Script(
		llmtest.Text("I will write the file.\n<tool_call>\n{\"name\": \"Write\", \"arguments\": {'path': 'output/hello.txt', 'content': 'hi from text',}}\n</tool_call>"),
		llmtest.Text(`<tool_call>{"name": "transition", "arguments": {"next_step": "second", "summary": "wrote it"}}</tool_call>`),
		llmtest.Transition("COMPLETE", "done"),
	)
	j := f.start("two-step", "write hello")
	fin := f.run(j)
	if fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	got, err := os.ReadFile(filepath.Join(f.ws, "output", "hello.txt"))
	if err != nil || string(got) != "hi from text" {
		t.Errorf("output/hello.txt = %q, %v", got, err)
	}
	// The result of the recovered call went back as a tool message answering it.
	second := f.srv.Requests()[1].Messages
	last := second[len(second)-1]
	if last.Role != "tool" || last.Name != "Write" || second[len(second)-2].ToolCalls[0].ID != last.ToolCallID {
		t.Errorf("second request ends %+v, want the Write call's result", last)
	}
	if evs := eventsOf(t, f, j, "tool_calls_from_text"); len(evs) != 2 || !strings.Contains(evs[0], "Write") {
		t.Errorf("tool_calls_from_text events %q, want one per recovered reply", evs)
	}
	if n := meter.count("recovered"); n != 2 {
		t.Errorf("recovered calls counted %d, want 2", n)
	}
}

// TestUnreadableTextCallTold: a model that writes a call Baton cannot
// read (a tool that does not exist, broken JSON) is told the format and
// the step's tools, and recovers on its next turn.
func TestUnreadableTextCallTold(t *testing.T) {
	meter := &textCallMeter{}
	f := newFixture(t, map[string]string{"two-step": twoStep}, func(c *engine.Config) { c.Meter = meter })
	f.srv.Script(
		llmtest.Text(`<tool_call>{"name": "WriteFile", "args": {"path": "output/a.txt"</tool_call>`),
		llmtest.Text(`<tool_call>{"name": "Write", "arguments": {"path": "output/a.txt", "content": "second try"}}</tool_call>`),
		llmtest.Transition("second", "wrote it"),
		llmtest.Transition("COMPLETE", "done"),
	)
	j := f.start("two-step", "write a")
	fin := f.run(j)
	if fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	msgs := f.srv.Requests()[1].Messages
	told := msgs[len(msgs)-1]
	if told.Role != "user" || !strings.Contains(told.Content, `<tool_call>{"name": "TOOL", "arguments": {…}}</tool_call>`) ||
		!strings.Contains(told.Content, "Tools: Read, Write, Checklist, transition.") {
		t.Errorf("after the unreadable call the model was sent %+v, want the format and the tools", told)
	}
	if got, err := os.ReadFile(filepath.Join(f.ws, "output", "a.txt")); err != nil || string(got) != "second try" {
		t.Errorf("output/a.txt = %q, %v", got, err)
	}
	if evs := eventsOf(t, f, j, "tool_call_unreadable"); len(evs) != 1 || !strings.Contains(evs[0], "WriteFile") {
		t.Errorf("tool_call_unreadable events %q", evs)
	}
	if n := meter.count("unreadable"); n != 1 {
		t.Errorf("unreadable calls counted %d, want 1", n)
	}
}

// noticeRecorder is an observer that keeps the notices it is asked to
// post in a thread.
type noticeRecorder struct {
	mu      sync.Mutex
	notices []string // guarded by mu
}

func (r *noticeRecorder) Observe(context.Context, engine.Status) {}

func (r *noticeRecorder) Notice(_ context.Context, _ int64, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notices = append(r.notices, text)
	return nil
}

// TestTruncatedPromptTold: a server that reports 2,048 prompt tokens for
// a request of some 9,000 (Ollama at its default num_ctx) is caught: a job
// event and, the first time only, a notice for the thread, both naming
// num_ctx and the server's context setting.
func TestTruncatedPromptTold(t *testing.T) {
	rec := &noticeRecorder{}
	f := newFixture(t, map[string]string{"two-step": twoStep}, func(c *engine.Config) { c.Observer = rec })
	big := f.inputFile("big.txt", 8000)
	f.srv.Script(
		read(big), // no usage: nothing learnt about the tokenizer
		llmtest.Call("Checklist", `{}`).WithUsage(2048, 10),
		llmtest.Transition("second", "read it").WithUsage(2048, 10),
		llmtest.Transition("COMPLETE", "done").WithUsage(900, 10),
	)
	j := f.start("two-step", "read big")
	if fin := f.run(j); fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	evs := eventsOf(t, f, j, "prompt_truncated")
	if len(evs) != 1 {
		t.Fatalf("prompt_truncated events %q, want one for the movement", evs)
	}
	for _, want := range []string{"counted 2,048 prompt tokens", "num_ctx", "llm.provider: ollama", "llama.cpp -c", "llm.context_window"} {
		if !strings.Contains(evs[0], want) {
			t.Errorf("event %q does not say %q", evs[0], want)
		}
	}
	m := regexp.MustCompile(`about ([0-9,]+)`).FindStringSubmatch(evs[0])
	if m == nil {
		t.Fatalf("event %q names no count of Baton's", evs[0])
	}
	if sent, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", "")); sent < 9000 || sent > 11000 {
		t.Errorf("event %q: Baton counted %d tokens, want about 9,000", evs[0], sent)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.notices) != 1 || rec.notices[0] != evs[0] {
		t.Errorf("notices %q, want the event's text once", rec.notices)
	}
}
