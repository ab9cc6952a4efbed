package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-bot/baton/core"
)

// Dispatch changes jobs from outside a worker — creating, resuming and
// aborting them — writing the store first (the system of record) and then
// telling the queue. A failure between the two is repaired by the
// Reconciler, so no job is lost. It is the one owner of "store first, then
// queue": the conversation service and the executor (for subtasks and
// their parents) go through it. Its errors name the job they concern.
type Dispatch struct {
	Store core.JobStore
	Queue core.Queue
}

// Create stores j as a queued job and enqueues it. When only the enqueue
// failed it returns the stored job (its ID set) with the error: the job
// waits in the store for the Reconciler.
func (d Dispatch) Create(ctx context.Context, j core.Job) (core.Job, error) {
	j, err := d.Store.CreateJob(ctx, j)
	if err != nil {
		return core.Job{}, fmt.Errorf("create job: %w", err)
	}
	return j, d.Enqueue(ctx, j.ID)
}

// Enqueue tells the queue of job jobID, which the store already holds as
// queued (committed with what created it: a message, a parent's finish).
// On error the job waits in the store for the Reconciler.
func (d Dispatch) Enqueue(ctx context.Context, jobID int64) error {
	if err := d.Queue.Enqueue(ctx, jobID); err != nil {
		return fmt.Errorf("enqueue job %d: %w", jobID, err)
	}
	return nil
}

// EnqueueChildren enqueues the queued subtask jobs of parentID, which the
// parent's finish stored. It tries every child and returns their errors
// joined.
func (d Dispatch) EnqueueChildren(ctx context.Context, parentID int64) error {
	children, err := d.Store.Jobs(ctx, core.JobFilter{ParentJobID: parentID, States: []core.JobState{core.JobQueued}})
	if err != nil {
		return fmt.Errorf("list subtasks of job %d: %w", parentID, err)
	}
	var errs []error
	for _, c := range children {
		errs = append(errs, d.Enqueue(ctx, c.ID))
	}
	return errors.Join(errs...)
}

// ResumeParent resumes job parentID, waiting for its subtasks, once none
// of them is active, as Resume does. It reports false, changing nothing,
// when the job is not waiting for subtasks or one is still active.
func (d Dispatch) ResumeParent(ctx context.Context, parentID int64) (bool, error) {
	parent, err := d.Store.Job(ctx, parentID)
	if err != nil {
		return false, fmt.Errorf("resume parent job %d: %w", parentID, err)
	}
	if parent.State != core.JobWaitingSubtasks {
		return false, nil
	}
	children, err := d.Store.Jobs(ctx, core.JobFilter{ParentJobID: parentID})
	if err != nil {
		return false, fmt.Errorf("list subtasks of job %d: %w", parentID, err)
	}
	for _, c := range children {
		if c.State.Active() {
			return false, nil
		}
	}
	return d.Resume(ctx, parentID, parent.WaitSeq)
}

// Resume requeues a job waiting under waitSeq. It reports false, changing
// nothing, when the job no longer waits under waitSeq, so the same reply
// delivered twice resumes the job once.
func (d Dispatch) Resume(ctx context.Context, jobID, waitSeq int64) (bool, error) {
	ok, err := d.Store.ResumeJob(ctx, jobID, waitSeq)
	if err != nil {
		return false, fmt.Errorf("resume job %d: %w", jobID, err)
	}
	if !ok {
		return false, nil
	}
	return true, d.resumeQueued(ctx, jobID, waitSeq)
}

// Resumed tells the queue that job jobID, parked under waitSeq, was
// requeued in the store by a write of its own (an approval's decision,
// core.ApprovalStore.DecideApproval). An error leaves the job queued in
// the store for the Reconciler.
func (d Dispatch) Resumed(ctx context.Context, jobID, waitSeq int64) error {
	return d.resumeQueued(ctx, jobID, waitSeq)
}

// resumeQueued tells the queue that job jobID, parked under waitSeq, is
// queued again in the store.
func (d Dispatch) resumeQueued(ctx context.Context, jobID, waitSeq int64) error {
	resumed, err := d.Queue.Resume(ctx, jobID, waitSeq)
	if err != nil {
		return fmt.Errorf("resume job %d in the queue: %w", jobID, err)
	}
	if !resumed {
		// The queue lost the parked job (an in-process queue restarted,
		// Redis flushed): dispatch it again from the store.
		j, err := d.Store.Job(ctx, jobID)
		if err != nil {
			return fmt.Errorf("resume job %d: %w", jobID, err)
		}
		if _, err := d.Queue.Reconcile(ctx, []core.ReconcileItem{{JobID: jobID, State: j.State, Attempt: j.Attempt}}); err != nil {
			return fmt.Errorf("resume job %d in the queue: %w", jobID, err)
		}
	}
	return nil
}

// Abort requests that job jobID stop, on behalf of by, together with its
// active subtask jobs. A queued or waiting job is aborted at once; a running
// one is stopped by its worker within the queue's abort latency.
func (d Dispatch) Abort(ctx context.Context, jobID int64, by string) (core.Job, error) {
	j, err := d.Store.RequestAbort(ctx, jobID, by)
	if err != nil {
		return core.Job{}, fmt.Errorf("abort job %d: %w", jobID, err)
	}
	if err := d.Queue.Abort(ctx, jobID); err != nil {
		return j, fmt.Errorf("abort job %d in the queue: %w", jobID, err)
	}
	children, err := d.Store.Jobs(ctx, core.JobFilter{ParentJobID: jobID})
	if err != nil {
		return j, fmt.Errorf("list subtasks of job %d: %w", jobID, err)
	}
	for _, c := range children {
		if c.State.Active() {
			if _, err := d.Abort(ctx, c.ID, by); err != nil {
				return j, err
			}
		}
	}
	return j, nil
}
