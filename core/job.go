package core

import "time"

// JobState is the state of a job. SPEC §3 lists the allowed changes; every
// other change is refused with a *TransitionError.
type JobState string

// Job states.
const (
	JobQueued          JobState = "queued"
	JobRunning         JobState = "running"
	JobWaitingHuman    JobState = "waiting_human"
	JobWaitingSubtasks JobState = "waiting_subtasks"
	JobWaitingApproval JobState = "waiting_approval"
	JobSucceeded       JobState = "succeeded"
	JobFailed          JobState = "failed"
	JobAborted         JobState = "aborted"
)

// JobStates lists every state, active ones first.
var JobStates = []JobState{JobQueued, JobRunning, JobWaitingHuman, JobWaitingSubtasks, JobWaitingApproval, JobSucceeded, JobFailed, JobAborted}

// Terminal reports whether no further change is possible from s.
func (s JobState) Terminal() bool {
	return s == JobSucceeded || s == JobFailed || s == JobAborted
}

// Active reports whether a job in state s counts as the task's active job.
func (s JobState) Active() bool {
	return s == JobQueued || s == JobRunning || s.Waiting()
}

// Waiting reports whether a job in state s is parked: it waits for a
// person's answer, its subtasks or an approval, and resumes once.
func (s JobState) Waiting() bool {
	return s == JobWaitingHuman || s == JobWaitingSubtasks || s == JobWaitingApproval
}

// Valid reports whether s is one of the known states.
func (s JobState) Valid() bool {
	for _, v := range JobStates {
		if s == v {
			return true
		}
	}
	return false
}

var transitions = map[JobState][]JobState{
	JobQueued:          {JobRunning, JobAborted},
	JobRunning:         {JobSucceeded, JobWaitingHuman, JobWaitingSubtasks, JobWaitingApproval, JobFailed, JobAborted, JobQueued},
	JobWaitingHuman:    {JobQueued, JobAborted},
	JobWaitingSubtasks: {JobQueued, JobAborted},
	JobWaitingApproval: {JobQueued, JobAborted},
}

// CanTransition reports whether the transition table allows from -> to.
func CanTransition(from, to JobState) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// CheckTransition returns a *TransitionError when from -> to is not allowed.
func CheckTransition(jobID int64, from, to JobState) error {
	if CanTransition(from, to) {
		return nil
	}
	return &TransitionError{JobID: jobID, From: from, To: to}
}

// Job is one run of a piece for a task.
//
// Attempt is the fencing token: it grows on every claim, and writes made on
// behalf of a running attempt carry it so that a stale attempt changes
// nothing. Failures counts lease expiries and failed runs; only it is
// compared with the retry limit.
type Job struct {
	ID               int64
	TaskID           int64
	ParentJobID      int64 // 0: not a subtask's job
	RetryOf          int64 // 0: not a retry
	Piece            string
	Instruction      string
	TriggerMsgID     string // platform id of the message that started it; "" for none
	State            JobState
	Movement         string // current movement; "" before the first
	ResumeMovement   string // where an ASK, WAIT_SUBTASKS or approval resumes
	MovementCount    int    // movements run so far in this job
	Iteration        int    // LLM call number in the current movement
	Attempt          int64
	Failures         int
	Question         string
	WaitSeq          int64  // grows on every park; a reply resumes one wait once
	Lessons          string // JSON of what the engine carries between movements (lessons, feedback)
	ResultSummary    string
	Error            string
	AbortRequestedAt time.Time // zero: no abort requested
	AbortedBy        string
	PromptTokens     int64
	CompletionTokens int64
	CreatedAt        time.Time
	// QueuedAt is when the job last became queued in the store: created,
	// resumed or requeued. Zero when unknown: a job taken over from a
	// worker that lost its lease (the queue requeued it, not the store).
	QueuedAt   time.Time
	StartedAt  time.Time // zero: never started
	FinishedAt time.Time // zero: not terminal

	// WaitKind, while the job waits for a person, says for what: "" for
	// the piece's question (ASK), WaitBudget or WaitGuard for the engine's,
	// which only `continue` (or an abort) answers.
	WaitKind string
}

// JobEvent is one entry of a job's history.
type JobEvent struct {
	ID       int64
	JobID    int64
	At       time.Time
	Kind     string
	Movement string
	Detail   string
	// Attempt, when not 0, fences AddEvent on a running attempt: the event
	// of an attempt that lost its lease, or of a run that has ended, is
	// refused with ErrStale and not recorded, so that nothing follows a
	// job's last event. It is not stored.
	Attempt int64
}

// Job event kinds written by the worker and the store.
const (
	EventCreated   = "created"
	EventClaimed   = "claimed"
	EventLeaseLost = "lease_lost"
	EventRequeued  = "requeued"
	EventParked    = "parked"
	EventResumed   = "resumed"
	EventFinished  = "finished"
	EventAbortAsk  = "abort_requested"
	EventError     = "error"
	EventProgress  = "progress"
	// EventApprovalAsked and EventApprovalDecided record an approval's
	// request (the call, the rule) and its decision (who, the verdict).
	EventApprovalAsked   = "approval_asked"
	EventApprovalDecided = "approval_decided"
	// EventMovementState records, as its Detail, the carried state (the
	// engine's, opaque to others, the JSON of Job.Lessons) a movement
	// started with: what a re-run from that movement starts from.
	EventMovementState = "movement_state"
	// EventRerun, on a re-run job, names the job and movement it re-runs
	// from ("job 12 from review, model m; note").
	EventRerun = "rerun"
)
