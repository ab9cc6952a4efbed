package e2e_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack"
	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/llmtest"
)

// TestSlackEventNotStoredIsNotAcknowledged: while the store cannot write, a
// signed event is answered 500, not 200, so that Slack sends it again; the
// redelivery after the store recovered is stored once and answered, and a
// further one changes nothing.
func TestSlackEventNotStoredIsNotAcknowledged(t *testing.T) {
	sys := startStack(t, stackOptions{})
	sys.LLM.Script(llmtest.Transition("COMPLETE", "Stored and answered."))
	inbox := slackfake.NewBrokenInbox(sys.Store)
	w := slackWorldOver(t, sys, sys.Service, slack.Config{Inbox: inbox})
	const root = "1700000000.000100"
	mention := slackfake.MentionEvent("Ev1", "U1", "<@UBATON> are you there?", root, "")

	status, body := slackDo(t, slackfake.Sign(t, w.base, "/slack/events", mention, time.Now(), "application/json"))
	if status < 500 {
		t.Fatalf("an event the store could not take answered %d %q; want a 5xx so that Slack sends it again", status, body)
	}
	inbox.SetDown(false)
	w.send(mention, "1")
	w.waitJob(root, core.JobSucceeded)
	w.waitPost("C1", root, "Stored and answered.")
	eventually(t, "the event to leave the inbox", func() bool { return inbox.Removed() == 1 })
	w.send(mention, "2")
	eventually(t, "the second redelivery to be handled", func() bool { return inbox.Removed() == 2 })

	if jobs := w.jobs(root); len(jobs) != 1 {
		t.Errorf("%d jobs, want one", len(jobs))
	}
	task, err := sys.Store.TaskByThread(context.Background(), slackThread(root))
	if err != nil {
		t.Fatal(err)
	}
	comments, err := sys.Store.RecentComments(context.Background(), task.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if n := slackCount(comments, func(c core.Comment) bool { return c.Text == "are you there?" }); n != 1 {
		t.Errorf("the message stored %d times, want once: %+v", n, comments)
	}
	if n := slackCount(w.posts("C1", root), func(p string) bool { return strings.Contains(p, "Stored and answered.") }); n != 1 {
		t.Errorf("answered %d times, want once", n)
	}
}

// slackCount counts the elements of s for which f holds.
func slackCount[T any](s []T, f func(T) bool) int {
	n := 0
	for _, v := range s {
		if f(v) {
			n++
		}
	}
	return n
}

// slackFailingOnce fails its first message as a service whose store write
// failed does, and hands the others to Service.
type slackFailingOnce struct {
	slack.Service
	failed atomic.Bool
}

func (f *slackFailingOnce) HandleMessage(ctx context.Context, m chat.Message) (chat.Reply, error) {
	if f.failed.CompareAndSwap(false, true) {
		return chat.Reply{}, slackfake.ErrDiskFull
	}
	return f.Service.HandleMessage(ctx, m)
}

// TestSlackFailedHandlingIsTriedAgain: an event acknowledged and then not
// handled (the service's store write failed) stays in the inbox and is
// handled on a later try.
func TestSlackFailedHandlingIsTriedAgain(t *testing.T) {
	sys := startStack(t, stackOptions{})
	sys.LLM.Script(llmtest.Transition("COMPLETE", "Second time lucky."))
	svc := &slackFailingOnce{Service: sys.Service}
	w := slackWorldOver(t, sys, svc, slack.Config{Inbox: sys.Store, SweepEvery: 20 * time.Millisecond, RetryAfter: 10 * time.Millisecond})
	const root = "1700000000.000100"
	w.send(slackfake.MentionEvent("Ev1", "U1", "<@UBATON> try again", root, ""), "")
	w.waitJob(root, core.JobSucceeded)
	w.waitPost("C1", root, "Second time lucky.")
	if !svc.failed.Load() {
		t.Fatal("the first handling did not fail")
	}
}
