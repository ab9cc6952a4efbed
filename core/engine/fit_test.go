package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
)

// completing is a piece whose forced transition is COMPLETE: a forced
// outcome there would look like success.
const completing = `
name: completing
description: test piece whose default next step is COMPLETE
movements:
  - name: answer
    persona: You are a test.
    instruction: Answer.
    tools: [Read]
    next: [COMPLETE]
    default_next: COMPLETE
`

// smallWindow gives a window of 2,000 tokens with 200 kept for the reply:
// the prompts and tool definitions take about 700, a request cut at the
// note's 8,000 characters of "word " about 1,600 more.
func smallWindow(c *engine.Config) { c.ContextWindow, c.MaxOutputTokens = 2000, 200 }

// TestFirstRequestThatCannotFitFails: with compaction off, a first request
// over the window ends the job as failed with a reason naming the window
// and the size — no forced "success", no model call.
func TestFirstRequestThatCannotFitFails(t *testing.T) {
	f := newFixture(t, map[string]string{"completing": completing}, smallWindow)
	f.srv.Script(llmtest.Transition("COMPLETE", "never sent"))
	fin := f.run(f.start("completing", strings.Repeat("word ", 10000)))
	if fin.To != core.JobFailed {
		t.Fatalf("finish = %+v, want failed", fin)
	}
	for _, want := range []string{"first request of step answer needs ", "llm.context_window is 2,000", "llm.max_output_tokens"} {
		if !strings.Contains(fin.Error, want) {
			t.Errorf("reason %q does not say %q", fin.Error, want)
		}
	}
	if strings.Contains(fin.Error, "forced") {
		t.Errorf("reason %q speaks of a forced transition", fin.Error)
	}
	if n := len(f.srv.Requests()); n != 0 {
		t.Errorf("%d model calls, want none", n)
	}
}

// TestFirstRequestShrunkWithCompaction: with compaction on, the same job
// has its request cut shorter (the full text saved to input/) and runs.
func TestFirstRequestShrunkWithCompaction(t *testing.T) {
	f := newFixture(t, map[string]string{"completing": completing}, smallWindow, compactionOn)
	f.srv.Script(llmtest.Transition("COMPLETE", "answered"))
	request := strings.Repeat("word ", 10000)
	j := f.start("completing", request)
	fin := f.run(j)
	if fin.To != core.JobSucceeded || fin.ResultSummary != "answered" {
		t.Fatalf("finish = %+v, want the model's answer", fin)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model calls, want 1", len(reqs))
	}
	user := reqs[0].Messages[1].Text()
	if strings.Contains(user, "cut here at 8000 characters") || !strings.Contains(user, "[The request was cut here at ") {
		t.Errorf("the request was not cut shorter than the note's 8,000 characters:\n%s", user)
	}
	full, err := os.ReadFile(filepath.Join(f.ws, "input", "request-1.txt"))
	if err != nil || string(full) != request {
		t.Errorf("the full request is not in input/request-1.txt (%d bytes, %v)", len(full), err)
	}
	if evs := f.contextEvents(j.ID); !contains(evs, "context_shrunk") {
		t.Errorf("context events %v, want context_shrunk", evs)
	}
}

// TestFirstRequestThatCannotShrinkFails: with compaction on, a first
// request whose bulk is not the enriched instruction (a long persona)
// still cannot fit, and the job fails saying so, without a model call.
func TestFirstRequestThatCannotShrinkFails(t *testing.T) {
	long := strings.Replace(completing, "persona: You are a test.", "persona: "+strings.Repeat("You are a careful test. ", 400), 1)
	f := newFixture(t, map[string]string{"completing": long}, smallWindow, compactionOn)
	f.srv.Script(llmtest.Transition("COMPLETE", "never sent"))
	fin := f.run(f.start("completing", "a short request"))
	if fin.To != core.JobFailed || !strings.Contains(fin.Error, "llm.context_window is 2,000") || !strings.Contains(fin.Error, "cut short") {
		t.Fatalf("finish = %+v, want failed naming the window after cutting", fin)
	}
	if n := len(f.srv.Requests()); n != 0 {
		t.Errorf("%d model calls, want none", n)
	}
}

// TestNoForcedTransitionBeforeTheFirstCall: a first request above the
// force level that fits the window is sent; the ladder forces the
// transition only after the model has answered once.
func TestNoForcedTransitionBeforeTheFirstCall(t *testing.T) {
	for _, tt := range []struct {
		name       string
		compaction bool
	}{{"compaction off", false}, {"compaction on", true}} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{"completing": completing}, func(c *engine.Config) {
				c.Levels = engine.Levels{Warn: 0.001, Prompt: 0.002, Force: 0.003, Exhausted: 0.99}
				c.Compaction.Enabled = tt.compaction
			})
			f.srv.Script(llmtest.Call("Read", `{"path":"input/none"}`), llmtest.Transition("COMPLETE", "too late"))
			j := f.start("completing", "x")
			fin := f.run(j)
			if n := len(f.srv.Requests()); n != 1 {
				t.Fatalf("%d model calls, want 1 (forced after the first)", n)
			}
			if !strings.Contains(fin.ResultSummary, "forced: the context window") {
				t.Errorf("finish = %+v, want forced after the first call", fin)
			}
			evs := f.contextEvents(j.ID)
			if !contains(evs, "context_force_transition") {
				t.Errorf("context events %v, want the forced transition", evs)
			}
		})
	}
}
