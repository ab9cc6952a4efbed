package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
)

// stepRecorder is an engine.Stepper that keeps the steps it is told.
type stepRecorder struct {
	mu    sync.Mutex
	steps []engine.Step // guarded by mu
}

func (r *stepRecorder) Observe(context.Context, engine.Status) {}

func (r *stepRecorder) Step(_ context.Context, s engine.Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, s)
}

// TestStepsOfARun: an observer that is a Stepper is told each movement,
// each request to the model and each tool call as it begins, with what
// the call is about, and the end of the run last.
func TestStepsOfARun(t *testing.T) {
	rec := &stepRecorder{}
	f := newFixture(t, map[string]string{"two-step": twoStep}, func(c *engine.Config) { c.Observer = rec })
	f.srv.Script(
		llmtest.Call("Write", `{"path":"output/./a.txt","content":"a"}`),
		llmtest.Call("Read", `{"path":"output/a.txt"}`),
		llmtest.Transition("second", "first done"),
		llmtest.Transition("COMPLETE", "both done"),
	)
	j := f.start("two-step", "x")
	f.run(j)
	type step struct {
		Kind          engine.StepKind
		Movement      string
		MovementCount int
		Tool, Subject string
	}
	var got []step
	for _, s := range rec.steps {
		if s.JobID != j.ID || s.TaskID != f.task.ID || s.Piece != "two-step" || !s.At.Equal(fixed) {
			t.Errorf("step %+v: want job %d, task %d, piece two-step, at %s", s, j.ID, f.task.ID, fixed)
		}
		got = append(got, step{s.Kind, s.Movement, s.MovementCount, s.Tool, s.Subject})
	}
	want := []step{
		{engine.StepMovement, "first", 1, "", ""},
		{engine.StepThinking, "first", 1, "", ""},
		{engine.StepTool, "first", 1, "Write", "output/a.txt"},
		{engine.StepThinking, "first", 1, "", ""},
		{engine.StepTool, "first", 1, "Read", "output/a.txt"},
		{engine.StepThinking, "first", 1, "", ""},
		{engine.StepMovement, "second", 2, "", ""},
		{engine.StepThinking, "second", 2, "", ""},
		{engine.StepDone, "second", 2, "", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}
