package slack

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/chat/chattest"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/gorilla/websocket"
)

// TestEventNotStoredIsNotAcknowledged: while the store cannot write, a
// signed event is answered 500, not 200, so that Slack sends it again; the
// redelivery after the store recovered is stored once and answered, and a
// further one changes nothing.
func TestEventNotStoredIsNotAcknowledged(t *testing.T) {
	sys := chattest.Start(t, chattest.Options{})
	sys.LLM.Script(llmtest.Transition("COMPLETE", "Stored and answered."))
	inbox := slackfake.NewBrokenInbox(sys.Store)
	w := worldOver(t, sys, sys.Service, Config{Inbox: inbox})
	const root = "1700000000.000100"
	mention := slackfake.MentionEvent("Ev1", "U1", "<@UBATON> are you there?", root, "")

	status, body := do(t, slackfake.Sign(t, w.base, "/slack/events", mention, time.Now(), "application/json"))
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
	task, err := sys.Store.TaskByThread(context.Background(), thread(root))
	if err != nil {
		t.Fatal(err)
	}
	comments, err := sys.Store.RecentComments(context.Background(), task.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if n := countFunc(comments, func(c core.Comment) bool { return c.Text == "are you there?" }); n != 1 {
		t.Errorf("the message stored %d times, want once: %+v", n, comments)
	}
	if n := countFunc(w.posts("C1", root), func(p string) bool { return strings.Contains(p, "Stored and answered.") }); n != 1 {
		t.Errorf("answered %d times, want once", n)
	}
}

func countFunc[T any](s []T, f func(T) bool) int {
	n := 0
	for _, v := range s {
		if f(v) {
			n++
		}
	}
	return n
}

// failingOnce fails its first message as a service whose store write
// failed does, and hands the others to Service.
type failingOnce struct {
	Service
	failed atomic.Bool
}

func (f *failingOnce) HandleMessage(ctx context.Context, m chat.Message) (chat.Reply, error) {
	if f.failed.CompareAndSwap(false, true) {
		return chat.Reply{}, slackfake.ErrDiskFull
	}
	return f.Service.HandleMessage(ctx, m)
}

// TestFailedHandlingIsTriedAgain: an event acknowledged and then not
// handled (the service's store write failed) stays in the inbox and is
// handled on a later try.
func TestFailedHandlingIsTriedAgain(t *testing.T) {
	sys := chattest.Start(t, chattest.Options{})
	sys.LLM.Script(llmtest.Transition("COMPLETE", "Second time lucky."))
	svc := &failingOnce{Service: sys.Service}
	w := worldOver(t, sys, svc, Config{Inbox: sys.Store, SweepEvery: 20 * time.Millisecond, RetryAfter: 10 * time.Millisecond})
	const root = "1700000000.000100"
	w.send(slackfake.MentionEvent("Ev1", "U1", "<@UBATON> try again", root, ""), "")
	w.waitJob(root, core.JobSucceeded)
	w.waitPost("C1", root, "Second time lucky.")
	if !svc.failed.Load() {
		t.Fatal("the first handling did not fail")
	}
}

// TestSocketEventNotStoredIsNotAcknowledged: in Socket Mode, an envelope
// whose event the store could not take is not acknowledged; Slack's
// redelivery after the store recovered is, and is handed over.
func TestSocketEventNotStoredIsNotAcknowledged(t *testing.T) {
	const root = "1700000000.000100"
	payload := slackfake.MentionEvent("Ev1", "U1", "<@UBATON> hello", root, "")
	inbox := slackfake.NewBrokenInbox(newInbox(t))
	s := &socketFake{t: t}
	s.scripts = []func(*websocket.Conn){func(c *websocket.Conn) {
		_ = c.WriteJSON(map[string]any{"envelope_id": "env-1", "type": "events_api", "payload": json.RawMessage(payload), "retry_attempt": 0})
		select {
		case <-inbox.Refused():
		case <-time.After(10 * time.Second):
			t.Error("the adapter never tried to store the event")
		}
		inbox.SetDown(false)
		s.envelope(c, "env-2", 1, payload) // records every ack until env-2's
	}}
	f := slackfake.NewServer(t, s.bind)
	svc := &recorder{}
	a, err := New(svc, Config{Inbox: inbox, Mode: ModeSocket, BotToken: slackfake.BotToken, AppToken: "xapp-test", APIURL: f.URL(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	eventually(t, "the redelivery acknowledged", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return slices.Contains(s.acks, "env-2")
	})
	eventually(t, "the event handed over", func() bool { return svc.handed() >= 1 })
	s.mu.Lock()
	if slices.Contains(s.acks, "env-1") {
		t.Errorf("acks %q: env-1 acknowledged though its event was not stored", s.acks)
	}
	s.mu.Unlock()
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if len(svc.messages) != 1 || svc.messages[0].EventID != "Ev1" {
		t.Errorf("handed over %+v, want Ev1 once", svc.messages)
	}
}

// TestInboxLeftByAnEarlierProcess: an event an earlier process
// acknowledged and never handled (it died) is handled after the start.
func TestInboxLeftByAnEarlierProcess(t *testing.T) {
	inbox := newInbox(t)
	payload := slackfake.MentionEvent("Ev1", "U1", "<@UBATON> still there?", "1700000000.000100", "")
	past := time.Now().Add(-time.Hour)
	if _, _, err := inbox.AddInbox(context.Background(), core.InboxEvent{Platform: core.PlatformSlack, Key: "Ev1", Payload: []byte(payload), ReceivedAt: past, DueAt: past.Add(inboxLease)}); err != nil {
		t.Fatal(err)
	}
	svc := &recorder{}
	startHTTP(t, svc, slackfake.NewServer(t), Config{Inbox: inbox})
	eventually(t, "the earlier process's event handed over", func() bool { return svc.handed() == 1 })
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if m := svc.messages[0]; m.EventID != "Ev1" || m.Text != "still there?" {
		t.Errorf("handed over %+v", m)
	}
}
