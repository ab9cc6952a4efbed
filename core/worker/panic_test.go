package worker_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/worker"
)

// descend panics n calls deep, so that the stack is long.
func descend(n int) {
	if n == 0 {
		panic("boom in the engine")
	}
	descend(n - 1)
}

// TestEnginePanicKeepsItsStack: a panicking engine fails the run; the log
// holds the whole stack, the job's error a plain first line and the top of
// the stack, capped.
func TestEnginePanicKeepsItsStack(t *testing.T) {
	f := newFamily(t) // the family's parent is the job that panics
	st := f.store
	var logs bytes.Buffer
	x := worker.NewExecutor(st, silent{}, worker.EngineFunc(func(ctx context.Context, r *worker.Run) (core.Finish, error) {
		descend(60)
		return core.Finish{}, nil
	}), worker.ExecutorConfig{MaxFailures: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	l, res := runNext(t, st, x, f.parent.ID)
	if res.Action != worker.Ack {
		t.Fatalf("Handle = %v, want ack (failed for good)", res.Action)
	}
	j, err := st.Job(context.Background(), l.JobID)
	if err != nil {
		t.Fatal(err)
	}
	first, stack, _ := strings.Cut(j.Error, "\n")
	if j.State != core.JobFailed || first != "the job failed 1 times; last error: engine panicked: boom in the engine" {
		t.Errorf("job %s, error's first line %q; want failed with a plain sentence naming the panic", j.State, first)
	}
	if !strings.Contains(stack, "worker_test.descend") || !strings.Contains(stack, "panic_test.go") {
		t.Errorf("the job's error holds no stack trace of the panic:\n%s", j.Error)
	}
	if len(j.Error) > 5<<10 || !strings.Contains(stack, "more bytes of stack in the log") {
		t.Errorf("the job's error is %d bytes, want the stack capped (about 4 KiB) and saying so", len(j.Error))
	}
	logged := logs.String()
	if !strings.Contains(logged, "engine panicked") || strings.Count(logged, "worker_test.descend") < 61 {
		t.Errorf("the log does not hold the whole stack (%d frames of descend):\n%.2000s", strings.Count(logged, "worker_test.descend"), logged)
	}
}
