package discord

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/adapters/discord/discordfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// nopService answers nothing; the REST tests need no conversation.
type nopService struct{}

func (nopService) HandleMessage(context.Context, chat.Message) (chat.Reply, error) {
	return chat.Reply{}, nil
}
func (nopService) HandleCommand(context.Context, chat.Command) (chat.Reply, error) {
	return chat.Reply{}, nil
}
func (nopService) HandleReaction(context.Context, chat.Reaction) (chat.Reply, error) {
	return chat.Reply{}, nil
}
func (nopService) HandleAction(context.Context, chat.Action) (chat.Reply, error) {
	return chat.Reply{}, nil
}

// logBuffer collects log lines; safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newAdapter(t testing.TB, svc Service, cfg Config) (*Adapter, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	if cfg.Token == "" {
		cfg.Token = "secret-token"
	}
	a, err := New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if strings.Contains(logs.String(), "secret-token") {
			t.Errorf("the token is in the log:\n%s", logs)
		}
	})
	return a, logs
}

var taskThread = core.ThreadRef{Platform: core.PlatformDiscord, Team: discordfake.Guild, Channel: discordfake.Text, Thread: "7001"}

func TestPosterREST(t *testing.T) {
	f := discordfake.New(t)
	a, logs := newAdapter(t, nopService{}, Config{APIURL: f.APIURL()})
	ctx := context.Background()

	id, err := a.Post(ctx, taskThread, "Hello @everyone and <@&55>")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, taskThread, id, "⏳ working @here"); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		msg, emoji string
		remove     bool
	}{{"7001", "eyes", false}, {"7001", "eyes", true}, {"7001", "white_check_mark", false}, {"6000", "x", false}} {
		if err := a.React(ctx, taskThread, r.msg, r.emoji, r.remove); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Upload(ctx, taskThread, "report.md", strings.NewReader("# Report"), 8, "The report."); err != nil {
		t.Fatal(err)
	}

	posts, edits, reactions := f.Posts(), f.Edits(), f.Reactions()
	want := []discordfake.Message{
		{Channel: "7001", ID: id, Content: "Hello @\u200beveryone and <@\u200b&55>", HasAllowed: true, Parse: []string{}, Files: map[string]string{}},
		{Channel: "7001", ID: posts[len(posts)-1].ID, Content: "The report.", HasAllowed: true, Parse: []string{}, Files: map[string]string{"report.md": "# Report"}},
	}
	if diff := cmp.Diff(want, posts); diff != "" {
		t.Errorf("posts (-want +got):\n%s", diff)
	}
	wantEdits := []discordfake.Message{{Channel: "7001", ID: id, Content: "⏳ working @\u200bhere", HasAllowed: true, Parse: []string{}, Files: map[string]string{}}}
	if diff := cmp.Diff(wantEdits, edits); diff != "" {
		t.Errorf("edits (-want +got):\n%s", diff)
	}
	// The starter message lives in the parent channel, the others in the thread.
	wantReactions := []string{"+👀 200/7001", "-👀 200/7001", "+✅ 200/7001", "+❌ 7001/6000"}
	if diff := cmp.Diff(wantReactions, reactions); diff != "" {
		t.Errorf("reactions (-want +got):\n%s", diff)
	}
	if got := a.Limits(); got.Post != 2000 || got.MaxParts != 4 {
		t.Errorf("limits = %+v", got)
	}
	_ = logs
}

func TestPosterErrors(t *testing.T) {
	tests := []struct {
		name      string
		limited   int
		thread    core.ThreadRef
		after     time.Duration // want a *chat.RateLimitedError with it
		permanent bool
		log       string
	}{
		{name: "429 with rate-limit headers", limited: 1, thread: taskThread, after: 2500 * time.Millisecond},
		{name: "missing permissions", thread: core.ThreadRef{Platform: core.PlatformDiscord, Thread: "403"}, permanent: true,
			log: "Baton lacks a permission"},
		{name: "unknown channel", thread: core.ThreadRef{Platform: core.PlatformDiscord, Thread: "404"}, permanent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := discordfake.New(t)
			f.RateLimit(tt.limited)
			a, logs := newAdapter(t, nopService{}, Config{APIURL: f.APIURL()})
			_, err := a.Post(context.Background(), tt.thread, "hi")
			var rl *chat.RateLimitedError
			switch {
			case tt.after > 0:
				if !errors.As(err, &rl) || rl.After != tt.after {
					t.Fatalf("err = %v, want a rate limit of %s", err, tt.after)
				}
				// The retry the deliverer makes succeeds.
				if _, err := a.Post(context.Background(), tt.thread, "hi"); err != nil {
					t.Fatalf("retry: %v", err)
				}
			case tt.permanent:
				if !errors.Is(err, chat.ErrPermanent) {
					t.Fatalf("err = %v, want permanent", err)
				}
			}
			if !strings.Contains(logs.String(), tt.log) {
				t.Errorf("log lacks %q:\n%s", tt.log, logs)
			}
		})
	}
}

func TestPostArchivedThread(t *testing.T) {
	f := discordfake.New(t)
	f.Archive("7001")
	a, _ := newAdapter(t, nopService{}, Config{APIURL: f.APIURL()})
	if _, err := a.Post(context.Background(), taskThread, "still here"); err != nil {
		t.Fatal(err)
	}
	posts, requests := f.Posts(), f.Requests()
	if len(posts) != 1 || posts[0].Channel != "7001" || len(requests) == 0 || requests[0] != "edit channel 7001" {
		t.Errorf("posts = %+v, requests = %v; want the thread reopened, then the post", posts, requests)
	}
}

func TestRewrite(t *testing.T) {
	var got []string
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.Method+" "+r.URL.String()+" host="+r.Host)
		return &http.Response{StatusCode: 204, Body: http.NoBody, Request: r}, nil
	})
	c, err := client("http://proxy.example:8080/discord", next)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{
		"https://discord.com/api/v9/gateway",
		"https://discord.com/api/v9/channels/1/messages?limit=100&before=5",
		"https://discord.com/api/v9/channels/1/messages/2/reactions/%F0%9F%91%80/@me",
		"https://cdn.discordapp.com/attachments/1/2/a.txt",
	} {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if _, err := c.Do(req); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"GET http://proxy.example:8080/discord/gateway host=proxy.example:8080",
		"GET http://proxy.example:8080/discord/channels/1/messages?limit=100&before=5 host=proxy.example:8080",
		"GET http://proxy.example:8080/discord/channels/1/messages/2/reactions/%F0%9F%91%80/@me host=proxy.example:8080",
		"GET https://cdn.discordapp.com/attachments/1/2/a.txt host=cdn.discordapp.com",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"ftp://x/", "not a url", "http://"} {
		if _, err := client(bad, nil); err == nil {
			t.Errorf("client(%q) accepted", bad)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
