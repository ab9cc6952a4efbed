package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/baton-bot/baton/core"
)

// Budgets. Every model request's usage is recorded in the store with its
// cost by the model's price; before each request of the agent loop the
// engine checks the limits of the job, its task, its channel's day and its
// requester's day, against what was spent plus what the request is
// expected to cost (the last request's usage; the meter's count before
// any). A request that would pass a limit is not sent: the job parks in
// waiting_human with a question, and `continue` resumes it at that very
// request with the limit raised for the job.

// Price is what a model's tokens cost, in dollars per million tokens.
// CachedInput 0 charges cached prompt tokens at Input.
type Price struct {
	Input       float64
	CachedInput float64
	Output      float64
}

// Cost returns the dollars of u at p.
func (p Price) Cost(prompt, cached, completion int64) float64 {
	ci := p.CachedInput
	if ci == 0 {
		ci = p.Input
	}
	return (float64(prompt-cached)*p.Input + float64(cached)*ci + float64(completion)*p.Output) / 1e6
}

// Limit is a budget in tokens (prompt plus completion) and in dollars;
// 0 is no limit.
type Limit struct {
	Tokens int64
	Cost   float64
}

// Set reports whether l limits anything.
func (l Limit) Set() bool { return l.Tokens > 0 || l.Cost > 0 }

// Scopes of the budgets.
const (
	ScopeJob          = "job"
	ScopeTask         = "task"
	ScopeChannelDaily = "channel_daily"
	ScopeUserDaily    = "user_daily"
)

// Scopes lists the budgets' scopes in the order they are checked.
var Scopes = []string{ScopeJob, ScopeTask, ScopeChannelDaily, ScopeUserDaily}

// Limits are the budgets of each scope.
type Limits map[string]Limit

// Budgets are the limits of every job, those of channels that override
// them (by platform-qualified channel; a scope the override leaves out
// keeps the default) and the most one `continue N` may raise a limit by
// (MaxRaise; 0: ten times the limit).
type Budgets struct {
	Default  Limits
	Channels map[string]Limits
	MaxRaise Limit
}

// For returns the limits of channel.
func (b Budgets) For(channel string) Limits {
	out := Limits{}
	for k, v := range b.Default {
		out[k] = v
	}
	for k, v := range b.Channels[channel] {
		out[k] = v
	}
	return out
}

// budgetHit is a limit the next request would pass.
type budgetHit struct {
	Scope string `json:"scope"`
	Unit  string `json:"unit"` // "tokens" or "cost"
	Spent string `json:"spent"`
	Limit string `json:"limit"`
	Raise string `json:"raise"` // what a plain `continue` adds
}

// usageCost is the dollars of u for model by the configured prices.
func (e *Engine) usageCost(model string, prompt, cached, completion int64) float64 {
	p, ok := e.cfg.Prices[model]
	if !ok {
		return 0
	}
	return p.Cost(prompt, cached, completion)
}

// record stores one request's usage in the store; a failure is logged,
// not the job's.
func (pr *pieceRun) record(ctx context.Context, model string, prompt, cached, completion int64) float64 {
	cost := pr.e.usageCost(model, prompt, cached, completion)
	u := core.Usage{
		JobID: pr.job.ID, TaskID: pr.task.ID, Channel: pr.channel(ctx), Requester: pr.task.OwnerUser, Model: model,
		PromptTokens: prompt, CachedTokens: cached, CompletionTokens: completion, Cost: cost, At: pr.e.cfg.Now(),
	}
	if err := pr.e.store.AddUsage(context.WithoutCancel(ctx), u); err != nil {
		pr.log.Warn("recording the usage of a model request failed", "err", err)
	}
	if m := pr.e.cfg.Meter; m != nil {
		if cm, ok := m.(CostMeter); ok && cost > 0 {
			cm.LLMCost(model, cost)
		}
	}
	pr.mu.Lock()
	pr.lastTokens, pr.lastCost = prompt+completion, cost
	pr.mu.Unlock()
	return cost
}

// CostMeter is a Meter that also counts the dollars spent per model.
type CostMeter interface {
	LLMCost(model string, dollars float64)
}

// overBudget returns the first limit the next request of model would
// pass, holding about estimate tokens; nil when none would be.
func (pr *pieceRun) overBudget(ctx context.Context, model string, estimate int) (*budgetHit, error) {
	e := pr.e
	limits := e.cfg.Budgets.For(pr.channel(ctx))
	pr.mu.Lock()
	nextTokens, nextCost := pr.lastTokens, pr.lastCost
	pr.mu.Unlock()
	if nextTokens == 0 {
		nextTokens = int64(estimate)
		nextCost = e.usageCost(model, nextTokens, 0, 0)
	}
	day := core.UsageDay(e.cfg.Now())
	for _, scope := range Scopes {
		l := limits[scope]
		if !l.Set() {
			continue
		}
		f := core.UsageFilter{}
		switch scope {
		case ScopeJob:
			f.JobID = pr.job.ID
		case ScopeTask:
			f.TaskID = pr.task.ID
		case ScopeChannelDaily:
			f.Channel, f.FromDay, f.ToDay = pr.channel(ctx), day, day
		case ScopeUserDaily:
			f.Requester, f.FromDay, f.ToDay = pr.task.OwnerUser, day, day
		}
		spent, err := e.store.SumUsage(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("usage of the %s budget: %w", scope, err)
		}
		raise := pr.state.Raises[scope]
		if l.Tokens > 0 && spent.Tokens()+nextTokens > l.Tokens+raise.Tokens {
			return &budgetHit{Scope: scope, Unit: "tokens", Spent: groupDigits(int(spent.Tokens())),
				Limit: groupDigits(int(l.Tokens + raise.Tokens)), Raise: groupDigits(int(l.Tokens))}, nil
		}
		if l.Cost > 0 && spent.Cost+nextCost > l.Cost+raise.Cost {
			return &budgetHit{Scope: scope, Unit: "cost", Spent: dollars(spent.Cost),
				Limit: dollars(l.Cost + raise.Cost), Raise: dollars(l.Cost)}, nil
		}
	}
	return nil, nil
}

// dollars writes d as people read an amount: $1.92.
func dollars(d float64) string { return "$" + strconv.FormatFloat(d, 'f', 2, 64) }

// budgetQuestion is what the thread is asked when h would be passed.
func (pr *pieceRun) budgetQuestion(h *budgetHit) string {
	return pr.e.text.fill("budget_question_"+h.Scope+"_"+h.Unit, map[string]string{"spent": h.Spent, "limit": h.Limit, "raise": h.Raise})
}

// parkForBudget stops the movement before its next request, which would
// pass h; it resumes at that request.
func (m *movement) parkForBudget(ctx context.Context, h *budgetHit) (outcome, error) {
	pr := m.pr
	cp := m.checkpointAt(nil)
	cp.Iter-- // the request was not made: resumed, it is counted again
	cp.Budget = h
	data, err := json.Marshal(cp)
	if err != nil {
		return outcome{}, fmt.Errorf("checkpoint of movement %s: %w", m.mv.Name, err)
	}
	q := pr.budgetQuestion(h)
	_ = pr.event(ctx, "budget_reached", m.mv.Name, fmt.Sprintf("%s budget (%s): %s spent, limit %s", h.Scope, h.Unit, h.Spent, h.Limit))
	if meter, ok := pr.e.cfg.Meter.(BudgetMeter); ok {
		meter.BudgetReached(h.Scope)
	}
	return outcome{Next: waitApproval, park: &park{checkpoint: string(data), question: q, waitKind: core.WaitBudget}}, nil
}

// BudgetMeter is a Meter that also counts the budgets reached, by scope.
type BudgetMeter interface {
	BudgetReached(scope string)
}

// raiseBudget applies the `continue` that answered the budget question of
// cp: the newest answer from a person since the job parked, raising the
// limit hit for the rest of the job by its amount (capped by MaxRaise) or
// by the limit itself. The answer is not handed to the agent.
func (pr *pieceRun) raiseBudget(ctx context.Context, h *budgetHit) {
	e := pr.e
	l := e.cfg.Budgets.For(pr.channel(ctx))[h.Scope]
	amount, given := pr.takeContinue(ctx)
	if pr.state.Raises == nil {
		pr.state.Raises = Limits{}
	}
	r := pr.state.Raises[h.Scope]
	capOf := func(limit, max float64) float64 {
		if max > 0 {
			return max
		}
		return 10 * limit
	}
	switch h.Unit {
	case "tokens":
		add := float64(l.Tokens)
		if given {
			add = min(amount, capOf(float64(l.Tokens), float64(e.cfg.Budgets.MaxRaise.Tokens)))
		}
		r.Tokens += int64(add)
	default:
		add := l.Cost
		if given {
			add = min(amount, capOf(l.Cost, e.cfg.Budgets.MaxRaise.Cost))
		}
		r.Cost += add
	}
	pr.state.Raises[h.Scope] = r
	_ = pr.event(ctx, "budget_raised", pr.currentMovement(), fmt.Sprintf("%s budget (%s) raised to %+v", h.Scope, h.Unit, r))
}

// budgetNote is the movement_resumed detail of a budget park.
func budgetNote(h *budgetHit) string {
	return "after the " + strings.ReplaceAll(h.Scope, "_", " ") + " budget was raised"
}

// askedCheckpoint takes what the job's movement left when the engine
// asked the thread (a budget, a guard); nil when it was taken by an
// attempt that did not finish, or is unreadable (the movement then starts
// afresh).
func (pr *pieceRun) askedCheckpoint(ctx context.Context) (*checkpoint, core.Approval, error) {
	j := pr.job
	data, err := pr.e.store.TakeCheckpoint(ctx, j.ID, j.Attempt)
	if err != nil {
		return nil, core.Approval{}, err
	}
	if data == "" {
		pr.log.Info("the question's checkpoint was taken by an earlier attempt; the movement starts afresh", "wait", j.WaitKind)
		return nil, core.Approval{}, nil
	}
	var cp checkpoint
	if err := json.Unmarshal([]byte(data), &cp); err != nil {
		pr.log.Warn("the question's checkpoint is unreadable; the movement starts afresh", "err", err)
		return nil, core.Approval{}, nil
	}
	if _, ok := pr.piece.Movement(cp.Movement); !ok {
		pr.log.Warn("the question's movement is no longer in the piece; the movement starts afresh", "movement", cp.Movement)
		return nil, core.Approval{}, nil
	}
	return &cp, core.Approval{}, nil
}

// takeContinue finds the `continue` that answered the engine's question:
// the newest from a person since the job parked. It is marked answered,
// so that steering does not hand it to the agent; amount and given are
// its N, when it names one.
func (pr *pieceRun) takeContinue(ctx context.Context) (amount float64, given bool) {
	recent, err := pr.e.store.RecentComments(ctx, pr.task.ID, 20)
	if err != nil {
		pr.log.Warn("reading the answer to the question failed", "err", err)
		return 0, false
	}
	for i := len(recent) - 1; i >= 0; i-- {
		c := recent[i]
		if c.ID <= pr.seen || c.Role != core.RoleUser {
			continue
		}
		if a, g, ok := core.ParseContinue(c.Text); ok {
			pr.mu.Lock()
			if pr.answered == nil {
				pr.answered = map[int64]bool{}
			}
			pr.answered[c.ID] = true
			pr.mu.Unlock()
			return a, g
		}
	}
	return 0, false
}
