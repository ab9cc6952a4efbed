package outbox

import (
	"context"
	"sync"
	"time"

	"github.com/baton-bot/baton/core"
)

// pacer spaces the posts in each channel: one at a time, the next at least
// Every after the previous one returned, and none before a rate limit the
// platform named has passed. Callers wait for their turn rather than fail.
type pacer struct {
	mu sync.Mutex
	// lanes holds the channels posted in; guarded by mu.
	lanes map[string]*lane
}

// lane is one channel's turn.
type lane struct {
	turn  chan struct{} // holds a token while a post in the channel is under way
	next  time.Time     // earliest start of the next post; guarded by pacer.mu
	users int           // callers holding or waiting for the turn; guarded by pacer.mu
}

// pruneAt is how many channels the pacer remembers before it forgets the
// idle ones.
const pruneAt = 1024

func channelKey(t core.ThreadRef) string {
	return t.Team + "\x00" + t.Channel
}

// lane returns thread's channel lane, counting the caller as a user until
// it calls leave.
func (p *pacer) lane(thread core.ThreadRef, now time.Time) *lane {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lanes == nil {
		p.lanes = map[string]*lane{}
	}
	k := channelKey(thread)
	l, ok := p.lanes[k]
	if !ok {
		if len(p.lanes) >= pruneAt {
			for c, old := range p.lanes {
				if old.users == 0 && !old.next.After(now) {
					delete(p.lanes, c)
				}
			}
		}
		l = &lane{turn: make(chan struct{}, 1)}
		p.lanes[k] = l
	}
	l.users++
	return l
}

func (p *pacer) leave(l *lane) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l.users--
}

// hold keeps posts out of thread's channel until until.
func (p *pacer) hold(thread core.ThreadRef, until time.Time) {
	l := p.lane(thread, until)
	defer p.leave(l)
	p.mu.Lock()
	defer p.mu.Unlock()
	if until.After(l.next) {
		l.next = until
	}
}

// do runs fn, a post in thread's channel, when the channel's turn comes:
// after the previous post there returned, at least every later, and after
// any hold. It returns fn's error, or ctx's when ctx ends first.
func (p *pacer) do(ctx context.Context, thread core.ThreadRef, clock func() time.Time, every time.Duration, fn func() error) error {
	l := p.lane(thread, clock())
	defer p.leave(l)
	select {
	case l.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l.turn }()

	p.mu.Lock()
	next := l.next
	p.mu.Unlock()
	if d := next.Sub(clock()); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := fn()
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := clock().Add(every); t.After(l.next) {
		l.next = t
	}
	return err
}
