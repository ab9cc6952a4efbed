package core

import (
	"context"
	"time"
)

// Retention says how long a store keeps finished work. An age of 0 keeps
// that kind forever.
type Retention struct {
	// FinishedJobs is how long a job is kept after it finished (succeeded,
	// failed or aborted), with its events, checkpoint, approvals and sent
	// or failed outbox messages.
	FinishedJobs time.Duration
	// Events is how long a finished job's events are kept.
	Events time.Duration
	// Comments is how long a comment is kept.
	Comments time.Duration
}

// Pruned counts the rows one Prune removed, by kind.
type Pruned struct {
	Jobs, Events, Comments int64
}

// Total is the number of rows removed.
func (p Pruned) Total() int64 { return p.Jobs + p.Events + p.Comments }

// Pruner is implemented by stores that drop finished work past its age.
//
// Prune removes at most batch rows of each kind, each kind in one short
// transaction, oldest first, and returns how many it removed: a caller
// prunes a backlog by calling it until it removes nothing, so that no
// transaction holds the writer for long. Ages count back from the store's
// own clock, and only rows older than now−age go: a clock set back prunes
// fewer rows, never rows of "the future". Nothing of an open task — one
// with a job queued, running or waiting — is removed: not its jobs, events
// or comments. A job is removed only once no other job refers to it (as
// its parent or as the job it retried) and none of its outbox messages is
// still pending. When the disk is full, Prune fails with the store's error
// and has removed only whole batches.
type Pruner interface {
	Prune(ctx context.Context, r Retention, batch int) (Pruned, error)
}
