package slack

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core/chat"
	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"
	"github.com/slack-go/slack/slacktest"
)

// socketFake is Slack's Socket Mode end: apps.connections.open hands out
// a websocket URL, and each connection plays the next script.
type socketFake struct {
	t       testing.TB
	scripts []func(c *websocket.Conn) // one per connection, in order

	mu    sync.Mutex
	conns int      // guarded by mu: connections opened
	acks  []string // guarded by mu: envelope ids acknowledged
	auth  []string // guarded by mu: bearer tokens apps.connections.open saw
}

func (s *socketFake) bind(c slacktest.Customize) {
	c.Handle("/apps.connections.open", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.mu.Unlock()
		base := r.Context().Value(slacktest.ServerURLContextKey).(string)
		slackfake.WriteJSON(w, map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(base, "http") + "socket"})
	})
	// slack-go sends Origin: https://api.slack.com.
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	c.Handle("/socket", func(w http.ResponseWriter, r *http.Request) {
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			s.t.Logf("upgrade: %v", err)
			return
		}
		defer conn.Close()
		s.mu.Lock()
		n := s.conns
		s.conns++
		s.mu.Unlock()
		_ = conn.WriteJSON(map[string]any{"type": "hello", "num_connections": 1, "debug_info": map[string]any{"host": "fake"}})
		if n < len(s.scripts) {
			s.scripts[n](conn)
		}
		// Keep reading (pings, late acks) until the client goes.
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
		}
	})
}

// envelope sends an events_api envelope and reads back its ack.
func (s *socketFake) envelope(c *websocket.Conn, id string, retry int, payload string) {
	_ = c.WriteJSON(map[string]any{"envelope_id": id, "type": "events_api", "payload": json.RawMessage(payload),
		"accepts_response_payload": false, "retry_attempt": retry, "retry_reason": map[bool]string{true: "timeout"}[retry > 0]})
	s.awaitAck(c, id)
}

// awaitAck reads acks, recording each, until envelope id's comes or the
// connection ends.
func (s *socketFake) awaitAck(c *websocket.Conn, id string) {
	for {
		_, b, err := c.ReadMessage()
		if err != nil {
			return
		}
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(b, &ack) == nil && ack.EnvelopeID != "" {
			s.mu.Lock()
			s.acks = append(s.acks, ack.EnvelopeID)
			s.mu.Unlock()
			if ack.EnvelopeID == id {
				return
			}
		}
	}
}

func TestSocketMode(t *testing.T) {
	const root = "1700000000.000100"
	s := &socketFake{t: t}
	s.scripts = []func(*websocket.Conn){
		func(c *websocket.Conn) {
			s.envelope(c, "env-1", 0, slackfake.MentionEvent("Ev1", "U1", "<@UBATON> hello", root, ""))
			s.envelope(c, "env-2", 1, slackfake.MentionEvent("Ev1", "U1", "<@UBATON> hello", root, ""))
			_ = c.WriteJSON(map[string]any{"type": "disconnect", "reason": "refresh_requested"})
		},
		func(c *websocket.Conn) {
			s.envelope(c, "env-3", 0, slackfake.MessageEvent("Ev2", "U1", "more", "1700000000.000200", root))
		},
	}
	f := slackfake.NewServer(t, s.bind)
	svc := &recorder{}
	a, err := New(svc, Config{Inbox: newInbox(t), Mode: ModeSocket, BotToken: slackfake.BotToken, AppToken: "xapp-test", APIURL: f.URL(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !a.LastEvent().IsZero() {
		t.Error("LastEvent set before any event")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	eventually(t, "both messages handed over", func() bool {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		return slices.ContainsFunc(svc.messages, func(m chat.Message) bool { return m.EventID == "Ev2" })
	})
	eventually(t, "three acks", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.acks) >= 3
	})
	s.mu.Lock()
	if diff := cmp.Diff([]string{"env-1", "env-2", "env-3"}, s.acks); diff != "" {
		t.Errorf("acks (-want +got):\n%s", diff)
	}
	if s.conns != 2 {
		t.Errorf("%d connections, want a reconnect after disconnect", s.conns)
	}
	if len(s.auth) == 0 || s.auth[0] != "Bearer xapp-test" {
		t.Errorf("apps.connections.open authorised with %q, want the app token", s.auth)
	}
	s.mu.Unlock()
	svc.mu.Lock()
	var got []string
	for _, m := range svc.messages {
		got = append(got, m.EventID+" "+m.MsgID+" "+m.Text)
	}
	svc.mu.Unlock()
	// The retry env-2 is acknowledged; it is handed over again only when
	// env-1's event had left the inbox (the service drops the repeat).
	got = slices.Compact(slices.Sorted(slices.Values(got)))
	want := []string{"Ev1 " + root + " hello", "Ev2 1700000000.000200 more"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("handed over (-want +got):\n%s", diff)
	}
	if time.Since(a.LastEvent()) > time.Minute {
		t.Errorf("LastEvent = %v, want recent", a.LastEvent())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil after cancel", err)
	}
	done <- nil
}

var cmpSorted = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
})

// testLogger writes the adapter's log to the test's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tlog struct{ t testing.TB }

func (l tlog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
