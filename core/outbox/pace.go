package outbox

import (
	"context"
	"sync"
	"time"

	"github.com/baton-bot/baton/core"
)

// pacer spaces the posts in each channel: at most one per Every, and none
// before a rate limit the platform named has passed. Callers wait for
// their turn rather than fail.
type pacer struct {
	mu sync.Mutex
	// next holds, per channel, the earliest time of its next post; guarded
	// by mu.
	next map[string]time.Time
}

// pruneAt is how many channels the pacer remembers before it forgets the
// ones whose next post is already allowed.
const pruneAt = 1024

func channelKey(t core.ThreadRef) string {
	return t.Team + "\x00" + t.Channel
}

// reserve books the next post in thread's channel and returns when it may
// be made.
func (p *pacer) reserve(thread core.ThreadRef, now time.Time, every time.Duration) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := channelKey(thread)
	at := now
	if n, ok := p.next[k]; ok && n.After(at) {
		at = n
	}
	if len(p.next) >= pruneAt {
		for c, n := range p.next {
			if !n.After(now) {
				delete(p.next, c)
			}
		}
	}
	p.next[k] = at.Add(every)
	return at
}

// hold keeps posts out of thread's channel until until.
func (p *pacer) hold(thread core.ThreadRef, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := channelKey(thread)
	if until.After(p.next[k]) {
		p.next[k] = until
	}
}

// wait books the next post in thread's channel and sleeps until its turn,
// or until ctx ends.
func (p *pacer) wait(ctx context.Context, thread core.ThreadRef, clock func() time.Time, every time.Duration) error {
	now := clock()
	d := p.reserve(thread, now, every).Sub(now)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
