package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/tokens"
)

const reader = `
name: reader
description: test piece that reads big outputs
movements:
  - name: work
    persona: You are a test.
    instruction: Read the files.
    tools: [Read, Bash]
    next: [COMPLETE]
    max_iterations: 10
`

// twiceTheTokenizer is the prompt tokens a provider whose tokens are twice
// the offline tokenizer's reports for req.
func twiceTheTokenizer(req llmtest.Request) int {
	c := tokens.Default()
	n := 0
	for _, m := range req.Messages {
		n += 4 + c.Count(m.Text())
		for _, call := range m.ToolCalls {
			n += c.Count(call.Name) + c.Count(call.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += c.Count(t.Name) + c.Count(t.Description) + c.Count(string(t.Parameters))
	}
	return 2 * n
}

// levelTokens returns the tokens the ladder counted when the job reached
// the context level kind (e.g. "context_warn"), from its event.
func (f *fixture) levelTokens(jobID int64, kind string) int {
	f.t.Helper()
	evs, err := f.store.Events(context.Background(), jobID)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind != kind {
			continue
		}
		var pct, used, window int
		if _, err := fmt.Sscanf(e.Detail, "context %d%% full (%d of %d tokens)", &pct, &used, &window); err != nil {
			f.t.Fatalf("%s detail %q: %v", kind, e.Detail, err)
		}
		return used
	}
	f.t.Fatalf("no %s event", kind)
	return 0
}

// TestToolBudgetInTheLaddersUnits: with a provider that counts twice the
// tokenizer's tokens (the correction learned is 2.0), one big Read or Bash
// result takes at most half of the room the ladder sees left: from about
// 20 % before the call, the next request is under 60 %, not forced.
func TestToolBudgetInTheLaddersUnits(t *testing.T) {
	for _, tt := range []struct{ name string }{{"Read"}, {"Bash"}} {
		t.Run(tt.name, func(t *testing.T) {
			const window = 100000
			f := newFixture(t, map[string]string{"reader": reader}, func(c *engine.Config) {
				c.ContextWindow, c.MaxOutputTokens = window, 1000
				// The warning fires before the second request (~20 %),
				// the wrap-up prompt before the third: their events
				// carry the ladder's count then.
				c.Levels = engine.Levels{Warn: 0.15, Prompt: 0.30, Force: 0.95, Exhausted: 0.99}
			})
			small := f.inputFile("small.txt", 9000)
			var big strings.Builder
			for i := range 3000 {
				fmt.Fprintf(&big, "line %05d %s\n", i, strings.Repeat("lorem ipsum dolor sit amet ", 20))
			}
			if err := os.WriteFile(filepath.Join(f.ws, "input", "big.txt"), []byte(big.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			var name, args string
			if tt.name == "Read" {
				name, args = "Read", `{"path":"input/big.txt"}`
			} else {
				name, args = "Bash", `{"command":"cat input/big.txt"}`
			}
			n := 0
			f.srv.Handle(func(req llmtest.Request) llmtest.Step {
				n++
				var s llmtest.Step
				switch n {
				case 1:
					s = read(small)
				case 2:
					s = llmtest.Call(name, args)
				default:
					s = llmtest.Transition("COMPLETE", "read")
				}
				return s.WithUsage(twiceTheTokenizer(req), 50)
			})
			j := f.start("reader", "x")
			fin := f.run(j)
			before := f.levelTokens(j.ID, "context_warn")
			after := f.levelTokens(j.ID, "context_prompt")
			if before < window/10 || before > window*3/10 {
				t.Fatalf("before the big result the ladder counted %d tokens; the test wants about 20 %% of %d", before, window)
			}
			if limit := before + (window-before)/2; after > limit {
				t.Errorf("one %s result took the ladder from %d to %d tokens of %d, over %d (half of the room left)", name, before, after, window, limit)
			}
			if fin.To != core.JobSucceeded || fin.ResultSummary != "read" {
				t.Errorf("finish = %+v, want the model's COMPLETE", fin)
			}
		})
	}
}
