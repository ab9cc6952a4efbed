package core

import "time"

// ProgressKind is what a progress event says a running job did.
type ProgressKind string

// Progress event kinds.
const (
	ProgressMovementStarted ProgressKind = "movement_started"
	ProgressMovementEnded   ProgressKind = "movement_ended"
	ProgressToolStarted     ProgressKind = "tool_started"
	ProgressToolFinished    ProgressKind = "tool_finished"
	ProgressApproval        ProgressKind = "approval_waiting"
	ProgressCompaction      ProgressKind = "compaction"
	ProgressText            ProgressKind = "text"
)

// ProgressEvent is one thing a running job did, for a live view of it
// (a chat thread's progress message, the task API's event stream). The
// engine tells them as they happen; nothing waits for their delivery.
type ProgressEvent struct {
	JobID  int64        `json:"job_id"`
	TaskID int64        `json:"task_id"`
	Kind   ProgressKind `json:"kind"`
	// Movement is the movement the event belongs to; Position is its
	// place in the piece's plan (from 1) and Plan the plan's movements,
	// in the piece's order.
	Movement string   `json:"movement,omitempty"`
	Position int      `json:"position,omitempty"`
	Plan     []string `json:"plan,omitempty"`
	// CallID names a tool call, the same in its start and its finish;
	// Title is the call in one line ("Read core/job.go", "Bash: go test
	// ./..."); Failed says a finished call returned an error.
	CallID string `json:"call_id,omitempty"`
	Title  string `json:"title,omitempty"`
	Failed bool   `json:"failed,omitempty"`
	// Text is the answer text the model wrote since the last text event.
	Text string    `json:"text,omitempty"`
	At   time.Time `json:"at"`
}
