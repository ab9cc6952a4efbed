package slack

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/google/go-cmp/cmp"
)

func do(t testing.TB, r *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// recorder is a Service that records what it is handed.
type recorder struct {
	mu       sync.Mutex
	messages []chat.Message  // guarded by mu
	commands []chat.Command  // guarded by mu
	reacts   []chat.Reaction // guarded by mu
	actions  []chat.Action   // guarded by mu
	reply    chat.Reply
	wait     time.Duration // HandleCommand takes this long
	// clickReply is what HandleAction answers; clickErr, while set, makes
	// it fail instead (and record nothing).
	clickReply chat.Reply
	clickErr   error // guarded by mu
	clickFails int   // guarded by mu: clicks failed with clickErr
}

func (r *recorder) HandleMessage(ctx context.Context, m chat.Message) (chat.Reply, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m.History, m.Files = nil, nil
	r.messages = append(r.messages, m)
	return chat.Reply{}, nil
}

func (r *recorder) HandleCommand(ctx context.Context, c chat.Command) (chat.Reply, error) {
	time.Sleep(r.wait)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commands = append(r.commands, c)
	return r.reply, nil
}

func (r *recorder) HandleReaction(ctx context.Context, x chat.Reaction) (chat.Reply, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reacts = append(r.reacts, x)
	return chat.Reply{}, nil
}

func (r *recorder) HandleAction(ctx context.Context, a chat.Action) (chat.Reply, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.clickErr != nil {
		r.clickFails++
		return chat.Reply{}, r.clickErr
	}
	r.actions = append(r.actions, a)
	return r.clickReply, nil
}

func (r *recorder) handed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.messages) + len(r.commands) + len(r.reacts) + len(r.actions)
}

// newInbox opens a store of its own for an adapter's inbox.
func newInbox(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "baton.db"), sqlite.Options{WorkspaceRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// startHTTP runs an HTTP-mode adapter over svc and the fake Slack; its
// inbox is a store of its own unless cfg names one.
func startHTTP(t testing.TB, svc Service, f *slackfake.Server, cfg Config) (*Adapter, string) {
	t.Helper()
	if cfg.Inbox == nil {
		cfg.Inbox = newInbox(t)
	}
	cfg.Mode, cfg.BotToken, cfg.SigningSecret, cfg.APIURL = ModeHTTP, slackfake.BotToken, slackfake.SigningSecret, f.URL()
	a, err := New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return a, srv.URL
}

// eventually polls cond until it holds, failing after a generous deadline.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestEventsRequestVerification(t *testing.T) {
	challenge := `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
	event := slackfake.MentionEvent("Ev1", "U1", "<@UBATON> hi", "1700000000.000100", "")
	now := time.Now()
	tests := []struct {
		name   string
		req    func(base string) *http.Request
		status int
		body   string
	}{
		{"url verification", func(b string) *http.Request {
			return slackfake.Sign(t, b, "/slack/events", challenge, now, "application/json")
		},
			200, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"},
		{"tampered body", func(b string) *http.Request {
			r := slackfake.Sign(t, b, "/slack/events", event, now, "application/json")
			r.Body = io.NopCloser(strings.NewReader(strings.Replace(event, "hi", "rm -rf", 1)))
			r.ContentLength = -1
			return r
		}, 401, ""},
		{"stale timestamp", func(b string) *http.Request {
			return slackfake.Sign(t, b, "/slack/events", event, now.Add(-6*time.Minute), "application/json")
		}, 401, ""},
		{"missing headers", func(b string) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, b+"/slack/events", strings.NewReader(event))
			return r
		}, 401, ""},
		{"forged with another secret", func(b string) *http.Request {
			r := slackfake.Sign(t, b, "/slack/events", event, now, "application/json")
			r.Header.Set("X-Slack-Signature", "v0="+strings.Repeat("ab", 32))
			return r
		}, 401, ""},
		{"malformed JSON", func(b string) *http.Request {
			return slackfake.Sign(t, b, "/slack/events", `{"type": "event_callback",`, now, "application/json")
		}, 400, ""},
		{"unsigned command", func(b string) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, b+"/slack/commands", strings.NewReader("command=%2Fbaton&text=list"))
			return r
		}, 401, ""},
		{"unsigned interaction", func(b string) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, b+"/slack/interactions", strings.NewReader("payload=%7B%7D"))
			return r
		}, 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &recorder{}
			_, base := startHTTP(t, svc, slackfake.NewServer(t), Config{})
			status, body := do(t, tt.req(base))
			if status != tt.status {
				t.Errorf("status = %d, want %d (%s)", status, tt.status, body)
			}
			if tt.body != "" && body != tt.body {
				t.Errorf("body = %q, want %q", body, tt.body)
			}
			if tt.status != 200 {
				time.Sleep(50 * time.Millisecond) // give a wrongly queued event the chance to show
				if n := svc.handed(); n != 0 {
					t.Errorf("%d things handed to the service, want none", n)
				}
			}
		})
	}
}

func TestEventsTranslated(t *testing.T) {
	svc := &recorder{}
	f := slackfake.NewServer(t)
	_, base := startHTTP(t, svc, f, Config{RequireMention: false, IgnoreBots: true})
	now := time.Now()
	send := func(body string, retry string) {
		t.Helper()
		r := slackfake.Sign(t, base, "/slack/events", body, now, "application/json")
		if retry != "" {
			r.Header.Set("X-Slack-Retry-Num", retry)
			r.Header.Set("X-Slack-Retry-Reason", "http_timeout")
		}
		if status, b := do(t, r); status != 200 {
			t.Fatalf("status %d: %s", status, b)
		}
	}
	send(slackfake.MentionEvent("Ev1", "U1", "<@UBATON> summarise <@U2>'s plan", "1700000000.000100", ""), "")
	send(slackfake.MentionEvent("Ev1", "U1", "<@UBATON> summarise <@U2>'s plan", "1700000000.000100", ""), "1")
	send(slackfake.MessageEvent("Ev2", "U2", "and the budget", "1700000000.000200", "1700000000.000100"), "")
	send(slackfake.MessageEvent("Ev3", slackfake.BotUser, "my own words", "1700000000.000300", "1700000000.000100"), "")
	send(slackfake.Callback("Ev4", map[string]any{"type": "message", "subtype": "bot_message", "bot_id": "B9", "text": "beep", "ts": "1700000000.000400", "channel": "C1", "thread_ts": "1700000000.000100"}), "")
	send(slackfake.Callback("Ev5", map[string]any{"type": "message", "user": "U7", "bot_id": "B7", "text": "another bot", "ts": "1700000000.000500", "channel": "C1", "channel_type": "channel", "thread_ts": "1700000000.000100"}), "")
	send(slackfake.Callback("Ev6", map[string]any{"type": "message", "subtype": "message_changed", "channel": "C1", "ts": "1700000000.000600", "message": map[string]any{"user": "U1", "text": "edited", "ts": "1700000000.000100"}}), "")
	send(slackfake.MessageEvent("Ev7", "U1", "top-level chatter", "1700000000.000700", ""), "")
	send(slackfake.Callback("Ev8", map[string]any{"type": "message", "channel_type": "im", "user": "U3", "text": "hello there", "ts": "1700000000.000800", "channel": "D3"}), "")
	send(slackfake.Callback("Ev9", map[string]any{"type": "reaction_added", "user": "U1", "reaction": "x", "item_user": "U1",
		"item": map[string]any{"type": "message", "channel": "C1", "ts": "1700000000.000100"}, "event_ts": "1700000000.000900"}), "")
	send(slackfake.Callback("Ev10", map[string]any{"type": "reaction_added", "user": slackfake.BotUser, "reaction": "eyes",
		"item": map[string]any{"type": "message", "channel": "C1", "ts": "1700000000.000100"}, "event_ts": "1700000000.001000"}), "")

	// Slack's retry of Ev1 is handed over again only when the first was
	// handled and left the inbox before it came (the service drops it).
	eventually(t, "the events to be handed over", func() bool { return svc.handed() >= 4 })
	time.Sleep(100 * time.Millisecond) // let an event that should have been dropped show up
	svc.mu.Lock()
	defer svc.mu.Unlock()
	root := thread("1700000000.000100")
	want := []chat.Message{
		{Thread: root, Channel: "slack:C1", MsgID: "1700000000.000100", EventID: "Ev1", Author: chat.Author{ID: "slack:U1"}, Text: "summarise @U2's plan",
			Original: "<@UBATON> summarise <@U2>'s plan", Addressed: true},
		{Thread: root, Channel: "slack:C1", MsgID: "1700000000.000200", EventID: "Ev2", Author: chat.Author{ID: "slack:U2"}, Text: "and the budget"},
		{Thread: thread("D3"), Channel: "slack:D3", MsgID: "1700000000.000800", EventID: "Ev8", Author: chat.Author{ID: "slack:U3"}, Text: "hello there", Addressed: true, Direct: true},
	}
	want[2].Thread.Channel = "D3"
	sortByEvent := cmp.Transformer("at", func(m chat.Message) chat.Message { m.At = time.Time{}; return m })
	got := append([]chat.Message(nil), svc.messages...)
	sortMessages(got)
	got = slices.CompactFunc(got, func(a, b chat.Message) bool { return cmp.Equal(a, b, sortByEvent) })
	if diff := cmp.Diff(want, got, sortByEvent); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	wantReacts := []chat.Reaction{{Thread: root, MsgID: "1700000000.000100", Emoji: "x", Author: chat.Author{ID: "slack:U1"}}}
	if diff := cmp.Diff(wantReacts, svc.reacts); diff != "" {
		t.Errorf("reactions (-want +got):\n%s", diff)
	}
}

// sortMessages orders messages by ts, then event id (workers run
// concurrently).
func sortMessages(ms []chat.Message) {
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && ms[j].MsgID+ms[j].EventID < ms[j-1].MsgID+ms[j-1].EventID; j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
}

func TestSlashCommand(t *testing.T) {
	form := url.Values{"token": {"gIkuvaNzQIHg97ATvDxqgjtO"}, "team_id": {slackfake.Team}, "channel_id": {"C1"}, "channel_name": {"general"},
		"user_id": {"U1"}, "user_name": {"alice"}, "command": {"/baton"}, "text": {"status #42"}, "response_url": {""}}
	t.Run("answered at once", func(t *testing.T) {
		svc := &recorder{reply: chat.Reply{Text: "Task #42 — job #7 running <!here>"}}
		_, base := startHTTP(t, svc, slackfake.NewServer(t), Config{})
		status, body := do(t, slackfake.Sign(t, base, "/slack/commands", form.Encode(), time.Now(), "application/x-www-form-urlencoded"))
		var got map[string]string
		if err := json.Unmarshal([]byte(body), &got); status != 200 || err != nil {
			t.Fatalf("status %d, body %s: %v", status, body, err)
		}
		want := map[string]string{"response_type": "ephemeral", "text": "Task #42 — job #7 running @\u200bhere"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("answer (-want +got):\n%s", diff)
		}
		svc.mu.Lock()
		defer svc.mu.Unlock()
		wantCmd := []chat.Command{{Name: "status", Args: "#42", Thread: thread(""), Channel: "slack:C1", Author: chat.Author{ID: "slack:U1", Name: "alice"}}}
		if diff := cmp.Diff(wantCmd, svc.commands); diff != "" {
			t.Errorf("command (-want +got):\n%s", diff)
		}
	})
	t.Run("slow: working on it, then response_url", func(t *testing.T) {
		late := make(chan string, 1)
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			late <- string(b)
		}))
		t.Cleanup(hook.Close)
		svc := &recorder{reply: chat.Reply{Text: "No active tasks."}, wait: 300 * time.Millisecond}
		_, base := startHTTP(t, svc, slackfake.NewServer(t), Config{CommandWait: 50 * time.Millisecond})
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		f.Set("text", "list")
		f.Set("response_url", hook.URL)
		_, body := do(t, slackfake.Sign(t, base, "/slack/commands", f.Encode(), time.Now(), "application/x-www-form-urlencoded"))
		if !strings.Contains(body, "Working on it") {
			t.Errorf("first answer = %s, want working on it", body)
		}
		select {
		case b := <-late:
			if !strings.Contains(b, "No active tasks.") || !strings.Contains(b, `"ephemeral"`) {
				t.Errorf("late answer = %s", b)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no late answer on response_url")
		}
	})
}

func TestRequireMention(t *testing.T) {
	svc := &recorder{}
	_, base := startHTTP(t, svc, slackfake.NewServer(t), Config{RequireMention: true})
	for _, body := range []string{
		slackfake.MessageEvent("Ev1", "U2", "just chatting", "1700000000.000200", "1700000000.000100"),
		slackfake.MessageEvent("Ev2", "U2", "<@UBATON> over to you", "1700000000.000300", "1700000000.000100"),
	} {
		if status, b := do(t, slackfake.Sign(t, base, "/slack/events", body, time.Now(), "application/json")); status != 200 {
			t.Fatalf("status %d: %s", status, b)
		}
	}
	eventually(t, "the mention handed over", func() bool { return svc.handed() >= 1 })
	time.Sleep(100 * time.Millisecond)
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if len(svc.messages) != 1 || svc.messages[0].EventID != "Ev2" || !svc.messages[0].Addressed || svc.messages[0].Text != "over to you" {
		t.Errorf("handed over %+v, want only the addressed mention", svc.messages)
	}
}
