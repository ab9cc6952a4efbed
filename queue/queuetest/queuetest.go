// Package queuetest is the conformance suite of core.Queue: every queue
// implementation passes Run. It drives a queue through its public API only,
// against real time (short leases, polling with a deadline rather than
// asserting timings), so that it suits queues whose clock the test does not
// control.
package queuetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/queue"
)

// patience bounds every wait of the suite for something that must happen;
// reaching it fails the test.
const patience = 15 * time.Second

// Run runs the suite. newQueue returns a new, empty queue configured with
// opts (Prefix and Name may be overridden), closed when t ends.
func Run(t *testing.T, newQueue func(t *testing.T, opts queue.Options) core.Queue) {
	noBackoff := func(int) time.Duration { return 0 }
	tests := []struct {
		name  string
		lease time.Duration // 0: 30s
		test  func(t *testing.T, q core.Queue)
	}{
		{name: "claim takes jobs in order", test: testFIFO},
		{name: "enqueue of a known job does nothing", test: testEnqueueKnown},
		{name: "claim waits then reports no job", test: testClaimWaits},
		{name: "claim wakes when a job arrives", test: testClaimWakes},
		{name: "claim returns when its context ends", test: testClaimCancelled},
		{name: "attempt grows on every claim", test: testAttemptGrows},
		{name: "stale lease changes nothing", test: testStale},
		{name: "heartbeat reports each lease", test: testHeartbeat},
		{name: "nack delays the job", test: testNackDelay},
		{name: "requeue goes to the head without a failure", test: testRequeue},
		{name: "park then resume once", test: testParkResume},
		{name: "resume before park", test: testResumeBeforePark},
		{name: "claim and ack in batches", test: testBatch},
		{name: "position in the queue", test: testPosition},
		{name: "abort pending job", test: testAbortPending},
		{name: "abort job in retry", test: testAbortRetry},
		{name: "abort parked job", test: testAbortParked},
		{name: "abort running job", test: testAbortActive},
		{name: "abort unknown job", test: testAbortUnknown},
		{name: "watch aborts", test: testWatchAborts},
		{name: "reap expired lease then dead", lease: 300 * time.Millisecond, test: testReap},
		{name: "ack settles an expired lease", lease: 300 * time.Millisecond, test: testAckExpired},
		{name: "reconcile", test: testReconcile},
		{name: "stats", test: testStats},
		{name: "close", test: testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := queue.Options{Lease: tc.lease, Backoff: noBackoff}
			tc.test(t, newQueue(t, opts))
		})
	}
}

func enqueue(t *testing.T, q core.Queue, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		if err := q.Enqueue(t.Context(), id); err != nil {
			t.Fatalf("Enqueue(%d): %v", id, err)
		}
	}
}

func claim(t *testing.T, q core.Queue) core.Lease {
	t.Helper()
	l, err := q.Claim(t.Context(), patience)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return l
}

func claimID(t *testing.T, q core.Queue, want int64) core.Lease {
	t.Helper()
	l := claim(t, q)
	if l.JobID != want {
		t.Fatalf("Claim got job %d, want %d", l.JobID, want)
	}
	return l
}

func noJob(t *testing.T, q core.Queue) {
	t.Helper()
	l, err := q.Claim(t.Context(), 0)
	if !errors.Is(err, core.ErrNoJob) {
		t.Fatalf("Claim = %+v, %v; want ErrNoJob", l, err)
	}
}

func stats(t *testing.T, q core.Queue) core.QueueStats {
	t.Helper()
	s, err := q.Stats(t.Context())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return s
}

func wantStats(t *testing.T, q core.Queue, want core.QueueStats) {
	t.Helper()
	if diff := cmp.Diff(want, stats(t, q)); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
}

func heartbeat(t *testing.T, q core.Queue, leases ...core.Lease) []core.LeaseStatus {
	t.Helper()
	s, err := q.Heartbeat(t.Context(), leases)
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	return s
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eventually polls cond until it holds, failing t after patience.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testFIFO(t *testing.T, q core.Queue) {
	enqueue(t, q, 1, 2, 3)
	var got []core.Lease
	for range 3 {
		got = append(got, claim(t, q))
	}
	want := []core.Lease{{JobID: 1, Attempt: 1}, {JobID: 2, Attempt: 1}, {JobID: 3, Attempt: 1}}
	if diff := cmp.Diff(want, got, cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".Deadline"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	for _, l := range got {
		if l.Deadline.Before(time.Now().Add(10*time.Second)) || l.Deadline.After(time.Now().Add(time.Minute)) {
			t.Errorf("lease of job %d ends at %v, want about 30s from now", l.JobID, l.Deadline)
		}
	}
	noJob(t, q)
}

func testEnqueueKnown(t *testing.T, q core.Queue) {
	enqueue(t, q, 1, 1)
	l := claimID(t, q, 1)
	noJob(t, q)
	enqueue(t, q, 1) // while running
	noJob(t, q)
	must(t, "Ack", q.Ack(t.Context(), l))
	enqueue(t, q, 1) // after it finished
	noJob(t, q)
	wantStats(t, q, core.QueueStats{})
}

func testClaimWaits(t *testing.T, q core.Queue) {
	const wait = 300 * time.Millisecond
	start := time.Now()
	_, err := q.Claim(t.Context(), wait)
	if !errors.Is(err, core.ErrNoJob) {
		t.Fatalf("Claim on an empty queue: %v, want ErrNoJob", err)
	}
	if got := time.Since(start); got < wait {
		t.Errorf("Claim gave up after %v, before its wait of %v", got, wait)
	}
}

func testClaimWakes(t *testing.T, q core.Queue) {
	type result struct {
		l   core.Lease
		err error
	}
	const wait = time.Minute
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		l, err := q.Claim(t.Context(), wait)
		done <- result{l, err}
	}()
	time.Sleep(100 * time.Millisecond) // let the claim start waiting
	enqueue(t, q, 7)
	r := <-done
	if r.err != nil {
		t.Fatalf("Claim: %v", r.err)
	}
	if r.l.JobID != 7 {
		t.Errorf("Claim got job %d, want 7", r.l.JobID)
	}
	if got := time.Since(start); got > wait/2 {
		t.Errorf("Claim took %v: it did not wake when the job arrived", got)
	}
}

// testClaimCancelled: ctx ending ends a Claim's wait with ctx's error, and
// the Claim takes nothing with it.
func testClaimCancelled(t *testing.T, q core.Queue) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := q.Claim(ctx, time.Minute)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the claim start waiting
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Claim returned %v when its context ended, want context.Canceled", err)
		}
	case <-time.After(patience):
		t.Fatal("Claim kept waiting after its context ended")
	}
	if _, err := q.Claim(ctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Claim with an ended context: %v, want context.Canceled", err)
	}
	enqueue(t, q, 3)
	claimID(t, q, 3)
}

func testAttemptGrows(t *testing.T, q core.Queue) {
	enqueue(t, q, 1)
	l := claim(t, q)
	attempts := []int64{l.Attempt}
	must(t, "Requeue", q.Requeue(t.Context(), l))
	l = claim(t, q)
	attempts = append(attempts, l.Attempt)
	must(t, "Nack", q.Nack(t.Context(), l, 0))
	l = claim(t, q)
	attempts = append(attempts, l.Attempt)
	if diff := cmp.Diff([]int64{1, 2, 3}, attempts); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	if l.Failures != 1 {
		t.Errorf("Failures = %d after one nack, want 1", l.Failures)
	}
}

func testStale(t *testing.T, q core.Queue) {
	ctx := t.Context()
	enqueue(t, q, 1)
	old := claim(t, q)
	must(t, "Requeue", q.Requeue(ctx, old))
	cur := claimID(t, q, 1)

	must(t, "stale Ack", q.Ack(ctx, old))
	must(t, "stale Nack", q.Nack(ctx, old, 0))
	must(t, "stale Park", q.Park(ctx, old, 1))
	must(t, "stale Requeue", q.Requeue(ctx, old))
	wantStats(t, q, core.QueueStats{Active: 1})
	noJob(t, q)
	if diff := cmp.Diff([]core.LeaseStatus{core.LeaseLost, core.LeaseOK}, heartbeat(t, q, old, cur)); diff != "" {
		t.Errorf("Heartbeat (-want +got):\n%s", diff)
	}
	must(t, "Ack", q.Ack(ctx, cur))
	wantStats(t, q, core.QueueStats{})
	must(t, "Ack replayed", q.Ack(ctx, cur))
}

func testHeartbeat(t *testing.T, q core.Queue) {
	ctx := t.Context()
	enqueue(t, q, 1, 2, 3)
	a, b, c := claim(t, q), claim(t, q), claim(t, q)
	must(t, "Abort", q.Abort(ctx, b.JobID))
	must(t, "Ack", q.Ack(ctx, c))
	got := heartbeat(t, q, a, b, c)
	if diff := cmp.Diff([]core.LeaseStatus{core.LeaseOK, core.LeaseAbort, core.LeaseLost}, got); diff != "" {
		t.Errorf("Heartbeat (-want +got):\n%s", diff)
	}
	if got := heartbeat(t, q); len(got) != 0 {
		t.Errorf("Heartbeat of no lease = %v, want none", got)
	}
}

func testNackDelay(t *testing.T, q core.Queue) {
	enqueue(t, q, 1)
	l := claim(t, q)
	must(t, "Nack", q.Nack(t.Context(), l, 2*time.Second))
	wantStats(t, q, core.QueueStats{Retry: 1})
	noJob(t, q) // not before its delay
	l = claimID(t, q, 1)
	if l.Attempt != 2 || l.Failures != 1 {
		t.Errorf("after a nack: attempt %d failures %d, want 2 and 1", l.Attempt, l.Failures)
	}
}

func testRequeue(t *testing.T, q core.Queue) {
	enqueue(t, q, 1, 2)
	l := claimID(t, q, 1)
	must(t, "Requeue", q.Requeue(t.Context(), l))
	l = claimID(t, q, 1)
	if l.Attempt != 2 || l.Failures != 0 {
		t.Errorf("after a requeue: attempt %d failures %d, want 2 and 0", l.Attempt, l.Failures)
	}
	claimID(t, q, 2)
}

func testParkResume(t *testing.T, q core.Queue) {
	ctx := t.Context()
	enqueue(t, q, 1)
	l := claim(t, q)
	must(t, "Park", q.Park(ctx, l, 4))
	wantStats(t, q, core.QueueStats{Parked: 1})
	noJob(t, q)
	tests := []struct {
		id, wseq int64
		want     bool
	}{
		{1, 3, false}, // wrong wait
		{2, 4, false}, // unknown job
		{1, 4, true},
		{1, 4, false}, // delivered twice
	}
	for _, tc := range tests {
		got, err := q.Resume(ctx, tc.id, tc.wseq)
		must(t, "Resume", err)
		if got != tc.want {
			t.Errorf("Resume(%d, %d) = %v, want %v", tc.id, tc.wseq, got, tc.want)
		}
	}
	l = claimID(t, q, 1)
	if l.Attempt != 2 || l.Failures != 0 {
		t.Errorf("after resume: attempt %d failures %d, want 2 and 0", l.Attempt, l.Failures)
	}
	noJob(t, q)
	wantStats(t, q, core.QueueStats{Active: 1})
}

// testResumeBeforePark covers a reply that arrives after the worker recorded
// its question in the store but before it parked the job in the queue: the
// park must make the job ready at once, not strand it.
func testResumeBeforePark(t *testing.T, q core.Queue) {
	ctx := t.Context()
	enqueue(t, q, 1)
	l := claim(t, q)
	ok, err := q.Resume(ctx, 1, 1)
	must(t, "Resume", err)
	if !ok {
		t.Error("Resume of a running job about to park = false, want true")
	}
	ok, err = q.Resume(ctx, 1, 1)
	must(t, "Resume", err)
	if ok {
		t.Error("second Resume before the park = true, want false")
	}
	must(t, "Park", q.Park(ctx, l, 1))
	l = claimID(t, q, 1)
	if l.Attempt != 2 {
		t.Errorf("after park: attempt %d, want 2", l.Attempt)
	}
	// A later wait parks normally.
	must(t, "Park", q.Park(ctx, l, 2))
	wantStats(t, q, core.QueueStats{Parked: 1})
	noJob(t, q)
}

// batcher is the batching capability both queues offer.
type batcher interface {
	ClaimBatch(ctx context.Context, n int, wait time.Duration) ([]core.Lease, error)
	AckBatch(ctx context.Context, leases []core.Lease) error
}

func testBatch(t *testing.T, q core.Queue) {
	b, ok := q.(batcher)
	if !ok {
		t.Skip("the queue does not batch")
	}
	ctx := t.Context()
	enqueue(t, q, 1, 2, 3, 4, 5)
	must(t, "Abort", q.Abort(ctx, 3)) // skipped by the claim
	ls, err := b.ClaimBatch(ctx, 3, time.Second)
	must(t, "ClaimBatch", err)
	var got []int64
	for _, l := range ls {
		got = append(got, l.JobID)
		if l.Attempt != 1 {
			t.Errorf("job %d attempt %d, want 1", l.JobID, l.Attempt)
		}
	}
	if diff := cmp.Diff([]int64{1, 2, 4}, got); diff != "" {
		t.Errorf("ClaimBatch(3) ids (-want +got):\n%s", diff)
	}
	wantStats(t, q, core.QueueStats{Pending: 1, Active: 3})
	stale := ls[0]
	stale.Attempt = 99
	must(t, "AckBatch", b.AckBatch(ctx, []core.Lease{ls[1], ls[2], stale}))
	wantStats(t, q, core.QueueStats{Pending: 1, Active: 1})
	rest, err := b.ClaimBatch(ctx, 10, time.Second)
	must(t, "ClaimBatch", err)
	if len(rest) != 1 || rest[0].JobID != 5 {
		t.Errorf("second ClaimBatch = %+v, want job 5 only", rest)
	}
	must(t, "AckBatch", b.AckBatch(ctx, []core.Lease{ls[0], rest[0]}))
	wantStats(t, q, core.QueueStats{})
	if _, err := b.ClaimBatch(ctx, 4, 50*time.Millisecond); !errors.Is(err, core.ErrNoJob) {
		t.Errorf("ClaimBatch on an empty queue: err %v, want ErrNoJob", err)
	}
}

func testPosition(t *testing.T, q core.Queue) {
	p, ok := q.(interface {
		Position(ctx context.Context, jobID int64) (int, error)
	})
	if !ok {
		t.Skip("the queue does not tell positions")
	}
	ctx := t.Context()
	enqueue(t, q, 1, 2, 3)
	for id, want := range map[int64]int{1: 1, 2: 2, 3: 3, 4: 0} {
		got, err := p.Position(ctx, id)
		must(t, "Position", err)
		if got != want {
			t.Errorf("Position(%d) = %d, want %d", id, got, want)
		}
	}
	claimID(t, q, 1)
	if got, _ := p.Position(ctx, 3); got != 2 {
		t.Errorf("after a claim Position(3) = %d, want 2", got)
	}
	if got, _ := p.Position(ctx, 1); got != 0 {
		t.Errorf("a claimed job's position = %d, want 0", got)
	}
}

func abortRequested(t *testing.T, q core.Queue, ids ...int64) []int64 {
	t.Helper()
	got, err := q.AbortRequested(t.Context(), ids)
	if err != nil {
		t.Fatalf("AbortRequested: %v", err)
	}
	return got
}

func testAbortPending(t *testing.T, q core.Queue) {
	enqueue(t, q, 1, 2)
	must(t, "Abort", q.Abort(t.Context(), 1))
	wantStats(t, q, core.QueueStats{Pending: 1})
	claimID(t, q, 2)
	noJob(t, q)
	if diff := cmp.Diff([]int64{1}, abortRequested(t, q, 1, 2, 3)); diff != "" {
		t.Errorf("AbortRequested (-want +got):\n%s", diff)
	}
}

func testAbortRetry(t *testing.T, q core.Queue) {
	enqueue(t, q, 1)
	must(t, "Nack", q.Nack(t.Context(), claim(t, q), 10*time.Millisecond))
	must(t, "Abort", q.Abort(t.Context(), 1))
	wantStats(t, q, core.QueueStats{})
	time.Sleep(50 * time.Millisecond) // past the retry's due time
	noJob(t, q)
}

func testAbortParked(t *testing.T, q core.Queue) {
	ctx := t.Context()
	enqueue(t, q, 1)
	must(t, "Park", q.Park(ctx, claim(t, q), 1))
	must(t, "Abort", q.Abort(ctx, 1))
	wantStats(t, q, core.QueueStats{})
	ok, err := q.Resume(ctx, 1, 1)
	must(t, "Resume", err)
	if ok {
		t.Error("Resume of an aborted job = true, want false")
	}
	noJob(t, q)
}

func testAbortActive(t *testing.T, q core.Queue) {
	ctx := t.Context()
	enqueue(t, q, 1, 2)
	l := claimID(t, q, 1)
	must(t, "Abort", q.Abort(ctx, 1))
	if diff := cmp.Diff([]core.LeaseStatus{core.LeaseAbort}, heartbeat(t, q, l)); diff != "" {
		t.Errorf("Heartbeat (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{1}, abortRequested(t, q, 2, 1, 99)); diff != "" {
		t.Errorf("AbortRequested (-want +got):\n%s", diff)
	}
	wantStats(t, q, core.QueueStats{Pending: 1, Active: 1})
	must(t, "Ack", q.Ack(ctx, l))
	wantStats(t, q, core.QueueStats{Pending: 1})
	claimID(t, q, 2)
}

func testAbortUnknown(t *testing.T, q core.Queue) {
	must(t, "Abort", q.Abort(t.Context(), 5))
	enqueue(t, q, 5)
	noJob(t, q)
	wantStats(t, q, core.QueueStats{})
}

func testWatchAborts(t *testing.T, q core.Queue) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	seen := make(chan int64, 100)
	done := make(chan error, 1)
	go func() {
		done <- q.WatchAborts(ctx, func(id int64) { seen <- id })
	}()
	// The watch may start after an abort and miss it: abort running jobs
	// until one is seen.
	aborted := map[int64]bool{}
	end := time.Now().Add(patience)
	for id := int64(1); ; id++ {
		if time.Now().After(end) {
			t.Fatal("WatchAborts saw no abort")
		}
		enqueue(t, q, id)
		claimID(t, q, id)
		must(t, "Abort", q.Abort(ctx, id))
		aborted[id] = true
		select {
		case got := <-seen:
			if !aborted[got] {
				t.Errorf("WatchAborts saw job %d, which was not aborted", got)
			}
		case <-time.After(200 * time.Millisecond):
			continue
		}
		break
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("WatchAborts returned %v, want context.Canceled", err)
		}
	case <-time.After(patience):
		t.Fatal("WatchAborts did not return when its context ended")
	}
}

func testReap(t *testing.T, q core.Queue) {
	ctx := t.Context()
	const maxFailures = 2
	enqueue(t, q, 1)
	first := claim(t, q)
	eventually(t, "the expired lease goes to retry", func() bool {
		dead, err := q.Reap(ctx, maxFailures)
		must(t, "Reap", err)
		if len(dead) > 0 {
			t.Fatalf("Reap declared %v dead after one failure", dead)
		}
		return stats(t, q).Retry == 1
	})
	if diff := cmp.Diff([]core.LeaseStatus{core.LeaseLost}, heartbeat(t, q, first)); diff != "" {
		t.Errorf("Heartbeat of a reaped lease (-want +got):\n%s", diff)
	}
	second := claimID(t, q, 1)
	if second.Attempt != 2 || second.Failures != 1 {
		t.Errorf("after a reap: attempt %d failures %d, want 2 and 1", second.Attempt, second.Failures)
	}
	var dead []core.Lease
	eventually(t, "the job goes dead", func() bool {
		d, err := q.Reap(ctx, maxFailures)
		must(t, "Reap", err)
		dead = append(dead, d...)
		return len(dead) > 0
	})
	want := []core.Lease{{JobID: 1, Attempt: 2, Failures: 2}}
	if diff := cmp.Diff(want, dead, cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".Deadline"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("dead (-want +got):\n%s", diff)
	}
	wantStats(t, q, core.QueueStats{Dead: 1})
	noJob(t, q)
	d, err := q.Reap(ctx, maxFailures)
	must(t, "Reap", err)
	if len(d) != 0 {
		t.Errorf("Reap again declared %v dead", d)
	}
}

func testAckExpired(t *testing.T, q core.Queue) {
	ctx := t.Context()
	enqueue(t, q, 1)
	l := claim(t, q)
	eventually(t, "the expired lease goes to retry", func() bool {
		_, err := q.Reap(ctx, 0)
		must(t, "Reap", err)
		return stats(t, q).Retry == 1
	})
	must(t, "Ack", q.Ack(ctx, l))
	wantStats(t, q, core.QueueStats{})
	noJob(t, q)
}

func reconcile(t *testing.T, q core.Queue, items ...core.ReconcileItem) int {
	t.Helper()
	n, err := q.Reconcile(t.Context(), items)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return n
}

func testReconcile(t *testing.T, q core.Queue) {
	ctx := t.Context()
	// Job 1 runs, job 2 is pending, job 3 finished, job 4 is parked; job 5
	// the queue never saw.
	enqueue(t, q, 1, 2, 3, 4)
	running := claimID(t, q, 1)
	second := claimID(t, q, 2)
	must(t, "Ack", q.Ack(ctx, claimID(t, q, 3)))
	must(t, "Park", q.Park(ctx, claimID(t, q, 4), 1))
	must(t, "Requeue", q.Requeue(ctx, second))

	items := []core.ReconcileItem{
		{JobID: 1, State: core.JobRunning, Attempt: 1},
		{JobID: 2, State: core.JobQueued, Attempt: 1},
		{JobID: 3, State: core.JobQueued, Attempt: 1},
		{JobID: 4, State: core.JobRunning, Attempt: 1},
		{JobID: 5, State: core.JobQueued, Attempt: 7},
		{JobID: 6, State: core.JobSucceeded, Attempt: 1}, // not the queue's business
	}
	if n := reconcile(t, q, items...); n != 3 {
		t.Errorf("Reconcile restored %d jobs, want 3", n)
	}
	if n := reconcile(t, q, items...); n != 0 {
		t.Errorf("Reconcile again restored %d jobs, want 0", n)
	}
	wantStats(t, q, core.QueueStats{Pending: 4, Active: 1})
	if diff := cmp.Diff([]core.LeaseStatus{core.LeaseOK}, heartbeat(t, q, running)); diff != "" {
		t.Errorf("Heartbeat of the running job (-want +got):\n%s", diff)
	}
	got := map[int64]int64{}
	for range 4 {
		l := claim(t, q)
		got[l.JobID] = l.Attempt
	}
	want := map[int64]int64{2: 2, 3: 2, 4: 2, 5: 8}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attempts claimed after reconcile (-want +got):\n%s", diff)
	}
	noJob(t, q)
}

func testStats(t *testing.T, q core.Queue) {
	ctx := t.Context()
	wantStats(t, q, core.QueueStats{})
	enqueue(t, q, 1, 2, 3, 4, 5)
	claimID(t, q, 1)
	must(t, "Park", q.Park(ctx, claimID(t, q, 2), 1))
	must(t, "Nack", q.Nack(ctx, claimID(t, q, 3), time.Hour))
	wantStats(t, q, core.QueueStats{Pending: 2, Active: 1, Retry: 1, Parked: 1})
	must(t, "Ping", q.Ping(ctx))
}

func testClose(t *testing.T, q core.Queue) {
	done := make(chan error, 1)
	go func() {
		_, err := q.Claim(t.Context(), time.Minute)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the claim start waiting
	must(t, "Close", q.Close())
	select {
	case err := <-done:
		if !errors.Is(err, core.ErrClosed) {
			t.Errorf("waiting Claim returned %v after Close, want ErrClosed", err)
		}
	case <-time.After(patience):
		t.Fatal("Close did not end a waiting Claim")
	}
	if err := q.Enqueue(t.Context(), 1); !errors.Is(err, core.ErrClosed) {
		t.Errorf("Enqueue after Close: %v, want ErrClosed", err)
	}
	must(t, "Close again", q.Close())
}
