package queue_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/worker"
	"github.com/baton-bot/baton/queue"
	"github.com/baton-bot/baton/queue/redistest"
)

// overlap counts the runs of a job that are using its workspace at once.
type overlap struct {
	mu      sync.Mutex
	now     int     // guarded by mu: runs between their start and their end
	most    int     // guarded by mu: the largest now seen
	started []int64 // guarded by mu: attempts in the order they started
}

func (o *overlap) enter(attempt int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.now++
	o.most = max(o.most, o.now)
	o.started = append(o.started, attempt)
}

func (o *overlap) leave() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.now--
}

func (o *overlap) report() (most int, started []int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.most, slices.Clone(o.started)
}

// TestNewerAttemptInTheSamePool flushes Redis while a job runs in a pool
// of two and lets the reconciler dispatch it again: the same pool claims
// attempt 2 while attempt 1 is still running its tools. Attempt 1 must be
// stopped, and gone, before attempt 2 starts; attempt 2 is the one the
// pool keeps running, heartbeating and aborting.
func TestNewerAttemptInTheSamePool(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	q, err := queue.NewRedis(rdb, queue.Options{Prefix: "attempts", Lease: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var o overlap
	h := newHarness(t, q, func(ctx context.Context, r *worker.Run) (core.Finish, error) {
		o.enter(r.Attempt())
		defer o.leave()
		<-ctx.Done()
		// A tool takes a moment to stop (a process group being killed):
		// the run is still in the workspace meanwhile.
		time.Sleep(300 * time.Millisecond)
		return core.Finish{}, context.Cause(ctx)
	})
	j := h.newJob("work")
	h.waitState(j.ID, core.JobRunning)

	srv.Flush(t)
	rec := &worker.Reconciler{Store: h.store, Queue: q, Grace: time.Nanosecond}
	if n, err := rec.Once(context.Background()); err != nil || n != 1 {
		t.Fatalf("reconcile = %d, %v; want the running job dispatched again", n, err)
	}
	waitFor(t, 10*time.Second, "attempt 2 to run", func() bool {
		_, started := o.report()
		return slices.Contains(started, 2)
	})
	// Attempt 1 has ended by now (attempt 2 waited for it); the pool still
	// counts the job as running and keeps renewing attempt 2's lease.
	waitFor(t, 10*time.Second, "one run left", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.now == 1
	})
	if ids := h.pool.Running(); !slices.Contains(ids, j.ID) {
		t.Errorf("Running() = %v after attempt 1 ended: attempt 2 of job %d is missing", ids, j.ID)
	}
	// The lease's deadline (the score in the queue's active set) moves on:
	// heartbeats cover attempt 2.
	active := "attempts:{" + queue.DefaultName + "}:active"
	deadline := func() float64 {
		d, err := rdb.ZScore(context.Background(), active, strconv.FormatInt(j.ID, 10)).Result()
		if err != nil {
			t.Fatalf("attempt 2's lease: %v", err)
		}
		return d
	}
	first := deadline()
	waitFor(t, 5*time.Second, "a heartbeat renewing attempt 2", func() bool { return deadline() > first })

	asked := time.Now()
	if _, err := h.d.Abort(context.Background(), j.ID, "console:erin"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the job to be aborted", func() bool { return h.state(j.ID).State == core.JobAborted })
	if took := time.Since(asked); took > 2*time.Second {
		t.Errorf("abort took %s to end the job, want ≤ 2s", took)
	}
	if most, started := o.report(); most != 1 || !slices.Equal(started, []int64{1, 2}) {
		t.Errorf("runs started %v with at most %d at once; want attempts [1 2], never two at once", started, most)
	}
}
