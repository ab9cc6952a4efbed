package core

import (
	"context"
	"time"
)

// Lease is a worker's claim on a job. Attempt is the fencing token: every
// queue mutation carries it and is ignored when it is no longer current.
type Lease struct {
	JobID    int64
	Attempt  int64
	Failures int       // failures the queue has counted for the job
	Deadline time.Time // lease expiry, by the queue's clock
}

// LeaseStatus is what a heartbeat learns about one lease.
type LeaseStatus int

// Lease statuses.
const (
	LeaseLost  LeaseStatus = iota // the attempt is no longer current: stop and discard
	LeaseOK                       // renewed
	LeaseAbort                    // renewed, and an abort was requested
)

func (s LeaseStatus) String() string {
	switch s {
	case LeaseOK:
		return "ok"
	case LeaseAbort:
		return "abort"
	default:
		return "lost"
	}
}

// QueueStats counts jobs by queue position.
type QueueStats struct {
	Pending int64
	Active  int64
	Retry   int64
	Dead    int64
	Parked  int64
}

// ReconcileItem is a job the store says is queued or running, handed to
// Queue.Reconcile so that a queue that lost it dispatches it again.
type ReconcileItem struct {
	JobID   int64
	State   JobState
	Attempt int64 // the queue hands out attempts above this one
}

// Queue dispatches job ids to workers with at-least-once delivery. The
// store is the system of record; a queue can be rebuilt from it with
// Reconcile. Implementations are safe for concurrent use.
//
// Mutations that carry a Lease (Ack, Nack, Requeue, Park) change nothing
// when the lease's attempt is no longer current, and return nil: replays
// are harmless.
type Queue interface {
	// Enqueue makes a new job ready to claim. It does nothing for a job the
	// queue already knows.
	Enqueue(ctx context.Context, jobID int64) error
	// Claim takes the next ready job, waiting up to wait for one; it returns
	// ErrNoJob when none came. Aborted jobs are skipped. ctx ending ends the
	// wait promptly with ctx's error, but never loses a job: a job Claim took
	// is returned with a nil error, whatever ctx did meanwhile.
	Claim(ctx context.Context, wait time.Duration) (Lease, error)
	// Heartbeat extends the leases still current and reports each one's
	// status, in order.
	Heartbeat(ctx context.Context, leases []Lease) ([]LeaseStatus, error)
	// Ack removes a finished job from the queue.
	Ack(ctx context.Context, l Lease) error
	// Nack counts a failure and makes the job ready again after delay.
	Nack(ctx context.Context, l Lease, delay time.Duration) error
	// Requeue puts the job back at the head of the queue without counting a
	// failure (graceful shutdown).
	Requeue(ctx context.Context, l Lease) error
	// Park releases the lease of a job that waits (for a person or for
	// subtasks) under waitSeq.
	Park(ctx context.Context, l Lease, waitSeq int64) error
	// Resume makes a job parked under waitSeq ready again. It reports false
	// when the job is not parked under waitSeq (already resumed, or never
	// parked), so a reply delivered twice resumes once.
	Resume(ctx context.Context, jobID, waitSeq int64) (bool, error)
	// Abort flags a job as aborted: a pending job is never claimed, and the
	// worker running it learns of it through WatchAborts, AbortRequested and
	// Heartbeat.
	Abort(ctx context.Context, jobID int64) error
	// AbortRequested returns those of ids whose abort flag is set.
	AbortRequested(ctx context.Context, ids []int64) ([]int64, error)
	// WatchAborts calls fn with the id of every job aborted from now on,
	// until ctx ends; it may miss some (a fast path; AbortRequested is the
	// sure one). It returns ctx's error, or the error that stopped it.
	WatchAborts(ctx context.Context, fn func(jobID int64)) error
	// Reap moves jobs whose lease expired to retry with backoff, counting a
	// failure, or to dead once they reached maxFailures. It returns the
	// leases of the jobs it declared dead, for the caller to fail in the
	// store.
	Reap(ctx context.Context, maxFailures int) ([]Lease, error)
	// Reconcile dispatches again the given jobs the queue lost or holds
	// inconsistently, and reports how many it restored.
	Reconcile(ctx context.Context, items []ReconcileItem) (int, error)
	// Stats counts jobs by queue position.
	Stats(ctx context.Context) (QueueStats, error)
	// Ping reports whether the queue is reachable.
	Ping(ctx context.Context) error
	Close() error
}
