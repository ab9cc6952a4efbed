package slack

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core/chat"
)

// TestShutdownDrainIsBounded: events still unhandled DrainTimeout after
// shutdown began are given up, and Run returns.
func TestShutdownDrainIsBounded(t *testing.T) {
	stuck := &stuckService{started: make(chan struct{}, 8), gaveUp: make(chan struct{}, 8)}
	srv, cancel, done := runOneWorker(t, stuck, 50*time.Millisecond)
	for i := range 3 {
		body := slackfake.MentionEvent(fmt.Sprint("Ev", i), "U1", "<@UBATON> hi", fmt.Sprintf("1700000000.00010%d", i), "")
		if s, b := do(t, slackfake.Sign(t, srv.URL, "/slack/events", body, time.Now(), "application/json")); s != 200 {
			t.Fatalf("event %d answered %d: %s", i, s, b)
		}
	}
	<-stuck.started
	cancel()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return: the drain is not bounded")
	}
	select {
	case <-stuck.gaveUp:
	default:
		t.Error("the event being handled was not told to give up")
	}
	if n := len(stuck.started); n != 0 {
		t.Errorf("%d more events started after the drain time was up", n)
	}
}

// runOneWorker runs an HTTP-mode adapter with one event worker over svc and
// returns its server, the cancel that starts its shutdown and Run's result.
func runOneWorker(t *testing.T, svc Service, drain time.Duration) (*httptest.Server, context.CancelFunc, <-chan error) {
	t.Helper()
	f := slackfake.NewServer(t)
	a, err := New(svc, Config{Inbox: newInbox(t), Mode: ModeHTTP, BotToken: slackfake.BotToken, SigningSecret: slackfake.SigningSecret, APIURL: f.URL(), Workers: 1, DrainTimeout: drain, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv, cancel, done
}

// stuckService never finishes a message before its context ends.
type stuckService struct {
	recorder
	started, gaveUp chan struct{}
}

func (s *stuckService) HandleMessage(ctx context.Context, m chat.Message) (chat.Reply, error) {
	s.started <- struct{}{}
	<-ctx.Done()
	s.gaveUp <- struct{}{}
	return chat.Reply{}, ctx.Err()
}
