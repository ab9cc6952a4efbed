package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-bot/baton/core/engine"
)

// spendMetrics are the budgets' and loop guards' figures. Their labels are
// bounded: models are the configuration's, scopes and guard kinds the
// engine's few.
type spendMetrics struct {
	cost    *prometheus.CounterVec
	budgets *prometheus.CounterVec
	guards  *prometheus.CounterVec
}

var (
	_ engine.CostMeter   = (*metrics)(nil)
	_ engine.BudgetMeter = (*metrics)(nil)
	_ engine.GuardMeter  = (*metrics)(nil)
)

func newSpendMetrics(reg *prometheus.Registry) *spendMetrics {
	s := &spendMetrics{
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_llm_cost_dollars_total",
			Help: "Dollars the LLM's usage cost by llm.prices, by model."}, []string{"model"}),
		budgets: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_budget_reached_total",
			Help: "Jobs parked before a model request that would pass a budget, by scope (job, task, channel_daily, user_daily)."}, []string{"scope"}),
		guards: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_loop_guard_total",
			Help: "Loop guards tripped, by kind (repeat_calls_warned, repeat_calls, movement_cycles, max_duration)."}, []string{"kind"}),
	}
	reg.MustRegister(s.cost, s.budgets, s.guards)
	return s
}

// LLMCost implements engine.CostMeter.
func (m *metrics) LLMCost(model string, dollars float64) {
	m.spend.cost.WithLabelValues(model).Add(dollars)
}

// BudgetReached implements engine.BudgetMeter.
func (m *metrics) BudgetReached(scope string) { m.spend.budgets.WithLabelValues(scope).Inc() }

// GuardTripped implements engine.GuardMeter.
func (m *metrics) GuardTripped(kind string) { m.spend.guards.WithLabelValues(kind).Inc() }
