package core

import (
	"context"
	"time"
)

// LeaseStore keeps named leases: a name held by at most one owner at a
// time, until its time to live runs out, so that of the processes sharing
// a store exactly one does what only one may (holding Discord's gateway
// connection: two would each receive every message).
//
// The store's clock decides when a lease runs out, never the caller's:
// on PostgreSQL the server's clock, one for every host, so that hosts
// whose clocks disagree still agree on who holds a lease; on SQLite the
// clock of the one host that shares the file. A caller that read its own
// monotonic clock just before an acquire that succeeded may count on the
// lease until that reading plus ttl: the store set the end at its own now,
// which is later, plus ttl. An owner is a name unique to one process
// (host, pid and something random); one process may hold several names.
type LeaseStore interface {
	// AcquireLease takes the lease name for owner until the store's now
	// plus ttl, when no one holds it, its holder's time ran out, or owner
	// holds it already (a renewal, which moves the end). held is false,
	// and nothing changes, while another owner holds it. Of several
	// owners acquiring a free lease at once, exactly one gets it. ttl is
	// counted in whole milliseconds and must be at least one.
	AcquireLease(ctx context.Context, name, owner string, ttl time.Duration) (held bool, err error)
	// ReleaseLease ends owner's hold of name at once, so that another
	// owner may take it without waiting for the time to run out. It is a
	// no-op when owner does not hold name (it never frees another's).
	ReleaseLease(ctx context.Context, name, owner string) error
}
