package main

import (
	"testing"
	"time"

	"github.com/baton-bot/baton/core/llm"
)

// TestReasoningTokensMetric: a reasoning model's thinking tokens are
// counted as baton_llm_tokens_total{kind="reasoning"}.
func TestReasoningTokensMetric(t *testing.T) {
	m := newMetrics()
	m.LLMCall("o4-mini", time.Second, llm.Usage{PromptTokens: 20, CompletionTokens: 300, ReasoningTokens: 256, Reported: true}, nil)
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "baton_llm_tokens_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == "reasoning" {
					if got := mt.GetCounter().GetValue(); got != 256 {
						t.Errorf("reasoning tokens = %v, want 256", got)
					}
					return
				}
			}
		}
	}
	t.Errorf("no baton_llm_tokens_total{kind=\"reasoning\"}")
}
