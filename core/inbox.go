package core

import (
	"context"
	"time"
)

// InboxEvent is an event a platform delivered, kept from before it was
// acknowledged until it is handled: a platform that was told "received"
// never sends it again, so what was acknowledged must survive a failed
// handling and a crash.
type InboxEvent struct {
	ID       int64
	Platform Platform
	// Key is the platform's id of the event (Slack's event_id); a second
	// delivery under a key still in the inbox is not added again.
	Key string
	// Payload is the event as the platform sent it, for the adapter that
	// added it to read again.
	Payload    []byte
	ReceivedAt time.Time
	// Tries counts the handlings begun: the adder's, then one a claim.
	Tries int
	// DueAt is when the event may be claimed: until then the handler
	// that holds it (the adding one, or the last claim) owns it.
	DueAt     time.Time
	LastError string
}

// InboxStore keeps the events adapters acknowledged and have not handled
// yet (see InboxEvent).
//
// An adapter adds an event before it acknowledges it and answers the
// platform with a failure when the add fails (Slack delivers it again);
// it then hands the event over and removes it once handled. Events whose
// handling failed, or whose handler died, are claimed again once due.
type InboxStore interface {
	// AddInbox stores e (its ID, Tries and LastError are the store's),
	// owned by the caller, whose handling is its first try, until e.DueAt. first is false, and nothing is
	// written, when an event of e's platform under e.Key is in the inbox
	// already; the event returned is then that one.
	AddInbox(ctx context.Context, e InboxEvent) (stored InboxEvent, first bool, err error)
	// ClaimInbox takes up to limit events of platform due at now, oldest
	// first: each is owned by the caller until now+lease and its Tries
	// counts one more.
	ClaimInbox(ctx context.Context, platform Platform, now time.Time, lease time.Duration, limit int) ([]InboxEvent, error)
	// InboxRetry records a failed handling of event id: it is due again at
	// next.
	InboxRetry(ctx context.Context, id int64, next time.Time, lastErr string) error
	// InboxDone removes event id: handled, or given up on.
	InboxDone(ctx context.Context, id int64) error
}

// InboxStager is an InboxStore whose commits reach the disk after they
// return (SQLite's), which can hand an event over before it is durable:
// the adapter then works on the event while the disk catches up, and
// acknowledges it only once it is durable.
type InboxStager interface {
	// StageInbox adds e as AddInbox does, but returns once e is stored and
	// visible, before it would survive a power loss, with durable, which
	// returns nil once it would (or the sync's error, or ctx's). e may be
	// handed over at once and acknowledged only after durable returned
	// nil. durable is called at most once.
	StageInbox(ctx context.Context, e InboxEvent) (stored InboxEvent, first bool, durable func(context.Context) error, err error)
}
