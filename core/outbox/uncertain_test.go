package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/outbox"
	"github.com/google/go-cmp/cmp"
)

// lostSettle is a store whose deliverer dies between posting and
// recording it: its records of a delivery's outcome never arrive, so the
// message stays claimed until its lease ends.
type lostSettle struct{ outbox.Store }

var errDied = errors.New("the process died")

func (lostSettle) OutboxSent(context.Context, int64, string) error { return errDied }
func (lostSettle) OutboxRetry(context.Context, int64, time.Time, string) error {
	return errDied
}
func (lostSettle) OutboxFail(context.Context, int64, string) error { return errDied }

// TestUncertainDeliveryLooksFirst: a deliverer posts a message and dies
// before recording it; once its lease has ended another deliverer takes
// the message over and, finding the posts by their keys, posts none of
// them again, or only the parts the first did not post.
func TestUncertainDeliveryLooksFirst(t *testing.T) {
	const lease = time.Minute
	para := func(c byte) string { return strings.Repeat(string(c), 80) }
	long := para('a') + "\n\n" + para('b') + "\n\n" + para('c')
	for _, tt := range []struct {
		name string
		add  func(h *harness, task core.Task) int64
		// failPart makes the first deliverer's post of this text fail.
		failPart string
		want     []string // the posts made, by either deliverer
		finds    int64    // lookups the second deliverer makes
	}{
		{"post", func(h *harness, task core.Task) int64 { return h.post(t, task, "hello") },
			"", []string{"post:hello"}, 1},
		{"split post", func(h *harness, task core.Task) int64 { return h.post(t, task, long) },
			"", []string{"post:" + para('a'), "post:" + para('b'), "post:" + para('c')}, 3},
		{"split post in part", func(h *harness, task core.Task) int64 { return h.post(t, task, long) },
			para('c'), []string{"post:" + para('a'), "post:" + para('b'), "post:" + para('c')}, 3},
		{"status message", func(h *harness, task core.Task) int64 {
			return h.add(t, task, h.job(t, task).ID, core.OutboxUpdate, chat.Payload{Text: "working"})
		}, "", []string{"post:working"}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, chat.Limits{Post: 100, MaxParts: 4}, outbox.Config{}, nil)
			kp := &keyedPoster{poster: h.poster}
			failed := false
			h.poster.fail = func(c call) error {
				if c.Text == tt.failPart && !failed {
					failed = true
					return errors.New("timeout")
				}
				return nil
			}
			first := outbox.New(lostSettle{h.store}, core.PlatformSlack, kp, outbox.Config{Owner: "first", Now: h.clock.Now, Lease: lease})
			second := outbox.New(h.store, core.PlatformSlack, kp, outbox.Config{Owner: "second", Now: h.clock.Now, Lease: lease})
			task := h.task(t, "C1")
			id := tt.add(h, task)

			if n, err := first.Flush(t.Context()); n != 1 || err != nil {
				t.Fatalf("first deliverer: %d deliveries, %v", n, err)
			}
			if n, _ := second.Flush(t.Context()); n != 0 {
				t.Fatalf("the second deliverer took a message under the first's claim")
			}
			h.clock.Advance(lease)
			if n, err := second.Flush(t.Context()); n != 1 || err != nil {
				t.Fatalf("second deliverer after the lease: %d deliveries, %v", n, err)
			}

			if diff := cmp.Diff(tt.want, texts(h.poster.Calls(true))); diff != "" {
				t.Errorf("posts (-want +got):\n%s", diff)
			}
			m := h.msg(t, id)
			if m.State != core.OutboxSent || m.Claims != 2 || m.PlatformMsgID != h.poster.Calls(true)[0].ID {
				t.Errorf("message after the takeover: %s, %d claims, platform id %q; want sent, 2 claims, the first post's id %q",
					m.State, m.Claims, m.PlatformMsgID, h.poster.Calls(true)[0].ID)
			}
			if got := kp.finds.Load(); got != tt.finds {
				t.Errorf("%d lookups, want %d", got, tt.finds)
			}
		})
	}
}

// TestCertainDeliveryDoesNotLook: a message claimed once is posted
// without a lookup, and each post carries its own key.
func TestCertainDeliveryDoesNotLook(t *testing.T) {
	h := newHarness(t, chat.Limits{Post: 100, MaxParts: 4}, outbox.Config{}, nil)
	kp := &keyedPoster{poster: h.poster}
	h.d = outbox.New(h.store, core.PlatformSlack, kp, outbox.Config{Now: h.clock.Now})
	task := h.task(t, "C1")
	h.post(t, task, strings.Repeat("a", 80)+"\n\n"+strings.Repeat("b", 80))
	h.add(t, task, 0, core.OutboxPost, chat.Payload{Text: "pick one", Buttons: []chat.Button{{Action: "x", Label: "X"}}})
	h.rounds(t, 2, time.Second)
	calls := h.poster.Calls(true)
	if len(calls) != 3 || kp.finds.Load() != 0 {
		t.Fatalf("%d posts and %d lookups; want 3 posts and none", len(calls), kp.finds.Load())
	}
	keys := map[string]bool{}
	for _, c := range calls {
		if c.Key == "" || keys[c.Key] {
			t.Errorf("post %q has key %q: want one of its own", c.Text, c.Key)
		}
		keys[c.Key] = true
	}
	if calls[2].Buttons != 1 {
		t.Errorf("the keyed post went with %d buttons, want 1", calls[2].Buttons)
	}
}

// TestLeaseBoundsASend: a send that outlives three quarters of the lease
// is cut short and recorded as a failed try, so that the message is never
// posted after its claim may have passed to another deliverer.
func TestLeaseBoundsASend(t *testing.T) {
	h := newHarness(t, slackLimits, outbox.Config{}, nil)
	wp := waitingPoster{h.poster}
	h.d = outbox.New(h.store, core.PlatformSlack, wp, outbox.Config{Now: h.clock.Now, Lease: 200 * time.Millisecond,
		Backoff: func(int) time.Duration { return time.Second }})
	id := h.post(t, h.task(t, "C1"), "slow")
	h.flush(t)
	state, tries := h.state(t, id)
	if m := h.msg(t, id); state != core.OutboxPending || tries != 1 || !strings.Contains(m.LastError, "lease") {
		t.Errorf("after a send past its lease: %s, %d tries, last error %q; want pending, 1 try, an error naming the lease", state, tries, m.LastError)
	}
}

// waitingPoster posts only once ctx ends (a platform that never answers).
type waitingPoster struct{ *poster }

func (p waitingPoster) Post(ctx context.Context, thread core.ThreadRef, text string) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// TestShutdownHandsBack: a delivery cut short by shutdown hands its
// message back at once, its try not counted and its claim counted: the
// next deliverer takes it without waiting for the lease, and looks before
// posting it.
func TestShutdownHandsBack(t *testing.T) {
	h := newHarness(t, slackLimits, outbox.Config{}, nil)
	started := make(chan struct{}, 1)
	first := outbox.New(h.store, core.PlatformSlack, startedPoster{waitingPoster{h.poster}, started},
		outbox.Config{Owner: "first", Now: h.clock.Now, Poll: time.Hour})
	id := h.post(t, h.task(t, "C1"), "hello")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	<-started
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if m := h.msg(t, id); m.State != core.OutboxPending || m.Tries != 0 || m.Claims != 1 {
		t.Fatalf("after the shutdown: %s, %d tries, %d claims; want pending, no try, 1 claim", m.State, m.Tries, m.Claims)
	}
	kp := &keyedPoster{poster: h.poster}
	second := outbox.New(h.store, core.PlatformSlack, kp, outbox.Config{Owner: "second", Now: h.clock.Now})
	if n, err := second.Flush(t.Context()); n != 1 || err != nil {
		t.Fatalf("the next deliverer, before the lease ended: %d deliveries, %v", n, err)
	}
	if m := h.msg(t, id); m.State != core.OutboxSent || m.Claims != 2 || kp.finds.Load() != 1 {
		t.Errorf("after the next delivery: %s, %d claims, %d lookups; want sent, 2 claims, 1 lookup", m.State, m.Claims, kp.finds.Load())
	}
}

// startedPoster tells when a post has started.
type startedPoster struct {
	waitingPoster
	started chan<- struct{}
}

func (p startedPoster) Post(ctx context.Context, thread core.ThreadRef, text string) (string, error) {
	select {
	case p.started <- struct{}{}:
	default:
	}
	return p.waitingPoster.Post(ctx, thread, text)
}
