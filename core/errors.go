package core

import (
	"errors"
	"fmt"
)

// Sentinel errors shared by every implementation of core's ports. Callers
// compare with errors.Is; implementations wrap them with context.
var (
	// ErrNotFound reports that a task, comment or job does not exist.
	ErrNotFound = errors.New("not found")
	// ErrStale reports a fenced write refused because the attempt that made
	// it is no longer the job's current attempt (or the job left the state
	// the write expected).
	ErrStale = errors.New("stale attempt")
	// ErrLeaseLost reports that a worker no longer holds a job's lease.
	ErrLeaseLost = errors.New("lease lost")
	// ErrAborted reports that a job was aborted.
	ErrAborted = errors.New("job aborted")
	// ErrNoJob is returned by Queue.Claim when no job became ready in time.
	ErrNoJob = errors.New("no job ready")
	// ErrDuplicate reports that an inbound event or platform message was
	// already recorded.
	ErrDuplicate = errors.New("duplicate")
	// ErrClosed is returned by a component used after Close.
	ErrClosed = errors.New("closed")
	// ErrStoreReplaced reports that the store's file was deleted or
	// replaced under the running process: what it would write would be
	// lost (written into an unlinked file) or land in another store's
	// history, so writes are refused until the process restarts.
	ErrStoreReplaced = errors.New("the store's file was deleted or replaced")
)

// TransitionError reports a job state change outside the transition table.
type TransitionError struct {
	JobID    int64
	From, To JobState
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("job %d: state change %s -> %s is not allowed", e.JobID, e.From, e.To)
}
