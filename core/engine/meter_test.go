package engine

import (
	"testing"

	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/tokens"
)

// TestCorrectionLearnsTheProvidersCount: a provider counting 20 % more
// than the offline tokenizer teaches the factor, which then scales what is
// appended after the last reported usage; wild reports are bounded.
func TestCorrectionLearnsTheProvidersCount(t *testing.T) {
	var c correction
	if f := c.learn(100, 5000); f != 1 {
		t.Errorf("a sample below %d tokens taught the factor: %v", minSample, f)
	}
	for range 30 {
		c.learn(10000, 12000)
	}
	if f := c.current(); f < 1.19 || f > 1.21 {
		t.Errorf("factor = %v, want about 1.2", f)
	}
	var wild correction
	if f := wild.learn(1000, 1_000_000); f != maxFactor {
		t.Errorf("factor from a wild report = %v, want the bound %v", f, maxFactor)
	}

	m := newMeter(100000, tokens.Default(), 0)
	m.corr = &c
	text := "alpha beta gamma delta epsilon zeta eta theta iota kappa "
	for range 100 {
		m.appended(llm.Message{Role: llm.RoleUser, Content: text})
	}
	m.sending()
	m.appended(llm.Message{Role: llm.RoleAssistant, Content: "ok"})
	m.responded(llm.Usage{PromptTokens: m.sent * 12 / 10, CompletionTokens: 2, Reported: true})
	before := m.used()
	msg := llm.Message{Role: llm.RoleTool, Content: text}
	m.appended(msg)
	added := m.used() - before
	if raw := m.count(msg); added < raw*115/100 || added > raw*125/100 {
		t.Errorf("appending %d tokenizer tokens added %d, want them scaled by about 1.2", raw, added)
	}
	// Masking it back out returns the meter to where it was.
	m.replaced(len(m.counts)-1, llm.Message{Role: llm.RoleTool})
	if got := m.used(); got > before+m.scale(messageOverhead) || got < before {
		t.Errorf("after replacing the message: %d, want about %d", got, before)
	}
}

// TestDefCounts counts tool definitions as the tokenizer does, from memory
// the second time.
func TestDefCounts(t *testing.T) {
	counter := tokens.Default()
	defs := []llm.ToolDef{transitionDef(nil, []string{"COMPLETE", "ASK"}), transitionDef(nil, []string{"COMPLETE", "ABORT", "review"})}
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
