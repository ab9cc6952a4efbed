// Package worker runs jobs from a core.Queue with bounded concurrency.
//
// A Pool claims leases, keeps them alive with batched heartbeats, cancels a
// job's context when it is aborted or its lease is lost, and settles the
// lease (ack, nack, park, requeue) with what its Handler returns. An
// Executor is the Handler that runs jobs of the store: it fences every write
// on the lease's attempt and hands the work to an Engine.
//
// Typical use:
//
//	pool := worker.NewPool(q, worker.NewExecutor(store, q, engine, execCfg), poolCfg)
//	err := pool.Run(ctx) // until ctx ends, then a graceful shutdown
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/baton-bot/baton/core"
)

// ErrShutdown is the cause of a job context cancelled because the pool shut
// down before the job ended within the grace period.
var ErrShutdown = errors.New("worker shutting down")

// Action says how a Pool settles a lease after its Handler returned.
type Action int

// Actions.
const (
	Ack     Action = iota // done: remove from the queue
	Nack                  // failed: count a failure, retry after Delay
	Park                  // waiting under WaitSeq: release the lease
	Requeue               // not done, not failed: back to the head of the queue
	Drop                  // the lease is no longer ours: touch nothing
)

func (a Action) String() string {
	return [...]string{"ack", "nack", "park", "requeue", "drop"}[a]
}

// Result is a Handler's verdict on one lease.
type Result struct {
	Action  Action
	Delay   time.Duration // with Nack
	WaitSeq int64         // with Park
}

// Handler runs one claimed job. The context it gets is cancelled with cause
// core.ErrAborted when the job is aborted, core.ErrLeaseLost when the lease
// could not be kept, and ErrShutdown when the pool stops; context.Cause
// tells which. Handle must return soon after its context is cancelled.
type Handler interface {
	Handle(ctx context.Context, l core.Lease) Result
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, l core.Lease) Result

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, l core.Lease) Result { return f(ctx, l) }

// DeadFunc is told about jobs the queue gave up on after too many failures.
type DeadFunc func(ctx context.Context, l core.Lease)

// PoolMeter records the pool's measurements (Prometheus in production).
// Implementations are safe for concurrent use and return quickly.
type PoolMeter interface {
	// Settled is a job's run ended with action after took.
	Settled(action string, took time.Duration)
}

// PoolConfig configures a Pool. Zero fields take the defaults noted.
type PoolConfig struct {
	Concurrency   int           // jobs run at once (4)
	Lease         time.Duration // the queue's lease length (30 s)
	Heartbeat     time.Duration // how often leases are renewed (10 s)
	Reap          time.Duration // how often expired leases are reaped (5 s)
	AbortPoll     time.Duration // how often running jobs' abort flags are polled (1 s)
	ClaimWait     time.Duration // how long one claim call waits for a job (2 s)
	ShutdownGrace time.Duration // how long running jobs may finish on shutdown (20 s)
	MaxFailures   int           // failures before the queue gives up on a job (5)
	OnDead        DeadFunc      // optional
	Meter         PoolMeter     // optional
	// Now is the clock the pool keeps its leases by: when each was last
	// renewed, and so when a job whose lease could not be renewed must
	// stop (time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

func (c *PoolConfig) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	def(&c.Lease, 30*time.Second)
	def(&c.Heartbeat, 10*time.Second)
	def(&c.Reap, 5*time.Second)
	def(&c.AbortPoll, time.Second)
	def(&c.ClaimWait, 2*time.Second)
	def(&c.ShutdownGrace, 20*time.Second)
	if c.MaxFailures <= 0 {
		c.MaxFailures = 5
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Pool runs jobs from a queue. Create it with NewPool; Run it once.
type Pool struct {
	q   core.Queue
	h   Handler
	cfg PoolConfig
	log *slog.Logger

	acks chan core.Lease // leases to ack in batches; nil when the queue does not batch

	mu      sync.Mutex
	running map[attemptKey]*job // guarded by mu
}

// attemptKey names one attempt of a job. Two attempts of a job can meet in
// one pool: the queue lost the job (Redis flushed) and the reconciler
// dispatched it again while the first still ran.
type attemptKey struct{ job, attempt int64 }

// job is a lease being worked on.
type job struct {
	lease   core.Lease
	cancel  context.CancelCauseFunc
	renewed time.Time     // by cfg.Now, when the last successful renewal was sent; guarded by Pool.mu
	done    chan struct{} // closed once the handler returned
}

// NewPool returns a pool that claims from q and runs h.
func NewPool(q core.Queue, h Handler, cfg PoolConfig) *Pool {
	cfg.setDefaults()
	return &Pool{q: q, h: h, cfg: cfg, log: cfg.Logger, running: make(map[attemptKey]*job)}
}

// Running returns the ids of the jobs being run now, each once.
func (p *Pool) Running() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]int64, 0, len(p.running))
	for k := range p.running {
		if !slices.Contains(ids, k.job) {
			ids = append(ids, k.job)
		}
	}
	return ids
}

// batcher is a queue that claims and acks several jobs per round trip.
// Both of Baton's queues are; the pool works one job at a time with others.
type batcher interface {
	ClaimBatch(ctx context.Context, n int, wait time.Duration) ([]core.Lease, error)
	AckBatch(ctx context.Context, leases []core.Lease) error
}

// maxAckBatch bounds the leases acked in one call.
const maxAckBatch = 256

// Run claims and runs jobs until ctx ends. Then it stops claiming, lets
// running jobs finish for up to ShutdownGrace, cancels the rest with cause
// ErrShutdown, waits for them to settle and returns nil.
//
// One fetcher claims as many jobs as there are free slots in one call, and
// acks are gathered while the previous ack is on the wire: under load a
// round trip serves many jobs.
func (p *Pool) Run(ctx context.Context) error {
	// Jobs run under a context that outlives ctx by the grace period.
	jobsCtx, cancelJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelJobs(ErrShutdown)
	bgCtx, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBg()

	var bg sync.WaitGroup
	for _, loop := range []func(context.Context){p.heartbeatLoop, p.abortPollLoop, p.watchAbortsLoop, p.reapLoop} {
		bg.Add(1)
		go func() {
			defer bg.Done()
			loop(bgCtx)
		}()
	}
	var acker sync.WaitGroup
	if b, ok := p.q.(batcher); ok {
		p.acks = make(chan core.Lease, 2*p.cfg.Concurrency)
		acker.Add(1)
		go func() {
			defer acker.Done()
			p.ackLoop(b)
		}()
	}

	var jobs sync.WaitGroup
	p.fetch(ctx, jobsCtx, &jobs)

	done := make(chan struct{})
	go func() {
		jobs.Wait()
		close(done)
	}()
	timer := time.NewTimer(p.cfg.ShutdownGrace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		p.log.Info("shutdown grace over: cancelling running jobs", "running", len(p.Running()))
		cancelJobs(ErrShutdown)
		<-done
	}
	if p.acks != nil {
		close(p.acks)
		acker.Wait()
	}
	stopBg()
	bg.Wait()
	return nil
}

// fetch claims jobs for free slots and starts them, until stop ends.
func (p *Pool) fetch(stop, jobsCtx context.Context, jobs *sync.WaitGroup) {
	slots := make(chan struct{}, p.cfg.Concurrency)
	b, batches := p.q.(batcher)
	var errDelay time.Duration
	for {
		// Stopping comes first: with a free slot too, select would pick
		// at random and claim again.
		if stop.Err() != nil {
			return
		}
		select {
		case slots <- struct{}{}:
		case <-stop.Done():
			return
		}
		n := 1
		if batches {
			// Let jobs that are about to end free their slots, so that one
			// claim serves them all.
			runtime.Gosched()
		more:
			for n < cap(slots) {
				select {
				case slots <- struct{}{}:
					n++
				default:
					break more
				}
			}
		}
		// stop ends the claim's wait at once; a job it took is still
		// returned (core.Queue's contract), and is run under jobsCtx.
		var leases []core.Lease
		var err error
		if batches {
			leases, err = b.ClaimBatch(stop, n, p.cfg.ClaimWait)
		} else {
			var l core.Lease
			if l, err = p.q.Claim(stop, p.cfg.ClaimWait); err == nil {
				leases = []core.Lease{l}
			}
		}
		for range n - len(leases) {
			<-slots
		}
		switch {
		case err == nil:
			errDelay = 0
		case errors.Is(err, core.ErrNoJob):
			errDelay = 0
		case stop.Err() != nil:
			// The wait ended with stop: not a failure.
		default:
			errDelay = min(max(2*errDelay, 100*time.Millisecond), 5*time.Second)
			p.log.Warn("claim failed", "err", err, "retry_in", errDelay)
			sleep(stop, errDelay)
		}
		for _, l := range leases {
			jobs.Add(1)
			go func() {
				defer jobs.Done()
				defer func() { <-slots }()
				p.run(jobsCtx, l)
			}()
		}
	}
}

// ackLoop acks the leases sent on p.acks, gathering all that arrived while
// the previous call was on the wire, until p.acks is closed and drained.
func (p *Pool) ackLoop(b batcher) {
	for first := range p.acks {
		batch := []core.Lease{first}
	gather:
		for len(batch) < maxAckBatch {
			select {
			case l, ok := <-p.acks:
				if !ok {
					break gather
				}
				batch = append(batch, l)
			default:
				break gather
			}
		}
		p.retrySettle(func(ctx context.Context) error { return b.AckBatch(ctx, batch) }, "ack", batch[0].JobID, len(batch))
	}
}

// run handles one lease and settles it. An older attempt of the same job
// still running in this pool is stopped first, and the handler starts only
// once it returned: two attempts never work on one job at once.
func (p *Pool) run(jobsCtx context.Context, l core.Lease) {
	ctx, cancel := context.WithCancelCause(jobsCtx)
	defer cancel(nil)
	j := &job{lease: l, cancel: cancel, renewed: p.cfg.Now(), done: make(chan struct{})}
	older, ok := p.register(j)
	if !ok {
		return
	}
	for _, o := range older {
		<-o.done
	}

	start := p.cfg.Now()
	res := p.handle(ctx, l)

	p.mu.Lock()
	delete(p.running, attemptKey{l.JobID, l.Attempt})
	p.mu.Unlock()
	close(j.done)
	if errors.Is(context.Cause(ctx), core.ErrLeaseLost) {
		res = Result{Action: Drop}
	}
	if p.cfg.Meter != nil {
		p.cfg.Meter.Settled(res.Action.String(), p.cfg.Now().Sub(start))
	}
	p.settle(l, res)
}

// register adds j to the running jobs and cancels the older attempts of its
// job that run here, with cause core.ErrLeaseLost (the queue's newer
// attempt fences them out anyway); it returns them, for j to wait on. It
// reports false, adding nothing, when j's attempt is not the newest of its
// job here: that lease is fenced out and is dropped without a run.
func (p *Pool) register(j *job) (older []*job, ok bool) {
	l := j.lease
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, o := range p.running {
		if k.job != l.JobID {
			continue
		}
		if k.attempt >= l.Attempt {
			p.log.Warn("claimed an attempt older than the one running: dropping it", "job", l.JobID, "attempt", l.Attempt, "running", k.attempt)
			return nil, false
		}
		older = append(older, o)
	}
	for _, o := range older {
		p.log.Warn("a newer attempt of a running job was claimed: stopping the older one first",
			"job", l.JobID, "attempt", o.lease.Attempt, "newer", l.Attempt)
		o.cancel(core.ErrLeaseLost)
	}
	p.running[attemptKey{l.JobID, l.Attempt}] = j
	return older, true
}

// handle calls the handler, turning a panic into a failed run.
func (p *Pool) handle(ctx context.Context, l core.Lease) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("job handler panicked", "job", l.JobID, "panic", r, "stack", string(debug.Stack()))
			res = Result{Action: Nack, Delay: core.RetryBackoff(l.Failures + 1)}
		}
	}()
	return p.h.Handle(ctx, l)
}

// settle tells the queue how the lease ended. Acks go to the ack loop when
// the queue batches.
func (p *Pool) settle(l core.Lease, res Result) {
	if res.Action == Drop {
		return
	}
	if res.Action == Ack && p.acks != nil {
		p.acks <- l
		return
	}
	p.retrySettle(func(ctx context.Context) error {
		switch res.Action {
		case Ack:
			return p.q.Ack(ctx, l)
		case Nack:
			return p.q.Nack(ctx, l, res.Delay)
		case Park:
			return p.q.Park(ctx, l, res.WaitSeq)
		default:
			return p.q.Requeue(ctx, l)
		}
	}, res.Action.String(), l.JobID, 1)
}

// retrySettle runs a settling call, retrying briefly: a lease left
// unsettled is not lost, only delayed until it expires and is reaped.
func (p *Pool) retrySettle(call func(ctx context.Context) error, action string, jobID int64, jobs int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for try := 0; try < 5; try++ {
		if err = call(ctx); err == nil || ctx.Err() != nil {
			break
		}
		sleep(ctx, time.Duration(try+1)*100*time.Millisecond)
	}
	if err != nil {
		p.log.Warn("settling leases failed; they will expire and be reaped",
			"action", action, "job", jobID, "jobs", jobs, "err", err)
	}
}

// heartbeatLoop renews every running lease in one batch per tick, and
// cancels jobs whose lease is lost, aborted, or could not be renewed for
// longer than the lease minus a margin (self-fencing).
func (p *Pool) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(p.cfg.Heartbeat)
	defer t.Stop()
	margin := min(p.cfg.Lease/6, p.cfg.Heartbeat)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		jobs := make([]*job, 0, len(p.running))
		leases := make([]core.Lease, 0, len(p.running))
		for _, j := range p.running {
			jobs = append(jobs, j)
			leases = append(leases, j.lease)
		}
		p.mu.Unlock()
		if len(leases) == 0 {
			continue
		}
		sent := p.cfg.Now()
		hctx, cancel := context.WithTimeout(ctx, p.cfg.Heartbeat)
		st, err := p.q.Heartbeat(hctx, leases)
		cancel()
		if err == nil && len(st) != len(leases) {
			err = fmt.Errorf("heartbeat: %d statuses for %d leases", len(st), len(leases))
		}
		p.mu.Lock()
		for i, j := range jobs {
			switch {
			case err != nil:
				if p.cfg.Now().Sub(j.renewed) >= p.cfg.Lease-margin {
					p.log.Warn("lease not renewed in time: stopping the job", "job", j.lease.JobID, "err", err)
					j.cancel(core.ErrLeaseLost)
				}
			case st[i] == core.LeaseLost:
				p.log.Warn("lease lost: stopping the job", "job", j.lease.JobID, "attempt", j.lease.Attempt)
				j.cancel(core.ErrLeaseLost)
			case st[i] == core.LeaseAbort:
				j.renewed = sent
				j.cancel(core.ErrAborted)
			default:
				j.renewed = sent
			}
		}
		p.mu.Unlock()
		if err != nil {
			p.log.Warn("heartbeat failed", "err", err)
		}
	}
}

// abortPollLoop is the sure path for aborts: pub/sub may lose a message,
// polling the flags of running jobs every AbortPoll does not.
func (p *Pool) abortPollLoop(ctx context.Context) {
	t := time.NewTicker(p.cfg.AbortPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids := p.Running()
		if len(ids) == 0 {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, p.cfg.AbortPoll)
		aborted, err := p.q.AbortRequested(pctx, ids)
		cancel()
		if err != nil {
			p.log.Debug("abort poll failed", "err", err)
			continue
		}
		for _, id := range aborted {
			p.abort(id)
		}
	}
}

// watchAbortsLoop is the fast path for aborts, re-subscribing when the
// subscription breaks.
func (p *Pool) watchAbortsLoop(ctx context.Context) {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := p.q.WatchAborts(ctx, p.abort)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			delay = 100 * time.Millisecond
		}
		p.log.Debug("abort watch ended; watching again", "err", err, "in", delay)
		sleep(ctx, delay)
		delay = min(2*delay, 5*time.Second)
	}
}

// abort cancels the job with id if this pool runs it, whichever attempt.
func (p *Pool) abort(id int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, j := range p.running {
		if k.job == id {
			j.cancel(core.ErrAborted)
		}
	}
}

// reapLoop returns expired leases to the queue and reports dead jobs.
func (p *Pool) reapLoop(ctx context.Context) {
	t := time.NewTicker(p.cfg.Reap)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		dead, err := p.q.Reap(ctx, p.cfg.MaxFailures)
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("reap failed", "err", err)
			}
			continue
		}
		for _, l := range dead {
			p.log.Warn("job failed too many times: giving up", "job", l.JobID, "failures", l.Failures)
			if p.cfg.OnDead != nil {
				p.cfg.OnDead(ctx, l)
			}
		}
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) { _ = core.Sleep(ctx, d) }
