package queue

import (
	"container/heap"
	"container/list"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/baton-bot/baton/core"
)

var _ core.Queue = (*Memory)(nil)

// Positions of a job in Memory, named as in the Redis hash.
const (
	posPending = "pending"
	posActive  = "active"
	posRetry   = "retry"
	posParked  = "parked"
	posDead    = "dead"
	posDone    = "done"
)

// Memory is the in-process core.Queue of the embedded default: one
// process, nothing persisted (Reconcile rebuilds it from the store after a
// restart). Leases and retries follow Options.Now, so tests can move time
// without sleeping. It is safe for concurrent use.
type Memory struct {
	opts Options
	log  *slog.Logger

	mu sync.Mutex
	// The fields below are guarded by mu.
	jobs    map[int64]*memJob
	pending *list.List // of memEntry, front = next to claim
	retry   retryHeap
	active  map[int64]*memJob
	count   map[string]int64 // jobs per position
	// finished lists done and dead jobs in the order they finished, so
	// that they are forgotten after finishedTTL, or sooner past
	// maxFinished.
	finished []memFinished
	// wake is closed, and replaced, whenever a job may have become ready:
	// waiting Claims look again.
	wake     chan struct{}
	watchers map[chan int64]struct{}
	closed   bool
	done     chan struct{} // closed by Close
}

type memJob struct {
	pos      string
	attempt  int64
	failures int
	abort    bool
	wseq     int64
	rwseq    int64     // a resume that arrived before the park it resumes
	deadline time.Time // lease expiry while active
	// gen grows whenever the job enters pending or retry; index entries
	// carrying an older gen are stale and skipped.
	gen        uint64
	finishedAt time.Time
}

type memEntry struct {
	id  int64
	gen uint64
}

type memFinished struct {
	id int64
	at time.Time
}

// NewMemory returns an empty in-process queue.
func NewMemory(opts Options) *Memory {
	opts = opts.withDefaults()
	return &Memory{
		opts:     opts,
		log:      opts.Logger.With("queue", "memory"),
		jobs:     make(map[int64]*memJob),
		pending:  list.New(),
		active:   make(map[int64]*memJob),
		count:    make(map[string]int64),
		wake:     make(chan struct{}),
		watchers: make(map[chan int64]struct{}),
		done:     make(chan struct{}),
	}
}

// move puts j at pos, keeping the counts and the active index. Callers
// hold mu and push j on the pending list or retry heap themselves.
func (m *Memory) move(id int64, j *memJob, pos string) {
	if j.pos != "" {
		m.count[j.pos]--
	}
	if j.pos == posActive {
		delete(m.active, id)
	}
	j.pos = pos
	m.count[pos]++
	switch pos {
	case posActive:
		m.active[id] = j
	case posPending, posRetry:
		j.gen++
	case posDone, posDead:
		j.finishedAt = m.opts.Now()
		m.finished = append(m.finished, memFinished{id: id, at: j.finishedAt})
	}
}

// ready makes j pending at the tail (or the head) and wakes the claimers.
func (m *Memory) ready(id int64, j *memJob, head bool) {
	m.move(id, j, posPending)
	e := memEntry{id: id, gen: j.gen}
	if head {
		m.pending.PushFront(e)
	} else {
		m.pending.PushBack(e)
	}
	m.notify()
}

func (m *Memory) later(id int64, j *memJob, due time.Time) {
	m.move(id, j, posRetry)
	heap.Push(&m.retry, retryEntry{id: id, gen: j.gen, due: due})
	// A waiting Claim may need to wake earlier for this one.
	m.notify()
}

func (m *Memory) notify() {
	close(m.wake)
	m.wake = make(chan struct{})
}

// current returns the job l leases, or nil when l's attempt is stale.
func (m *Memory) current(l core.Lease, pos ...string) *memJob {
	j := m.jobs[l.JobID]
	if j == nil || j.attempt != l.Attempt || !slices.Contains(pos, j.pos) {
		return nil
	}
	return j
}

// Enqueue implements core.Queue.
func (m *Memory) Enqueue(ctx context.Context, jobID int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return core.ErrClosed
	}
	if _, ok := m.jobs[jobID]; ok {
		return nil
	}
	j := &memJob{}
	m.jobs[jobID] = j
	m.ready(jobID, j, false)
	return nil
}

// Claim implements core.Queue. It waits on a wake-up channel, not by
// polling.
func (m *Memory) Claim(ctx context.Context, wait time.Duration) (core.Lease, error) {
	ls, err := m.ClaimBatch(ctx, 1, wait)
	if err != nil {
		return core.Lease{}, err
	}
	return ls[0], nil
}

// ClaimBatch takes up to n ready jobs at once, waiting up to wait for the
// first; it returns core.ErrNoJob when none came.
func (m *Memory) ClaimBatch(ctx context.Context, n int, wait time.Duration) ([]core.Lease, error) {
	n = max(n, 1)
	end := time.Now().Add(wait)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		ls, wake, next, err := m.claimOnce(n)
		if err != nil || len(ls) > 0 {
			return ls, err
		}
		left := time.Until(end)
		if left <= 0 {
			return nil, core.ErrNoJob
		}
		if next >= 0 {
			left = min(left, next)
		}
		if timer == nil {
			timer = time.NewTimer(left)
		} else {
			timer.Reset(left)
		}
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// claimOnce leases up to n ready jobs. Without one it returns the channel
// that signals a change and the time until the next retry is due, or -1.
func (m *Memory) claimOnce(n int) ([]core.Lease, <-chan struct{}, time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, nil, 0, core.ErrClosed
	}
	now := m.opts.Now()
	for m.retry.Len() > 0 && !m.retry[0].due.After(now) {
		e := heap.Pop(&m.retry).(retryEntry)
		if j := m.jobs[e.id]; j != nil && j.pos == posRetry && j.gen == e.gen {
			m.ready(e.id, j, false)
		}
	}
	var out []core.Lease
	for m.pending.Len() > 0 && len(out) < n {
		e := m.pending.Remove(m.pending.Front()).(memEntry)
		j := m.jobs[e.id]
		if j == nil || j.pos != posPending || j.gen != e.gen {
			continue
		}
		if j.abort {
			m.move(e.id, j, posDone)
			continue
		}
		j.attempt++
		j.deadline = now.Add(m.opts.Lease)
		m.move(e.id, j, posActive)
		out = append(out, core.Lease{JobID: e.id, Attempt: j.attempt, Failures: j.failures, Deadline: j.deadline})
	}
	if len(out) > 0 {
		return out, nil, 0, nil
	}
	next := time.Duration(-1)
	if m.retry.Len() > 0 {
		next = max(m.retry[0].due.Sub(now), 0)
	}
	return nil, m.wake, next, nil
}

// Position returns job jobID's place among the ready jobs (1: claimed
// next), or 0 when it is not waiting to be claimed.
func (m *Memory) Position(ctx context.Context, jobID int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, core.ErrClosed
	}
	n := 0
	for e := m.pending.Front(); e != nil; e = e.Next() {
		me := e.Value.(memEntry)
		j := m.jobs[me.id]
		if j == nil || j.pos != posPending || j.gen != me.gen {
			continue // stale
		}
		n++
		if me.id == jobID {
			return n, nil
		}
	}
	return 0, nil
}

// Heartbeat implements core.Queue.
func (m *Memory) Heartbeat(ctx context.Context, leases []core.Lease) ([]core.LeaseStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, core.ErrClosed
	}
	if len(leases) == 0 {
		return nil, nil
	}
	deadline := m.opts.Now().Add(m.opts.Lease)
	out := make([]core.LeaseStatus, len(leases))
	for i, l := range leases {
		j := m.current(l, posActive)
		switch {
		case j == nil:
			out[i] = core.LeaseLost
		case j.abort:
			j.deadline = deadline
			out[i] = core.LeaseAbort
		default:
			j.deadline = deadline
			out[i] = core.LeaseOK
		}
	}
	return out, nil
}

// Ack implements core.Queue. It also settles a job whose lease expired if
// no newer attempt claimed it yet.
func (m *Memory) Ack(ctx context.Context, l core.Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return core.ErrClosed
	}
	if j := m.current(l, posActive, posRetry); j != nil {
		m.move(l.JobID, j, posDone)
	}
	return nil
}

// AckBatch acks every lease in one step; stale ones change nothing.
func (m *Memory) AckBatch(ctx context.Context, leases []core.Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return core.ErrClosed
	}
	for _, l := range leases {
		if j := m.current(l, posActive, posRetry); j != nil {
			m.move(l.JobID, j, posDone)
		}
	}
	return nil
}

// Nack implements core.Queue. A delay of zero or less makes the job ready
// at once (at the tail).
func (m *Memory) Nack(ctx context.Context, l core.Lease, delay time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return core.ErrClosed
	}
	j := m.current(l, posActive)
	if j == nil {
		return nil
	}
	j.failures++
	if delay <= 0 {
		m.ready(l.JobID, j, false)
	} else {
		m.later(l.JobID, j, m.opts.Now().Add(delay))
	}
	return nil
}

// Requeue implements core.Queue.
func (m *Memory) Requeue(ctx context.Context, l core.Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return core.ErrClosed
	}
	if j := m.current(l, posActive); j != nil {
		m.ready(l.JobID, j, true)
	}
	return nil
}

// Park implements core.Queue. Like Ack, it also settles a job whose lease
// expired if no newer attempt claimed it yet.
func (m *Memory) Park(ctx context.Context, l core.Lease, waitSeq int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return core.ErrClosed
	}
	if j := m.current(l, posActive, posRetry); j != nil {
		j.wseq = waitSeq
		if j.rwseq >= waitSeq { // resumed while it was still running
			m.ready(l.JobID, j, false)
			return nil
		}
		m.move(l.JobID, j, posParked)
	}
	return nil
}

// Resume implements core.Queue.
func (m *Memory) Resume(ctx context.Context, jobID, waitSeq int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false, core.ErrClosed
	}
	j := m.jobs[jobID]
	if j == nil {
		return false, nil
	}
	if j.pos == posActive || j.pos == posRetry {
		// Still running: its coming park applies the resume.
		if j.rwseq >= waitSeq {
			return false, nil
		}
		j.rwseq = waitSeq
		return true, nil
	}
	if j.pos != posParked || j.wseq != waitSeq {
		return false, nil
	}
	m.ready(jobID, j, false)
	return true, nil
}

// Abort implements core.Queue. A job the queue does not know is remembered
// as aborted, so that a later Enqueue of it does nothing.
func (m *Memory) Abort(ctx context.Context, jobID int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return core.ErrClosed
	}
	j := m.jobs[jobID]
	if j == nil {
		j = &memJob{}
		m.jobs[jobID] = j
	}
	switch j.pos {
	case posDone, posDead:
		return nil
	case posActive:
		j.abort = true
		for w := range m.watchers {
			select {
			case w <- jobID:
			default: // a slow watcher misses it; AbortRequested still tells
			}
		}
	default:
		// Stale entries left on the pending list or retry heap are skipped.
		j.abort = true
		m.move(jobID, j, posDone)
	}
	return nil
}

// AbortRequested implements core.Queue.
func (m *Memory) AbortRequested(ctx context.Context, ids []int64) ([]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, core.ErrClosed
	}
	var out []int64
	for _, id := range ids {
		if j := m.jobs[id]; j != nil && j.abort {
			out = append(out, id)
		}
	}
	return out, nil
}

// WatchAborts implements core.Queue. fn runs on the goroutine that called
// WatchAborts; a watcher that falls more than 64 aborts behind misses some.
func (m *Memory) WatchAborts(ctx context.Context, fn func(jobID int64)) error {
	ch := make(chan int64, 64)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return core.ErrClosed
	}
	m.watchers[ch] = struct{}{}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.watchers, ch)
	}()
	for {
		select {
		case id := <-ch:
			fn(id)
		case <-ctx.Done():
			return ctx.Err()
		case <-m.done:
			return core.ErrClosed
		}
	}
}

// Reap implements core.Queue. maxFailures < 1 means no limit.
func (m *Memory) Reap(ctx context.Context, maxFailures int) ([]core.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, core.ErrClosed
	}
	now := m.opts.Now()
	m.forget(now)
	var expired []int64
	for id, j := range m.active {
		if !j.deadline.After(now) {
			expired = append(expired, id)
		}
	}
	slices.Sort(expired)
	var dead []core.Lease
	for _, id := range expired {
		j := m.jobs[id]
		j.failures++
		if maxFailures > 0 && j.failures >= maxFailures {
			m.move(id, j, posDead)
			dead = append(dead, core.Lease{JobID: id, Attempt: j.attempt, Failures: j.failures, Deadline: j.deadline})
			m.log.Warn("queue: job dead after repeated lease expiry", "job", id, "attempt", j.attempt, "failures", j.failures)
			continue
		}
		m.later(id, j, now.Add(max(m.opts.Backoff(j.failures), 0)))
	}
	return dead, nil
}

// maxFinished bounds the finished jobs Memory remembers: a week of them
// (finishedTTL) is millions in a busy process, each a hundred bytes and
// more, kept only so that a late Enqueue of a finished job does nothing.
// The store fences a job run again after it was forgotten (StartJob
// refuses a finished job), so remembering the latest ones is enough.
const maxFinished = 10_000

// forget drops jobs finished more than finishedTTL ago, and the oldest
// beyond maxFinished.
func (m *Memory) forget(now time.Time) {
	n := 0
	for _, f := range m.finished {
		if now.Sub(f.at) < finishedTTL && len(m.finished)-n <= maxFinished {
			break
		}
		n++
		if j := m.jobs[f.id]; j != nil && (j.pos == posDone || j.pos == posDead) && j.finishedAt.Equal(f.at) {
			m.count[j.pos]--
			delete(m.jobs, f.id)
		}
	}
	m.finished = slices.Delete(m.finished, 0, n)
}

// Reconcile implements core.Queue. Items in states other than queued and
// running are ignored.
func (m *Memory) Reconcile(ctx context.Context, items []core.ReconcileItem) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, core.ErrClosed
	}
	n := 0
	for _, it := range items {
		if it.State != core.JobQueued && it.State != core.JobRunning {
			continue
		}
		j := m.jobs[it.JobID]
		if j == nil {
			j = &memJob{}
			m.jobs[it.JobID] = j
		}
		switch j.pos {
		case posActive:
			// A lease is out: raising its attempt would fence off its worker.
			continue
		case posPending, posRetry:
			j.attempt = max(j.attempt, it.Attempt)
			continue
		}
		j.attempt = max(j.attempt, it.Attempt)
		m.ready(it.JobID, j, false)
		n++
	}
	if n > 0 {
		m.log.Info("queue: reconciled jobs", "restored", n)
	}
	return n, nil
}

// Stats implements core.Queue.
func (m *Memory) Stats(ctx context.Context) (core.QueueStats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return core.QueueStats{}, core.ErrClosed
	}
	return core.QueueStats{
		Pending: m.count[posPending],
		Active:  m.count[posActive],
		Retry:   m.count[posRetry],
		Dead:    m.count[posDead],
		Parked:  m.count[posParked],
	}, nil
}

// Ping implements core.Queue: a Memory queue is reachable until closed.
func (m *Memory) Ping(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return core.ErrClosed
	}
	return nil
}

// Close stops the queue: waiting Claims and WatchAborts return at once,
// and later calls fail with core.ErrClosed. Jobs in it are forgotten.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.notify()
	close(m.done)
	return nil
}

type retryEntry struct {
	id  int64
	gen uint64
	due time.Time
}

// retryHeap orders retries by due time.
type retryHeap []retryEntry

func (h retryHeap) Len() int           { return len(h) }
func (h retryHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h retryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *retryHeap) Push(x any)        { *h = append(*h, x.(retryEntry)) }
func (h *retryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
