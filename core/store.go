package core

import (
	"context"
	"time"
)

// Store is the system of record: tasks, comments, jobs, their events, the
// outbox, the inbox, inbound dedup keys, and the leases of the processes
// sharing it. Implementations are safe for concurrent use.
// Errors wrap ErrNotFound, ErrStale, ErrDuplicate or *TransitionError where
// those apply.
type Store interface {
	TaskStore
	JobStore
	OutboxStore
	InboundStore
	InboxStore
	ApprovalStore
	LeaseStore
	UsageStore
	// Ping reports whether the store is reachable.
	Ping(ctx context.Context) error
	Close() error
}

// TaskStore keeps tasks and their comments.
type TaskStore interface {
	// EnsureTask returns the task for t.Thread, creating it from t when
	// there is none. created reports whether it was created. The store sets
	// ID, Workspace (when empty), CreatedAt and UpdatedAt.
	EnsureTask(ctx context.Context, t Task) (task Task, created bool, err error)
	// Task returns the task with id, or ErrNotFound.
	Task(ctx context.Context, id int64) (Task, error)
	// TaskByThread returns the task keyed on ref, or ErrNotFound.
	TaskByThread(ctx context.Context, ref ThreadRef) (Task, error)
	// RetireThread frees the thread key of task id, so that the thread's
	// next message starts a new task (a direct-message channel is one
	// thread for ever; `!new` starts afresh in it). The task keeps its
	// comments and jobs.
	RetireThread(ctx context.Context, id int64) error
	// AddComment stores c. When c.PlatformMsgID is set and the task already
	// has a comment with it, it returns that comment and an error wrapping
	// ErrDuplicate.
	AddComment(ctx context.Context, c Comment) (Comment, error)
	// RecentComments returns the task's last n comments, oldest first.
	RecentComments(ctx context.Context, taskID int64, n int) ([]Comment, error)
	// Tasks returns the tasks matching f, newest (highest ID) first, at
	// most f.Limit of them. A page ends with the smallest ID it holds: the
	// next page is asked with that ID as f.Before.
	Tasks(ctx context.Context, f TaskFilter) ([]Task, error)
}

// TaskFilter selects tasks. Zero fields do not filter.
type TaskFilter struct {
	Platform Platform
	// State keeps the tasks whose newest job is in State; a task without
	// a job has no state and never matches.
	State JobState
	// Since keeps the tasks created at or after it.
	Since time.Time
	// Before keeps the tasks whose ID is smaller: the cursor of the page
	// after one that ended with task Before.
	Before int64
	Limit  int // 0: no limit

	// Channel keeps the tasks of the thread's channel, Owner those of
	// the requester (OwnerUser), Text those whose title contains it
	// (ASCII letters compared without case).
	Channel string
	Owner   string
	Text    string
}

// JobFilter selects jobs. Zero fields do not filter.
type JobFilter struct {
	TaskID      int64
	ParentJobID int64
	States      []JobState
	Limit       int // 0: no limit
}

// Progress is a running job's progress, persisted at every movement
// boundary so that a redelivered job resumes at its movement. Values are
// absolute, not increments.
type Progress struct {
	Movement         string
	MovementCount    int
	Iteration        int
	Lessons          string
	PromptTokens     int64
	CompletionTokens int64
	// Events are appended to the job's history in the same transaction
	// (their JobID is the job's).
	Events []JobEvent
}

// Finish describes how a running attempt ends.
type Finish struct {
	// To is the new state: succeeded, failed, aborted, waiting_human,
	// waiting_subtasks, or queued (requeue).
	To JobState
	// CountFailure, with To == queued, counts the run as a failure (a failed
	// run to retry); without it the requeue is free (graceful shutdown).
	CountFailure  bool
	ResultSummary string
	// Error is why the run failed: its first line a plain sentence that
	// people are shown, any further lines detail (a panic's stack trace).
	Error          string
	Question       string // with To == waiting_human
	ResumeMovement string // with To == waiting_human, waiting_subtasks or waiting_approval
	// Approval, with To == waiting_approval, is the pending call, stored
	// with the park under the job's new WaitSeq (its JobID, TaskID and
	// WaitSeq are filled by the store).
	Approval *Approval
	// Checkpoint, with To == waiting_approval (or waiting_human, for the
	// engine's own questions), is what the parked movement
	// resumes from (the engine's, opaque to the store); see
	// ApprovalStore.TakeCheckpoint.
	Checkpoint string
	AbortedBy  string // with To == aborted
	// Children are created with the parent's transition to
	// waiting_subtasks, in the same transaction.
	Children []Job
	// Comments (bot questions and answers) and Outbox messages are written
	// in the same transaction as the state change.
	Comments []Comment
	Outbox   []OutboxMessage
	// SeenCommentID is the newest comment of the task the run has seen (in
	// its first prompt or handed to it while it ran); later ones still call
	// for an answer. 0: unknown.
	SeenCommentID int64

	// WaitKind, with To == waiting_human, is Job.WaitKind ("" for ASK).
	WaitKind string
}

// JobStore keeps jobs and their history.
//
// Writes made on behalf of a running attempt (SaveProgress, FinishJob) are
// fenced on the attempt: they fail with ErrStale when the job's current
// attempt differs or the job is no longer running, and then change nothing.
type JobStore interface {
	// CreateJob stores j in state queued and returns it with its ID.
	CreateJob(ctx context.Context, j Job) (Job, error)
	// Job returns the job with id, or ErrNotFound.
	Job(ctx context.Context, id int64) (Job, error)
	// Jobs returns the jobs matching f, newest first.
	Jobs(ctx context.Context, f JobFilter) ([]Job, error)
	// ActiveJob returns the task's active job (queued, running or waiting),
	// or ErrNotFound.
	ActiveJob(ctx context.Context, taskID int64) (Job, error)
	// StartJob marks the job running under attempt, the fencing token the
	// queue handed out with the claim. A job running under an older attempt
	// lost its lease: the takeover counts a failure. It fails with ErrStale
	// when the job already ran under attempt or a newer one, and with a
	// *TransitionError when the job is not queued or running (terminal or
	// waiting). The outbox messages notes (the claim's notices) are written
	// in the same transaction, under attempt, for the job's task and job
	// when they name none.
	StartJob(ctx context.Context, id, attempt int64, notes ...OutboxMessage) (Job, error)
	// SaveProgress records a running attempt's progress (fenced).
	SaveProgress(ctx context.Context, id, attempt int64, p Progress) error
	// FinishJob ends a running attempt as f says (fenced), writing f's
	// children, comments and outbox messages in the same transaction. It
	// returns the updated job; a park increments WaitSeq. Once an abort was
	// requested, only To == aborted or queued is accepted; any other finish
	// fails with ErrAborted and changes nothing. Children are accepted only
	// with To == waiting_subtasks.
	FinishJob(ctx context.Context, id, attempt int64, f Finish) (Job, error)
	// FailJob fails a queued or running job outside any attempt: the queue
	// declared it dead. A terminal job is left as it is (no error).
	FailJob(ctx context.Context, id int64, reason string) (Job, error)
	// ResumeJob requeues a job waiting under waitSeq (waiting_human or
	// waiting_subtasks; an approval is resumed by DecideApproval). It reports false, changing nothing, when the job is
	// no longer waiting under waitSeq, so a reply delivered twice resumes once.
	ResumeJob(ctx context.Context, id, waitSeq int64) (bool, error)
	// RequestAbort records an abort by who. A queued or waiting job becomes
	// aborted at once; a running job keeps running until its worker stops it
	// (see AbortRequestedAt). A terminal job is returned unchanged.
	RequestAbort(ctx context.Context, id int64, by string) (Job, error)
	// AddEvent appends to a job's history; with e.Attempt set, only while
	// the job runs under that attempt (fenced, see JobEvent.Attempt).
	AddEvent(ctx context.Context, e JobEvent) error
	// Events returns a job's history, oldest first.
	Events(ctx context.Context, jobID int64) ([]JobEvent, error)
	// CountJobs returns how many jobs are in each state.
	CountJobs(ctx context.Context) (map[JobState]int64, error)
}

// OutboxStore keeps messages waiting for delivery to platforms.
type OutboxStore interface {
	// AddOutbox stores messages outside any job transition.
	AddOutbox(ctx context.Context, msgs ...OutboxMessage) error
	// DueOutbox returns up to limit pending messages of tasks on platform
	// whose NextTryAt is not after now, in (task, seq) order, at most the
	// first pending message per task so that a thread's order holds. It
	// only reads: claims are neither looked at nor taken (a deliverer
	// uses ClaimOutbox).
	DueOutbox(ctx context.Context, platform Platform, now time.Time, limit int) ([]OutboxMessage, error)
	// ClaimOutbox is DueOutbox for a deliverer that may share the store
	// with others: of the messages DueOutbox would return, it skips those
	// under a claim (of any owner, owner included) that has not expired
	// at now, and claims each it returns for owner until now+lease
	// (Claims + 1), all in one transaction. A task whose first pending
	// message is claimed returns nothing, so that its order holds.
	// Concurrent claims, from any process, never return one message
	// twice before its claim expires. limit <= 0 returns nothing.
	// afterTask > 0 claims only messages of tasks with a greater id: a
	// deliverer whose claims all wait for a paced channel goes on past
	// them in the next round, instead of claiming the same first tasks
	// again while a quieter channel's, later in the order, wait.
	ClaimOutbox(ctx context.Context, platform Platform, owner string, now time.Time, lease time.Duration, limit int, afterTask int64) ([]OutboxMessage, error)
	// ReleaseOutbox ends owner's claims of messages ids without settling
	// them: each is due again at once, to any owner, as it was before
	// being claimed. untried says that none of them reached the platform;
	// their claims are then not counted (Claims - 1). A message no longer
	// claimed by owner (settled, or claimed by another since its claim
	// expired) is left as it is.
	ReleaseOutbox(ctx context.Context, owner string, untried bool, ids ...int64) error
	// OutboxSent marks a message delivered and ends its claim.
	OutboxSent(ctx context.Context, id int64, platformMsgID string) error
	// OutboxRetry records a failed try and when to try again, and ends
	// the message's claim.
	OutboxRetry(ctx context.Context, id int64, next time.Time, lastErr string) error
	// OutboxFail gives up on a message and ends its claim.
	OutboxFail(ctx context.Context, id int64, lastErr string) error
	// OutboxStats returns the outbox figures of every platform that has
	// messages pending or failed.
	OutboxStats(ctx context.Context) (map[Platform]OutboxStats, error)
	// StatusMessage returns the platform id of job jobID's status message:
	// its first update delivered. ErrNotFound when there is none yet.
	StatusMessage(ctx context.Context, jobID int64) (string, error)
	// RefMessage returns the platform id of the first update delivered
	// under ref in task taskID. ErrNotFound when there is none yet.
	RefMessage(ctx context.Context, taskID int64, ref string) (string, error)
}

// Inbound is what one inbound message writes, all in one transaction
// (InboundStore.Ingest).
type Inbound struct {
	// Keys are the message's dedup keys (its event id, its message id),
	// recorded at At. When one of them was seen before the message is a
	// duplicate: the new keys are recorded and nothing else is written.
	Keys []string
	At   time.Time
	// Task is the thread's task, found by Task.Thread or else created from
	// Task as TaskStore.EnsureTask does.
	Task Task
	// History holds the thread's earlier messages, stored before Comment
	// when the task is created here (and ignored otherwise); those already
	// stored, by PlatformMsgID, are skipped.
	History []Comment
	// Comment is the message; its TaskID is the task's. When the task
	// already has a comment with its PlatformMsgID the message is a
	// duplicate.
	Comment Comment
	// Job, when not nil, is created queued for the task (its TaskID is the
	// task's) unless the task already has an active job.
	Job *Job
}

// Ingested is what Ingest did.
type Ingested struct {
	Duplicate   bool // seen before: only new keys were recorded
	Task        Task
	TaskCreated bool
	Comment     Comment
	// Active is the task's active job when it had one; then no job was
	// created. Zero otherwise.
	Active Job
	// Job is the job created; zero when none was.
	Job Job
}

// InboundStore keeps dedup keys of inbound events and stores inbound
// messages.
type InboundStore interface {
	// Ingest makes the writes of one inbound message in one transaction:
	// its dedup keys, its thread's task, its comment and, when the task has
	// no active job, in.Job (see Inbound). Nothing is written in part. The
	// caller enqueues the job created.
	Ingest(ctx context.Context, in Inbound) (Ingested, error)
	// SeenInbound records key and reports whether it was new.
	SeenInbound(ctx context.Context, key string, at time.Time) (first bool, err error)
	// InboundKnown reports whether any of keys was recorded (by Ingest or
	// SeenInbound). It records nothing.
	InboundKnown(ctx context.Context, keys []string) (bool, error)
	// PruneInbound deletes keys seen before t and returns how many.
	PruneInbound(ctx context.Context, before time.Time) (int64, error)
}
