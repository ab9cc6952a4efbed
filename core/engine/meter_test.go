package engine

import (
	"testing"

	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/tokens"
)

// TestDefCounts counts tool definitions as the tokenizer does, from memory
// the second time.
func TestDefCounts(t *testing.T) {
	counter := tokens.Default()
	defs := []llm.ToolDef{transitionDef([]string{"COMPLETE", "ASK"}), transitionDef([]string{"COMPLETE", "ABORT", "review"})}
	want := 0
	for _, d := range defs {
		want += counter.Count(d.Name) + counter.Count(d.Description) + counter.Count(string(d.Parameters))
	}
	c := newDefCounts(counter)
	for round := range 2 {
		if got := c.count(defs); got != want || want == 0 {
			t.Errorf("round %d: count = %d, want %d", round, got, want)
		}
	}
	if len(c.counts) != 2 {
		t.Errorf("%d definitions remembered, want 2", len(c.counts))
	}
}
