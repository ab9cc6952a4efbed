package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/piece"
)

// PriceConfig is what a model's tokens cost, in dollars per million
// (llm.prices.<model>). CachedInput 0 charges cached prompt tokens at
// Input.
type PriceConfig struct {
	Input       float64 `yaml:"input"`
	CachedInput float64 `yaml:"cached_input"`
	Output      float64 `yaml:"output"`
}

// BudgetLimit is one budget: tokens (prompt plus completion) and cost in
// dollars; 0 is none.
type BudgetLimit struct {
	Tokens int64   `yaml:"tokens"`
	Cost   float64 `yaml:"cost"`
}

// BudgetScopes are the budgets of a job, its task, its channel's day and
// its requester's day.
type BudgetScopes struct {
	Job          BudgetLimit `yaml:"job"`
	Task         BudgetLimit `yaml:"task"`
	ChannelDaily BudgetLimit `yaml:"channel_daily"`
	UserDaily    BudgetLimit `yaml:"user_daily"`
}

// GuardsConfig is the guards: section: the loop guards (0 turns one off).
type GuardsConfig struct {
	RepeatCalls    int           `yaml:"repeat_calls"`
	MovementCycles int           `yaml:"movement_cycles"`
	MaxDuration    time.Duration `yaml:"max_duration"`
}

// engineGuards is cfg's loop guards as the engine takes them.
func engineGuards(cfg Config) engine.Guards {
	g := cfg.Guards
	return engine.Guards{RepeatCalls: g.RepeatCalls, MovementCycles: g.MovementCycles, MaxDuration: g.MaxDuration}
}

// BudgetsConfig is the budgets: section. Channels override the scopes
// they set (a limit left 0 keeps the default) per platform-qualified
// channel; MaxRaise caps what one `continue N` adds (0: ten times the
// limit).
type BudgetsConfig struct {
	Job          BudgetLimit             `yaml:"job"`
	Task         BudgetLimit             `yaml:"task"`
	ChannelDaily BudgetLimit             `yaml:"channel_daily"`
	UserDaily    BudgetLimit             `yaml:"user_daily"`
	MaxRaise     BudgetLimit             `yaml:"max_raise"`
	Channels     map[string]BudgetScopes `yaml:"channels"`
}

// Absurd budgets: past these a limit is a typo, not a plan.
const (
	maxBudgetTokens = int64(1e12)
	maxBudgetCost   = 1e6
)

// scopes returns the default budgets of c as the engine's limits.
func (c BudgetsConfig) scopes() BudgetScopes {
	return BudgetScopes{Job: c.Job, Task: c.Task, ChannelDaily: c.ChannelDaily, UserDaily: c.UserDaily}
}

// limits returns s's budgets that are set, as the engine takes them.
func (s BudgetScopes) limits() engine.Limits {
	out := engine.Limits{}
	for scope, l := range map[string]BudgetLimit{engine.ScopeJob: s.Job, engine.ScopeTask: s.Task,
		engine.ScopeChannelDaily: s.ChannelDaily, engine.ScopeUserDaily: s.UserDaily} {
		if l.Tokens > 0 || l.Cost > 0 {
			out[scope] = engine.Limit{Tokens: l.Tokens, Cost: l.Cost}
		}
	}
	return out
}

// hasCost reports whether any of s's budgets is in dollars.
func (s BudgetScopes) hasCost() bool {
	return s.Job.Cost > 0 || s.Task.Cost > 0 || s.ChannelDaily.Cost > 0 || s.UserDaily.Cost > 0
}

// engineBudgets is cfg's budgets as the engine takes them; the job's
// tokens default to llm.max_tokens_per_job.
func engineBudgets(cfg Config) engine.Budgets {
	def := cfg.Budgets.scopes()
	if def.Job.Tokens == 0 {
		def.Job.Tokens = cfg.LLM.MaxTokensPerJob
	}
	b := engine.Budgets{Default: def.limits(), MaxRaise: engine.Limit{Tokens: cfg.Budgets.MaxRaise.Tokens, Cost: cfg.Budgets.MaxRaise.Cost}}
	if len(cfg.Budgets.Channels) > 0 {
		b.Channels = map[string]engine.Limits{}
		for ch, s := range cfg.Budgets.Channels {
			b.Channels[ch] = s.limits()
		}
	}
	return b
}

// enginePrices is llm.prices as the engine takes them.
func enginePrices(cfg Config) map[string]engine.Price {
	out := make(map[string]engine.Price, len(cfg.LLM.Prices))
	for m, p := range cfg.LLM.Prices {
		out[m] = engine.Price{Input: p.Input, CachedInput: p.CachedInput, Output: p.Output}
	}
	return out
}

// validateBudgets checks the budgets and prices: no negative or absurd
// limit or price, channels platform-qualified, and a price for the model
// whenever a budget is in dollars (a cost nobody can count would never
// stop anything).
func (v *validator) validateBudgets(c Config) {
	for m, p := range c.LLM.Prices {
		for _, x := range []struct {
			key string
			val float64
		}{{"input", p.Input}, {"cached_input", p.CachedInput}, {"output", p.Output}} {
			key := "llm.prices." + m + "." + x.key
			if x.val < 0 || math.IsNaN(x.val) || x.val > 1e4 {
				v.fail(key, fmt.Sprintf("must be dollars per million tokens between 0 and 10000, got %v", x.val))
			}
		}
	}
	limit := func(key string, l BudgetLimit) {
		if l.Tokens < 0 || l.Tokens > maxBudgetTokens {
			v.fail(key+".tokens", fmt.Sprintf("must be between 0 (none) and %d, got %d", maxBudgetTokens, l.Tokens))
		}
		if l.Cost < 0 || math.IsNaN(l.Cost) || l.Cost > maxBudgetCost {
			v.fail(key+".cost", fmt.Sprintf("must be dollars between 0 (none) and %v, got %v", maxBudgetCost, l.Cost))
		}
	}
	scopes := func(prefix string, s BudgetScopes) {
		limit(prefix+"job", s.Job)
		limit(prefix+"task", s.Task)
		limit(prefix+"channel_daily", s.ChannelDaily)
		limit(prefix+"user_daily", s.UserDaily)
	}
	scopes("budgets.", c.Budgets.scopes())
	limit("budgets.max_raise", c.Budgets.MaxRaise)
	cost := c.Budgets.hasCost()
	for _, ch := range slices.Sorted(maps.Keys(c.Budgets.Channels)) {
		if p, id, ok := strings.Cut(ch, ":"); !ok || p == "" || id == "" {
			v.fail("budgets.channels."+ch, "must be a platform-qualified channel such as slack:C123 or discord:1234")
		}
		scopes("budgets.channels."+ch+".", c.Budgets.Channels[ch])
		cost = cost || c.Budgets.Channels[ch].hasCost()
	}
	v.notNegative("guards.repeat_calls", int64(c.Guards.RepeatCalls))
	v.notNegative("guards.movement_cycles", int64(c.Guards.MovementCycles))
	v.notNegative("guards.max_duration", int64(c.Guards.MaxDuration))
	if _, ok := c.LLM.Prices[c.LLM.Model]; cost && !ok && c.LLM.Model != "" {
		v.fail("llm.prices", fmt.Sprintf("has no price for model %s, which a budget in dollars needs (add llm.prices.%s: {input, output}; token budgets need none)", c.LLM.Model, c.LLM.Model))
	}
}

// hasCost reports whether any budget, overrides included, is in dollars.
func (c BudgetsConfig) hasCost() bool {
	if c.scopes().hasCost() {
		return true
	}
	for _, s := range c.Channels {
		if s.hasCost() {
			return true
		}
	}
	return false
}

// unpricedModel is the error for the first movement of lib that names a
// model without a price while a budget is in dollars (llm.model itself is
// checked with the configuration); nil when every model has its price.
func unpricedModel(cfg Config, lib *piece.Library) error {
	if !cfg.Budgets.hasCost() {
		return nil
	}
	for _, name := range lib.Names() {
		p, _ := lib.Lookup(name)
		for _, m := range p.Movements {
			if _, ok := cfg.LLM.Prices[m.Model]; m.Model != "" && !ok {
				return &ConfigError{Key: "llm.prices", Msg: fmt.Sprintf("has no price for model %s, which movement %s of piece %s asks and a budget in dollars needs (add llm.prices.%s: {input, output}; token budgets need none)", m.Model, m.Name, name, m.Model)}
			}
		}
	}
	return nil
}
