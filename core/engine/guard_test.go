package engine_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
)

// TestMovementCyclesGuard: a movement entered for the third time with no
// call that changed the workspace and no new lesson parks the job with
// the question naming it; continued, it starts that movement afresh.
func TestMovementCyclesGuard(t *testing.T) {
	f := newFixture(t, map[string]string{"two-step": twoStep}, func(c *engine.Config) { c.Guards.MovementCycles = 3 })
	f.srv.Script(
		llmtest.Transition("second", "s"), llmtest.Transition("first", "again"),
		llmtest.Transition("second", "s"), llmtest.Transition("first", "again"),
		llmtest.Transition("second", "s"),
	)
	j := f.start("two-step", "x")
	fin := f.run(j)
	if fin.To != core.JobWaitingHuman || fin.WaitKind != core.WaitGuard || !strings.Contains(fin.Question, "entered step first 3 times") {
		t.Fatalf("finish = %+v, want the cycles question", fin)
	}
	if n := len(f.srv.Requests()); n != 4 {
		t.Errorf("%d requests, want 4 (parked on entering first the third time)", n)
	}
	waiting := f.finish(j, fin)
	// Continued, first runs again with its count started afresh; second,
	// entered a third time with nothing changed, asks in turn.
	_, fin = f.resume(j, waiting, 2, "continue")
	if fin.To != core.JobWaitingHuman || !strings.Contains(fin.Question, "entered step second 3 times") {
		t.Errorf("after continue: %+v, want the question for second", fin)
	}
	if n := len(f.srv.Requests()); n != 5 {
		t.Errorf("%d requests after continue, want 5 (first run once more)", n)
	}
}

// TestMaxDurationGuard: an attempt running longer than max_duration parks
// before its next request; continued, it goes on from there.
func TestMaxDurationGuard(t *testing.T) {
	// The clock stands still until the first request was made, then is
	// 30 minutes later.
	var srv atomic.Pointer[llmtest.Server]
	f := newFixture(t, map[string]string{"reader": reader}, func(c *engine.Config) {
		c.Guards.MaxDuration = 10 * time.Minute
		c.Now = func() time.Time {
			if s := srv.Load(); s != nil && len(s.Requests()) > 0 {
				return fixed.Add(30 * time.Minute)
			}
			return fixed
		}
	})
	srv.Store(f.srv)
	f.srv.Script(
		llmtest.Call("Read", `{"path":"input/a"}`),
		llmtest.Transition("COMPLETE", "done"),
	)
	j := f.start("reader", "read")
	fin := f.run(j)
	if fin.To != core.JobWaitingHuman || fin.WaitKind != core.WaitGuard || !strings.Contains(fin.Question, "longer than its 10m0s") {
		t.Fatalf("finish = %+v, want the duration question", fin)
	}
	if n := len(f.srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	waiting := f.finish(j, fin)
	_, fin = f.resume(j, waiting, 2, "continue")
	if fin.To != core.JobSucceeded {
		t.Fatalf("after continue: %+v", fin)
	}
	if n := len(f.srv.Requests()); n != 2 {
		t.Errorf("%d requests in all, want 2", n)
	}
}
