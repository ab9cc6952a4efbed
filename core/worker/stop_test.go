package worker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/worker"
	"github.com/baton-bot/baton/queue"
)

// idle is a handler for pools that never get a job.
var idle = worker.HandlerFunc(func(context.Context, core.Lease) worker.Result {
	return worker.Result{Action: worker.Ack}
})

// claimOnly is a queue whose claims are claim, the rest a Memory queue's;
// the pool claims one job at a time from it.
type claimOnly struct {
	core.Queue
	claim func(ctx context.Context) error
}

func (q *claimOnly) Claim(ctx context.Context, wait time.Duration) (core.Lease, error) {
	return core.Lease{}, q.claim(ctx)
}

// batching is claimOnly that the pool claims from in batches.
type batching struct{ claimOnly }

func (q *batching) ClaimBatch(ctx context.Context, n int, wait time.Duration) ([]core.Lease, error) {
	return nil, q.claim(ctx)
}

func (q *batching) AckBatch(ctx context.Context, leases []core.Lease) error { return nil }

// withClaims returns both kinds of queue, claiming with claim.
func withClaims(t *testing.T, claim func(ctx context.Context) error) map[string]core.Queue {
	mem := queue.NewMemory(queue.Options{})
	t.Cleanup(func() { mem.Close() })
	return map[string]core.Queue{
		"one at a time": &claimOnly{Queue: mem, claim: claim},
		"in batches":    &batching{claimOnly{Queue: mem, claim: claim}},
	}
}

// TestIdlePoolEndsItsClaimOnStop: an idle pool's claim is waiting when the
// pool is told to stop; the pool ends that wait through the claim's
// context instead of sitting out the claim's wait (an hour here: claims
// that wait for nothing but their context).
func TestIdlePoolEndsItsClaimOnStop(t *testing.T) {
	waiting := make(chan struct{}, 1)
	for name, q := range withClaims(t, func(ctx context.Context) error {
		select {
		case waiting <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}) {
		t.Run(name, func(t *testing.T) {
			pool := worker.NewPool(q, idle, worker.PoolConfig{ClaimWait: time.Hour})
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- pool.Run(ctx) }()
			<-waiting
			stop()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run = %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the pool did not stop: its claim kept waiting")
			}
		})
	}
}

// TestStoppedPoolClaimsNoMore: a claim that comes back empty after the
// pool was told to stop is its last, although a slot is free (select
// between a free slot and the stop would pick at random).
func TestStoppedPoolClaimsNoMore(t *testing.T) {
	var stopped atomic.Bool
	var late atomic.Int64 // claims begun after the stop
	claiming := make(chan struct{}, 1)
	for name, q := range withClaims(t, func(ctx context.Context) error {
		if stopped.Load() {
			late.Add(1)
		}
		select {
		case claiming <- struct{}{}:
		default:
		}
		// A queue that does not watch ctx: the claim ends on its own.
		time.Sleep(20 * time.Millisecond)
		return core.ErrNoJob
	}) {
		t.Run(name, func(t *testing.T) {
			for range 20 {
				stopped.Store(false)
				pool := worker.NewPool(q, idle, worker.PoolConfig{Concurrency: 4})
				ctx, stop := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- pool.Run(ctx) }()
				<-claiming // a claim is on the wire
				stop()
				stopped.Store(true)
				<-done
				select {
				case <-claiming:
				default:
				}
			}
			if n := late.Load(); n > 0 {
				t.Errorf("%d claims began after the pool was told to stop", n)
			}
		})
	}
}

// unrenewable is a Memory queue whose heartbeats fail, counting them.
type unrenewable struct {
	core.Queue
	beats atomic.Int64
}

func (q *unrenewable) Heartbeat(ctx context.Context, leases []core.Lease) ([]core.LeaseStatus, error) {
	q.beats.Add(1)
	return nil, errors.New("queue unreachable")
}

// TestUnrenewedLeaseStopsTheJobByThePoolsClock: a job whose lease cannot be
// renewed runs on while the pool's clock says the lease holds, and stops
// (cause core.ErrLeaseLost) once the clock passes it; no test sleeps
// through a real lease.
func TestUnrenewedLeaseStopsTheJobByThePoolsClock(t *testing.T) {
	mem := queue.NewMemory(queue.Options{Lease: time.Hour})
	t.Cleanup(func() { mem.Close() })
	q := &unrenewable{Queue: mem}
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	causes := make(chan error, 1)
	started := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, l core.Lease) worker.Result {
		close(started)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return worker.Result{Action: worker.Requeue}
	})
	pool := worker.NewPool(q, h, worker.PoolConfig{Concurrency: 1, Lease: time.Hour, Heartbeat: 10 * time.Millisecond, ClaimWait: 50 * time.Millisecond, Now: clock})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = pool.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	if err := mem.Enqueue(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	<-started
	waitFor(t, 10*time.Second, "failed heartbeats", func() bool { return q.beats.Load() >= 5 })
	select {
	case err := <-causes:
		t.Fatalf("the job stopped (%v) while the pool's clock said its lease held", err)
	default:
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	select {
	case err := <-causes:
		if !errors.Is(err, core.ErrLeaseLost) {
			t.Errorf("cause %v, want core.ErrLeaseLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the job kept running past its unrenewed lease")
	}
}
