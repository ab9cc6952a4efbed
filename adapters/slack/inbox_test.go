package slack

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/gorilla/websocket"
)

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

// stagedInbox is a store whose events reach the disk when the test says
// so: each StageInbox's durable returns what is sent on disk.
type stagedInbox struct {
	core.InboxStore
	disk chan error
}

func (s *stagedInbox) StageInbox(ctx context.Context, e core.InboxEvent) (core.InboxEvent, bool, func(context.Context) error, error) {
	e, first, err := s.AddInbox(ctx, e)
	return e, first, func(ctx context.Context) error {
		select {
		case err := <-s.disk:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}, err
}

// TestEventHandedOverBeforeItIsDurable: with a store that can stage an
// event (core.InboxStager), the event is handed over while it is not yet
// on disk, and acknowledged only once it is; when it cannot be made
// durable, Slack is answered with a failure and sends it again, and the
// redelivery is acknowledged once durable. (Whether the redelivery is
// handed over again depends on whether the first handling has removed
// the event from the inbox yet; the service drops a repeat by its keys.)
func TestEventHandedOverBeforeItIsDurable(t *testing.T) {
	inbox := &stagedInbox{InboxStore: newInbox(t), disk: make(chan error)}
	svc := &recorder{}
	_, base := startHTTP(t, svc, slackfake.NewServer(t), Config{Inbox: inbox})
	body := slackfake.MentionEvent("Ev1", "U1", "<@UBATON> hello", "1700000000.000100", "")
	send := func() chan int {
		res := make(chan int, 1)
		go func() {
			status, _ := do(t, slackfake.Sign(t, base, "/slack/events", body, time.Now(), "application/json"))
			res <- status
		}()
		return res
	}
	first := send()
	eventually(t, "the event handed over before it is on disk", func() bool { return svc.handed() == 1 })
	select {
	case status := <-first:
		t.Fatalf("answered %d before the event was on disk", status)
	default:
	}
	inbox.disk <- errors.New("EIO")
	if status := <-first; status == 200 {
		t.Fatal("acknowledged an event that could not be made durable")
	}
	again := send()
	inbox.disk <- nil
	if status := <-again; status != 200 {
		t.Fatalf("the redelivery, durable: answered %d, want 200", status)
	}
}
