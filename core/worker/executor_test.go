package worker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/worker"
)

// waitMeter records queue waits.
type waitMeter struct {
	mu    sync.Mutex
	waits []time.Duration // guarded by mu
}

func (m *waitMeter) QueueWait(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.waits = append(m.waits, d)
}

func (m *waitMeter) got() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Duration(nil), m.waits...)
}

// TestQueueWaitIsMeasured measures a job's wait from its being queued in
// the store, not from its reaching the queue or its claim.
func TestQueueWaitIsMeasured(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	meter := &waitMeter{}
	done := worker.EngineFunc(func(ctx context.Context, r *worker.Run) (core.Finish, error) {
		return core.Finish{To: core.JobSucceeded}, nil
	})
	x := worker.NewExecutor(st, silent{}, done, worker.ExecutorConfig{Meter: meter})
	j, err := st.CreateJob(ctx, core.Job{TaskID: newTask(t, st, "1").ID, Piece: "test"})
	if err != nil {
		t.Fatal(err)
	}
	const held = 300 * time.Millisecond
	time.Sleep(held) // queued in the store, not yet claimed
	if _, res := runNext(t, st, x, j.ID); res.Action != worker.Ack {
		t.Fatalf("Handle = %v, want Ack", res.Action)
	}
	if waits := meter.got(); len(waits) != 1 || waits[0] < held {
		t.Errorf("queue waits = %v, want one of at least %s", waits, held)
	}
}

// TestRunLongerThanSettleTimeout: a run that outlasts the settle timeout
// still records its outcome, because each settling write takes its own
// deadline when it starts.
func TestRunLongerThanSettleTimeout(t *testing.T) {
	st := newStore(t)
	j, err := st.CreateJob(context.Background(), core.Job{TaskID: newTask(t, st, "long").ID, Piece: "test", Instruction: "take your time"})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	const settle = 50 * time.Millisecond
	x := worker.NewExecutor(st, silent{}, worker.EngineFunc(func(ctx context.Context, r *worker.Run) (core.Finish, error) {
		runs.Add(1)
		time.Sleep(6 * settle) // longer than any deadline taken before the run
		return core.Finish{To: core.JobSucceeded, ResultSummary: "done"}, nil
	}), worker.ExecutorConfig{SettleTimeout: settle})
	if _, res := runNext(t, st, x, j.ID); res.Action != worker.Ack {
		t.Errorf("Handle = %v, want Ack", res.Action)
	}
	got, err := st.Job(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != core.JobSucceeded || got.ResultSummary != "done" || runs.Load() != 1 {
		t.Errorf("job %s %q after %d runs, want succeeded %q after 1", got.State, got.ResultSummary, runs.Load(), "done")
	}
}
