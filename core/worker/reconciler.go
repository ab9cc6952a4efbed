package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/baton-bot/baton/core"
)

// Reconciler rebuilds the queue from the store: jobs the store holds as
// queued or running that the queue lost (Redis flushed or restarted, a crash
// between a commit and an enqueue) are dispatched again, above their last
// attempt so a stale lease can never commit.
type Reconciler struct {
	Store core.JobStore
	Queue core.Queue
	// Every is how often it runs (30 s).
	Every time.Duration
	// Grace leaves alone jobs created less than Grace ago, which their
	// creator is still enqueueing (10 s).
	Grace time.Duration
	// Now is the clock Grace is measured by (time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Run reconciles once at once and then every Every until ctx ends.
func (r *Reconciler) Run(ctx context.Context) error {
	every := r.Every
	if every <= 0 {
		every = 30 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := r.Once(ctx); err != nil && ctx.Err() == nil {
			r.logger().Warn("reconcile failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Once reconciles one time and reports how many jobs it restored.
func (r *Reconciler) Once(ctx context.Context) (int, error) {
	grace := r.Grace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	return r.reconcile(ctx, grace)
}

// Recover dispatches again at once every job the store holds as queued or
// running, however new, and reports how many it restored. It is for the
// start of a process whose in-process queue is the only queue of its
// store (the embedded default): that queue starts empty, so each such job
// was left by an earlier process that stopped or died, and no creator is
// still enqueueing it; a running one is taken over at once instead of after
// a reconcile period. With a shared queue (Redis) use Run: other
// processes' jobs are theirs until their leases expire. The one use of
// Recover on Redis is when Redis answers again after this process stored
// jobs it could not enqueue: Reconcile leaves alone the jobs the queue
// holds (pending, leased or in retry), and Enqueue does nothing for a job
// the queue knows, so a job another process is enqueueing at that moment
// is dispatched once.
func (r *Reconciler) Recover(ctx context.Context) (int, error) {
	return r.reconcile(ctx, 0)
}

// reconcile dispatches the queued and running jobs created at least grace
// ago.
func (r *Reconciler) reconcile(ctx context.Context, grace time.Duration) (int, error) {
	jobs, err := r.Store.Jobs(ctx, core.JobFilter{States: []core.JobState{core.JobQueued, core.JobRunning}})
	if err != nil {
		return 0, err
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	cutoff := now().Add(-grace)
	items := make([]core.ReconcileItem, 0, len(jobs))
	for _, j := range jobs {
		if grace > 0 && j.CreatedAt.After(cutoff) {
			continue
		}
		items = append(items, core.ReconcileItem{JobID: j.ID, State: j.State, Attempt: j.Attempt})
	}
	if len(items) == 0 {
		return 0, nil
	}
	n, err := r.Queue.Reconcile(ctx, items)
	if n > 0 {
		r.logger().Info("reconciler dispatched lost jobs again", "jobs", n)
	}
	return n, err
}

func (r *Reconciler) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}
