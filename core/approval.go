package core

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// ErrDecided reports a decision on an approval that is no longer pending:
// decided already (by someone else, by a second click) or its job no longer
// waits for it (aborted). Nothing was changed.
var ErrDecided = errors.New("approval already decided")

// ApprovalState is where an approval stands.
type ApprovalState string

// Approval states.
const (
	ApprovalPending  ApprovalState = "pending"
	ApprovalApproved ApprovalState = "approved"
	ApprovalDenied   ApprovalState = "denied"
)

// Verdict is a person's answer to an approval.
type Verdict string

// Verdicts. VerdictAlways approves and stores an AllowRule for the same
// tool and subject in the channel.
const (
	VerdictApprove Verdict = "approve"
	VerdictDeny    Verdict = "deny"
	VerdictAlways  Verdict = "always"
)

// ParseVerdict returns the verdict named s.
func ParseVerdict(s string) (Verdict, bool) {
	switch v := Verdict(strings.ToLower(strings.TrimSpace(s))); v {
	case VerdictApprove, VerdictDeny, VerdictAlways:
		return v, true
	}
	return "", false
}

// DecidedByTimeout is Approval.DecidedBy for an approval nobody decided in
// time: it is denied.
const DecidedByTimeout = "timeout"

// Approval is a tool call that waits for a person's decision. Its job is
// parked in waiting_approval under WaitSeq; exactly one decision resumes
// it, at that call.
type Approval struct {
	ID      int64
	JobID   int64
	TaskID  int64
	WaitSeq int64 // the job's wait this approval belongs to
	// Tool, Arguments and CallID are the pending call as the model made it.
	Tool      string
	Arguments string
	CallID    string
	// Subject is what the policy matched: the command (Bash), the path
	// (Read, Write, Edit) or the JSON arguments.
	Subject string
	// Preview is what people are shown before they decide: the command or
	// the path and a diff preview, capped.
	Preview   string
	Channel   string // platform-qualified channel of the task
	Requester string // platform-qualified id of the task's requester
	Rule      string // the rule that asked, as people read it
	State     ApprovalState
	DecidedBy string // platform-qualified id, or DecidedByTimeout
	Reason    string
	CreatedAt time.Time
	Deadline  time.Time // pending after it: denied by timeout
	DecidedAt time.Time // zero while pending
}

// Approved reports whether the call may run.
func (a Approval) Approved() bool { return a.State == ApprovalApproved }

// Key identifies an approval in buttons and refs: its job and wait.
func (a Approval) Key() string { return ApprovalKey(a.JobID, a.WaitSeq) }

// ApprovalKey is the key of the approval of job jobID's wait waitSeq.
func ApprovalKey(jobID, waitSeq int64) string {
	return strconv.FormatInt(jobID, 10) + "." + strconv.FormatInt(waitSeq, 10)
}

// ParseApprovalKey reverses ApprovalKey.
func ParseApprovalKey(s string) (jobID, waitSeq int64, ok bool) {
	a, b, found := strings.Cut(s, ".")
	if !found {
		return 0, 0, false
	}
	j, err1 := strconv.ParseInt(a, 10, 64)
	w, err2 := strconv.ParseInt(b, 10, 64)
	return j, w, err1 == nil && err2 == nil && j > 0 && w > 0
}

// ApprovalDecision is one answer to a pending approval, by a person or by
// the timeout.
type ApprovalDecision struct {
	JobID   int64
	WaitSeq int64
	Verdict Verdict
	By      string // platform-qualified id, or DecidedByTimeout
	Reason  string
	At      time.Time
	// Rule, with VerdictAlways, is stored in the same transaction.
	Rule *AllowRule
	// Outbox messages (the approval message edited, a note) are written in
	// the same transaction.
	Outbox []OutboxMessage
}

// AllowRule is an "always allow" rule a person stored from an approval:
// in Channel, calls of Tool whose subject matches Pattern (a regular
// expression) run without asking, unless a configured rule denies them.
type AllowRule struct {
	ID        int64
	Channel   string
	Tool      string
	Pattern   string
	CreatedBy string
	CreatedAt time.Time
}

// ApprovalStore keeps approvals and the stored "always allow" rules.
// Approvals are created with their job's park (Finish.Approval).
type ApprovalStore interface {
	// Approval returns the approval of job jobID's wait waitSeq, or
	// ErrNotFound.
	Approval(ctx context.Context, jobID, waitSeq int64) (Approval, error)
	// ApprovalByID returns the approval with id, or ErrNotFound.
	ApprovalByID(ctx context.Context, id int64) (Approval, error)
	// PendingApprovals returns the pending approvals of task taskID (every
	// task when 0), oldest first.
	PendingApprovals(ctx context.Context, taskID int64) ([]Approval, error)
	// ExpiredApprovals returns up to limit pending approvals whose
	// Deadline is before now, oldest first.
	ExpiredApprovals(ctx context.Context, now time.Time, limit int) ([]Approval, error)
	// DecideApproval records d in one transaction: the approval becomes
	// approved (approve, always) or denied, its job goes from
	// waiting_approval to queued (WaitSeq kept, for the queue's Resume),
	// d.Rule and d.Outbox are written and the decision is a job event. It
	// fails with an error wrapping ErrDecided, changing nothing, when the
	// approval is not pending or its job no longer waits under d.WaitSeq;
	// with ErrNotFound when there is no such approval.
	DecideApproval(ctx context.Context, d ApprovalDecision) (Approval, Job, error)
	// AllowRules returns the stored rules of channel, oldest first.
	AllowRules(ctx context.Context, channel string) ([]AllowRule, error)
	// RevokeAllowRule deletes rule id of channel; ErrNotFound when channel
	// has no such rule.
	RevokeAllowRule(ctx context.Context, channel string, id int64) error
	// TakeCheckpoint returns what job jobID's parked movement left to
	// resume from (Finish.Checkpoint) and deletes it, fenced on the running
	// attempt, so that a resumed call runs at most once: a later attempt
	// finds none and starts the movement afresh. "" when there is none.
	TakeCheckpoint(ctx context.Context, jobID, attempt int64) (string, error)
}
