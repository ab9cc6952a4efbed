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
	Grace  time.Duration
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
	jobs, err := r.Store.Jobs(ctx, core.JobFilter{States: []core.JobState{core.JobQueued, core.JobRunning}})
	if err != nil {
		return 0, err
	}
	cutoff := time.Now().Add(-grace)
	items := make([]core.ReconcileItem, 0, len(jobs))
	for _, j := range jobs {
		if j.CreatedAt.After(cutoff) {
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
