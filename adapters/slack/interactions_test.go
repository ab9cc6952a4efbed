package slack

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"
)

// clicks returns the actions handed to svc so far.
func (r *recorder) clicks() []chat.Action {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]chat.Action(nil), r.actions...)
}

// A click whose request is forged, stale, unsigned or unreadable is
// refused and handed nowhere. Each case is followed by a genuine click:
// with one worker, a refused click wrongly queued would be handed over
// before it.
func TestInteractionRefused(t *testing.T) {
	const ts = "1700000000.000200"
	click := slackfake.BlockActions("approve:7.1", "U1", "C1", ts, "1700000000.000100")
	now := time.Now()
	tests := []struct {
		name   string
		req    func(base string) *http.Request
		status int
	}{
		{"forged signature", func(b string) *http.Request {
			r := slackfake.Interaction(t, b, click, now)
			r.Header.Set("X-Slack-Signature", "v0="+strings.Repeat("ab", 32))
			return r
		}, 401},
		{"tampered payload", func(b string) *http.Request {
			r := slackfake.Interaction(t, b, click, now)
			forged := url.Values{"payload": {strings.Replace(click, "approve:7.1", "always:7.1", 1)}}.Encode()
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(forged)), -1
			return r
		}, 401},
		{"stale timestamp", func(b string) *http.Request {
			return slackfake.Interaction(t, b, click, now.Add(-6*time.Minute))
		}, 401},
		{"timestamp from the future", func(b string) *http.Request {
			return slackfake.Interaction(t, b, click, now.Add(6*time.Minute))
		}, 401},
		{"missing headers", func(b string) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, b+"/slack/interactions", strings.NewReader(url.Values{"payload": {click}}.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}, 401},
		{"no payload field", func(b string) *http.Request {
			return slackfake.Sign(t, b, "/slack/interactions", "token=x&type=block_actions", now, "application/x-www-form-urlencoded")
		}, 400},
		{"payload not JSON", func(b string) *http.Request {
			return slackfake.Sign(t, b, "/slack/interactions", url.Values{"payload": {`{"type": "block_actions",`}}.Encode(), now, "application/x-www-form-urlencoded")
		}, 400},
		{"payload without a type", func(b string) *http.Request {
			return slackfake.Sign(t, b, "/slack/interactions", url.Values{"payload": {`{"user":{"id":"U1"}}`}}.Encode(), now, "application/x-www-form-urlencoded")
		}, 400},
		{"body not a form", func(b string) *http.Request {
			return slackfake.Sign(t, b, "/slack/interactions", "%zz", now, "application/x-www-form-urlencoded")
		}, 400},
		{"body over the cap", func(b string) *http.Request {
			return slackfake.Interaction(t, b, strings.Replace(click, "the message", strings.Repeat("x", 2<<20), 1), now)
		}, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &recorder{clickReply: chat.Reply{Text: "noted"}}
			f := slackfake.NewServer(t)
			_, base := startHTTP(t, svc, f, Config{Workers: 1})
			if status, body := do(t, tt.req(base)); status != tt.status {
				t.Errorf("status = %d, want %d (%s)", status, tt.status, body)
			}
			genuine := slackfake.BlockActions("deny:7.1", "U2", "C1", ts, "1700000000.000100")
			if status, body := do(t, slackfake.Interaction(t, base, genuine, time.Now())); status != 200 {
				t.Fatalf("genuine click answered %d: %s", status, body)
			}
			eventually(t, "the genuine click handed over", func() bool { return len(svc.clicks()) > 0 })
			if got := svc.clicks(); len(got) != 1 || got[0].Value != "deny:7.1" || got[0].Author.ID != "slack:U2" {
				t.Errorf("handed over %+v; want only the genuine click", got)
			}
			eventually(t, "the genuine click's reply", func() bool { return len(f.Recorded("chat.postEphemeral")) > 0 })
			if eph := f.Recorded("chat.postEphemeral"); len(eph) != 1 || eph[0].User != "U2" {
				t.Errorf("ephemeral replies %+v; want one, to the genuine clicker", eph)
			}
		})
	}
}

// A click on a button is answered at once and handed to the service with
// the message's thread, named as messages name it, and its clicker named
// as authors are; the service's reply goes to the clicker alone, in that
// thread.
func TestInteractionHandedOver(t *testing.T) {
	const root, ts = "1700000000.000100", "1700000000.000200"
	alice := chat.Author{ID: "slack:U1", Name: "alice", Groups: []string{"slack-group:S1"}}
	tests := []struct {
		name            string
		channel, thrTS  string
		want            chat.Action
		ephemeralThread string
	}{
		{"in a thread", "C1", root, chat.Action{Value: "approve:7.1", Thread: thread(root), Channel: "slack:C1", MsgID: ts, Author: alice}, root},
		{"on a thread's root", "C1", "", chat.Action{Value: "approve:7.1", Thread: thread(ts), Channel: "slack:C1", MsgID: ts, Author: alice}, ts},
		{"in a direct-message channel", "D1", "", chat.Action{Value: "approve:7.1",
			Thread:  core.ThreadRef{Platform: core.PlatformSlack, Team: slackfake.Team, Channel: "D1", Thread: "D1"},
			Channel: "slack:D1", MsgID: ts, Direct: true, Author: alice}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &recorder{clickReply: chat.Reply{Text: "Only the person who started this task can decide <!here>."}}
			f := slackfake.NewServer(t)
			f.SetUser("U1", "alice")
			f.SetMembers("S1", "U1")
			_, base := startHTTP(t, svc, f, Config{Groups: []string{"slack-group:S1"}, Logger: testLogger(t)})
			status, body := do(t, slackfake.Interaction(t, base, slackfake.BlockActions("approve:7.1", "U1", tt.channel, ts, tt.thrTS), time.Now()))
			if status != 200 || body != "" {
				t.Fatalf("answered %d %q, want 200 and nothing", status, body)
			}
			eventually(t, "the click handed over", func() bool { return len(svc.clicks()) > 0 })
			if diff := cmp.Diff([]chat.Action{tt.want}, svc.clicks()); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			eventually(t, "the reply", func() bool { return len(f.Recorded("chat.postEphemeral")) > 0 })
			want := []slackfake.Call{{Method: "chat.postEphemeral", Channel: tt.channel, ThreadTS: tt.ephemeralThread, User: "U1",
				Text: "Only the person who started this task can decide @\u200bhere.", Parse: "none", LinkNames: "false"}}
			if diff := cmp.Diff(want, f.Recorded("chat.postEphemeral")); diff != "" {
				t.Errorf("ephemeral replies (-want +got):\n%s", diff)
			}
			if posts := f.Recorded("chat.postMessage"); len(posts) != 0 {
				t.Errorf("posted %+v in the thread; the reply is for the clicker alone", posts)
			}
		})
	}
}

// Interactions other than clicks on a message's buttons are acknowledged
// and handed nowhere.
func TestInteractionOthersIgnored(t *testing.T) {
	svc := &recorder{}
	_, base := startHTTP(t, svc, slackfake.NewServer(t), Config{Workers: 1, Logger: testLogger(t)})
	for _, p := range []string{
		`{"type":"view_submission","user":{"id":"U1"},"view":{"id":"V1"}}`,
		`{"type":"block_actions","user":{"id":"U1"},"container":{"type":"view","view_id":"V1"},"trigger_id":"1.2.3","actions":[{"type":"button","value":"approve:7.1"}]}`,
	} {
		if status, body := do(t, slackfake.Interaction(t, base, p, time.Now())); status != 200 {
			t.Fatalf("%s answered %d: %s", p, status, body)
		}
	}
	sentinel := slackfake.BlockActions("stop:7", "U1", "C1", "1700000000.000200", "")
	if status, body := do(t, slackfake.Interaction(t, base, sentinel, time.Now())); status != 200 {
		t.Fatalf("click answered %d: %s", status, body)
	}
	eventually(t, "the click handed over", func() bool { return len(svc.clicks()) > 0 })
	if got := svc.clicks(); len(got) != 1 || got[0].Value != "stop:7" {
		t.Errorf("handed over %+v; want the click on the message alone", got)
	}
}

// A click the service failed to handle is not lost: it stays in the inbox
// and is handed over again.
func TestInteractionRetriedAfterFailure(t *testing.T) {
	svc := &recorder{clickErr: errors.New("database is locked")}
	_, base := startHTTP(t, svc, slackfake.NewServer(t), Config{Workers: 1, SweepEvery: 20 * time.Millisecond, RetryAfter: 10 * time.Millisecond, Logger: testLogger(t)})
	if status, body := do(t, slackfake.Interaction(t, base, slackfake.BlockActions("approve:7.1", "U1", "C1", "1700000000.000200", ""), time.Now())); status != 200 {
		t.Fatalf("answered %d: %s", status, body)
	}
	eventually(t, "the click failing", func() bool {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		if svc.clickFails > 0 {
			svc.clickErr = nil
			return true
		}
		return false
	})
	eventually(t, "the click handed over again", func() bool { return len(svc.clicks()) > 0 })
	if got := svc.clicks(); len(got) != 1 || got[0].Value != "approve:7.1" {
		t.Errorf("handed over %+v, want the click once", got)
	}
}

// interactive sends an interactive envelope and reads back its ack.
func (s *socketFake) interactive(c *websocket.Conn, id, payload string) {
	_ = c.WriteJSON(map[string]any{"envelope_id": id, "type": "interactive", "payload": json.RawMessage(payload), "accepts_response_payload": true})
	s.awaitAck(c, id)
}

// In Socket Mode a click arrives as an interactive envelope: acknowledged,
// and handled as over HTTP.
func TestSocketInteraction(t *testing.T) {
	const root, ts = "1700000000.000100", "1700000000.000200"
	s := &socketFake{t: t}
	s.scripts = []func(*websocket.Conn){func(c *websocket.Conn) {
		s.interactive(c, "env-click", slackfake.BlockActions("stop:7", "U1", "C1", ts, root))
	}}
	f := slackfake.NewServer(t, s.bind)
	svc := &recorder{clickReply: chat.Reply{Text: "Stopping job #7 as you asked."}}
	a, err := New(svc, Config{Inbox: newInbox(t), Mode: ModeSocket, BotToken: slackfake.BotToken, AppToken: "xapp-test", APIURL: f.URL(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	eventually(t, "the envelope acknowledged", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return slices.Contains(s.acks, "env-click")
	})
	eventually(t, "the click handed over", func() bool { return len(svc.clicks()) > 0 })
	want := []chat.Action{{Value: "stop:7", Thread: thread(root), Channel: "slack:C1", MsgID: ts, Author: chat.Author{ID: "slack:U1"}}}
	if diff := cmp.Diff(want, svc.clicks()); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	eventually(t, "the reply", func() bool { return len(f.Recorded("chat.postEphemeral")) > 0 })
	if eph := f.Recorded("chat.postEphemeral"); len(eph) != 1 || eph[0].User != "U1" || eph[0].ThreadTS != root || eph[0].Text != "Stopping job #7 as you asked." {
		t.Errorf("ephemeral replies %+v; want the reply to U1 in the thread", eph)
	}
}
