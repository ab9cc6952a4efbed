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
)

// idle is a handler for pools that never get a job.
var idle = worker.HandlerFunc(func(context.Context, core.Lease) worker.Result {
	return worker.Result{Action: worker.Ack}
})

// quiet is what a pool's background loops call of a queue where nothing
// happens: no abort is ever requested, no lease ever expires. It implements
// no other method: a test embeds it and adds the calls it expects, and any
// other call panics.
type quiet struct{ core.Queue }

func (quiet) WatchAborts(ctx context.Context, fn func(jobID int64)) error {
	<-ctx.Done()
	return ctx.Err()
}

func (quiet) AbortRequested(context.Context, []int64) ([]int64, error) { return nil, nil }

func (quiet) Reap(context.Context, int) ([]core.Lease, error) { return nil, nil }

// claimOnly is a quiet queue whose claims are claim, which never hands out
// a job; the pool claims one job at a time from it.
type claimOnly struct {
	quiet
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
func withClaims(claim func(ctx context.Context) error) map[string]core.Queue {
	return map[string]core.Queue{
		"one at a time": &claimOnly{claim: claim},
		"in batches":    &batching{claimOnly{claim: claim}},
	}
}

// TestIdlePoolEndsItsClaimOnStop: an idle pool's claim is waiting when the
// pool is told to stop; the pool ends that wait through the claim's
// context instead of sitting out the claim's wait (an hour here: claims
// that wait for nothing but their context).
func TestIdlePoolEndsItsClaimOnStop(t *testing.T) {
	waiting := make(chan struct{}, 1)
	for name, q := range withClaims(func(ctx context.Context) error {
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
	for name, q := range withClaims(func(ctx context.Context) error {
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

// unrenewable is a quiet queue that hands out job 1 once and whose
// heartbeats fail, counting them.
type unrenewable struct {
	quiet
	claimed atomic.Bool
	beats   atomic.Int64
}

func (q *unrenewable) Claim(ctx context.Context, wait time.Duration) (core.Lease, error) {
	if q.claimed.CompareAndSwap(false, true) {
		return core.Lease{JobID: 1, Attempt: 1}, nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return core.Lease{}, ctx.Err()
	case <-t.C:
		return core.Lease{}, core.ErrNoJob
	}
}

func (q *unrenewable) Heartbeat(ctx context.Context, leases []core.Lease) ([]core.LeaseStatus, error) {
	q.beats.Add(1)
	return nil, errors.New("queue unreachable")
}

// Requeue settles job 1 if the test ends with it still running.
func (q *unrenewable) Requeue(context.Context, core.Lease) error { return nil }

// waitFor polls cond until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUnrenewedLeaseStopsTheJobByThePoolsClock: a job whose lease cannot be
// renewed runs on while the pool's clock says the lease holds, and stops
// (cause core.ErrLeaseLost) once the clock passes it; no test sleeps
// through a real lease.
func TestUnrenewedLeaseStopsTheJobByThePoolsClock(t *testing.T) {
	q := &unrenewable{}
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
