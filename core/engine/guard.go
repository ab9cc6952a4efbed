package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llm"
)

// Loop guards notice an agent going round in circles: the same tool call
// with the same arguments many times in a row (the model is first told in
// the tool result, then the job parks), the same movement entered again
// and again with nothing changed in the workspace or the lessons, and an
// attempt running longer than it may. Parked, the job waits in
// waiting_human with a question naming what it repeated; `continue`
// resumes it where it stopped, the guard's count started afresh.

// Guards configure the loop guards; a zero field turns its guard off.
type Guards struct {
	// RepeatCalls: at this many identical consecutive calls the model is
	// warned in the tool result; at two more the job parks before the
	// call runs.
	RepeatCalls int
	// MovementCycles: entering a movement this many times with no change
	// in the workspace (no call that writes or runs commands) or the
	// lessons parks the job.
	MovementCycles int
	// MaxDuration: an attempt running longer parks the job before its
	// next model request.
	MaxDuration time.Duration
}

// Guard kinds, in events, metrics and checkpoints.
const (
	GuardRepeat   = "repeat_calls"
	GuardCycles   = "movement_cycles"
	GuardDuration = "max_duration"
)

// GuardMeter is a Meter that also counts the guards tripped, by kind
// ("repeat_calls_warned" for the repeat guard's warning).
type GuardMeter interface {
	GuardTripped(kind string)
}

// guardHit is a guard that parked a movement.
type guardHit struct {
	Kind string `json:"kind"`
}

// callKey is what makes two calls the same: the tool and its arguments,
// their keys in order.
func callKey(call llm.ToolCall) string {
	var v any
	args := call.Arguments
	if err := json.Unmarshal([]byte(call.Arguments), &v); err == nil {
		if b, err := json.Marshal(v); err == nil {
			args = string(b)
		}
	}
	return call.Name + "\x00" + args
}

// tripped records a guard's event and metric.
func (pr *pieceRun) tripped(ctx context.Context, kind, movement, detail string) {
	_ = pr.event(ctx, "guard_"+kind, movement, detail)
	if m, ok := pr.e.cfg.Meter.(GuardMeter); ok {
		m.GuardTripped(kind)
	}
}

// repeated counts call among the movement's consecutive identical calls
// and returns how many in a row it makes.
func (m *movement) repeated(call llm.ToolCall) int {
	key := callKey(call)
	if key == m.lastCall {
		m.repeats++
	} else {
		m.lastCall, m.repeats = key, 1
	}
	return m.repeats
}

// parkForGuard stops the movement for guard kind with question; calls,
// when any, are the pending calls it resumes with.
func (m *movement) parkForGuard(ctx context.Context, kind, question string, calls []llm.ToolCall) (outcome, error) {
	cp := m.checkpointAt(calls)
	if len(calls) == 0 {
		cp.Iter-- // parked before a request it did not make
	}
	cp.Guard = &guardHit{Kind: kind}
	data, err := json.Marshal(cp)
	if err != nil {
		return outcome{}, fmt.Errorf("checkpoint of movement %s: %w", m.mv.Name, err)
	}
	return outcome{Next: waitApproval, park: &park{checkpoint: string(data), question: question, waitKind: core.WaitGuard}}, nil
}

// repeatQuestion is what the thread is asked when call was repeated n
// times in a row.
func (pr *pieceRun) repeatQuestion(call llm.ToolCall, n int) string {
	return pr.e.text.fill("guard_question_repeat", map[string]string{"tool": call.Name, "args": clipRunes(call.Arguments, 300), "n": strconv.Itoa(n)})
}

// overDuration parks the movement before its next request when the
// attempt has run longer than Guards.MaxDuration; stop reports the park.
func (m *movement) overDuration(ctx context.Context) (outcome, bool, error) {
	pr, e := m.pr, m.pr.e
	max := e.cfg.Guards.MaxDuration
	if max <= 0 || e.cfg.Now().Sub(pr.begun) <= max {
		return outcome{}, false, nil
	}
	ran := e.cfg.Now().Sub(pr.begun).Round(time.Minute)
	pr.tripped(ctx, GuardDuration, m.mv.Name, fmt.Sprintf("running for %s, over %s", ran, max))
	out, err := m.parkForGuard(ctx, GuardDuration, e.text.fill("guard_question_duration", map[string]string{"ran": ran.String(), "max": max.String()}), nil)
	return out, err == nil, err
}

// resumeGuard runs on a movement parked by guard h, its count started
// afresh: the pending calls (the repeated one first), then the loop.
func (pr *pieceRun) resumeGuard(ctx context.Context, m *movement, h *guardHit, calls []llm.ToolCall) (outcome, error) {
	pr.takeContinue(ctx)
	_ = pr.event(ctx, "guard_continued", m.mv.Name, h.Kind)
	switch h.Kind {
	case GuardRepeat:
		m.lastCall, m.repeats = "", 0
	case GuardDuration:
		pr.begun = pr.e.cfg.Now()
	}
	if len(calls) > 0 {
		if out, done, err := m.runCalls(ctx, calls); err != nil || done {
			return out, err
		}
	}
	return m.loop(ctx)
}

// cycled counts movement name entered with the workspace and lessons as
// they stand, and reports whether it has now been entered
// Guards.MovementCycles times with nothing changed.
func (pr *pieceRun) cycled(name string) (int, bool) {
	n := pr.e.cfg.Guards.MovementCycles
	if n <= 0 {
		return 0, false
	}
	mark := strconv.Itoa(pr.state.Changes) + "/" + strconv.Itoa(len(pr.state.Lessons))
	if pr.state.Cycles == nil {
		pr.state.Cycles = map[string]cycle{}
	}
	c := pr.state.Cycles[name]
	if c.Mark == mark {
		c.N++
	} else {
		c = cycle{Mark: mark, N: 1}
	}
	pr.state.Cycles[name] = c
	return c.N, c.N >= n
}

// cycle is how often a movement was entered with nothing changed since
// the state Mark.
type cycle struct {
	Mark string `json:"mark"`
	N    int    `json:"n"`
}
