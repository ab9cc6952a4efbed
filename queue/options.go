package queue

import (
	"log/slog"
	"time"

	"github.com/baton-bot/baton/core"
)

// Options configures a queue. The zero value is usable: every zero field
// takes the default named in its comment.
type Options struct {
	// Prefix starts every Redis key; default "baton". Redis only.
	Prefix string
	// Name is the queue's name, the hash tag of its Redis keys; default
	// "jobs". Redis only.
	Name string
	// Lease is how long a claim or a heartbeat holds a job; default 30s.
	Lease time.Duration
	// Backoff returns the delay before a job whose lease expired is ready
	// again, given its failures counted so far (1 for the first); default
	// DefaultBackoff. It must be safe for concurrent use.
	Backoff func(failures int) time.Duration
	// Logger receives the queue's logs; default: discarded.
	Logger *slog.Logger
	// Now is the clock of Memory's leases and retries; default time.Now.
	// Redis uses the Redis server's clock and ignores it.
	Now func() time.Time
}

// Defaults.
const (
	DefaultPrefix = "baton"
	DefaultName   = "jobs"
	DefaultLease  = 30 * time.Second
)

// finishedTTL is how long a finished job stays known to the queue.
const finishedTTL = 7 * 24 * time.Hour

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Backoff == nil {
		o.Backoff = DefaultBackoff
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// DefaultBackoff is core.RetryBackoff: a random delay in
// [0, min(10m, 15s·2^(failures-1))).
func DefaultBackoff(failures int) time.Duration { return core.RetryBackoff(failures) }
