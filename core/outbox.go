package core

import "time"

// OutboxKind is what an outbox message asks a platform to do.
type OutboxKind string

// Outbox kinds.
const (
	OutboxPost    OutboxKind = "post"
	OutboxUpdate  OutboxKind = "update"
	OutboxReact   OutboxKind = "react"
	OutboxUnreact OutboxKind = "unreact"
	OutboxUpload  OutboxKind = "upload"
)

// OutboxState is the delivery state of an outbox message.
type OutboxState string

// Outbox states.
const (
	OutboxPending OutboxState = "pending"
	OutboxSent    OutboxState = "sent"
	OutboxFailed  OutboxState = "failed"
)

// OutboxMessage is one message to a platform. Every message Baton sends to
// a thread goes through the outbox, so that it is written in the same
// transaction as the state change that caused it and delivered at least
// once, in Seq order per task.
type OutboxMessage struct {
	ID            int64
	TaskID        int64
	JobID         int64 // 0: not tied to a job
	Attempt       int64 // the job attempt that wrote it; 0 when not fenced
	Seq           int64 // order within the task; assigned by the store
	Kind          OutboxKind
	Payload       string // JSON, owned by the deliverer of the task's platform
	State         OutboxState
	Tries         int
	NextTryAt     time.Time
	LastError     string
	PlatformMsgID string // set once delivered
	CreatedAt     time.Time
	// Ref, on an update, names the message it edits: the first update
	// delivered under Ref is posted, later ones edit it. "" is the job's
	// status message.
	Ref string
	// Claims counts the deliveries of the message begun
	// (OutboxStore.ClaimOutbox), the one under way included; a claim
	// handed back untried is not counted. More than one means an earlier
	// delivery may have reached the platform: it failed (see Tries), or it
	// ended without being settled at all (its process died or lost its
	// lease) when Claims > Tries+1. Set by the store.
	Claims int
}

// OutboxStats are a platform's outbox figures.
type OutboxStats struct {
	Pending       int64
	Failed        int64
	OldestPending time.Time // zero when nothing is pending
}
