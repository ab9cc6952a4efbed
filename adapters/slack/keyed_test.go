package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/outbox"
	"github.com/baton-bot/baton/core/sqlite"
)

// metadataKey returns the outbox key a recorded post's metadata carries.
func metadataKey(t *testing.T, c slackfake.Call) string {
	t.Helper()
	var m struct {
		EventType    string         `json:"event_type"`
		EventPayload map[string]any `json:"event_payload"`
	}
	if err := json.Unmarshal([]byte(c.Metadata), &m); err != nil || m.EventType != "baton_outbox" {
		t.Fatalf("post %q carries metadata %q, want a baton_outbox event (%v)", c.Text, c.Metadata, err)
	}
	key, _ := m.EventPayload["key"].(string)
	return key
}

// TestPostKeyed: a keyed post carries its key as message metadata, with
// buttons or not, and FindDelivered finds it again: in a thread past the
// first page of replies, and in a direct-message channel's history.
func TestPostKeyed(t *testing.T) {
	ctx := context.Background()
	f := slackfake.NewServer(t)
	p := NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()})
	th := thread("1700000000.000100")
	dm := core.ThreadRef{Platform: core.PlatformSlack, Team: slackfake.Team, Channel: "D1", Thread: "D1"}

	// More posts than one page holds, so that the key is on the second.
	for i := range 210 {
		if _, err := p.PostKeyed(ctx, th, fmt.Sprint("filler ", i), nil, fmt.Sprint("f.", i)); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := p.PostKeyed(ctx, th, "done", nil, "41.1")
	if err != nil {
		t.Fatal(err)
	}
	withButtons, err := p.PostKeyed(ctx, th, "approve?", []chat.Button{{Action: "approve:1", Label: "Approve"}}, "42.1")
	if err != nil {
		t.Fatal(err)
	}
	inDM, err := p.PostKeyed(ctx, dm, "hi", nil, "43.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Post(ctx, dm, "not keyed"); err != nil {
		t.Fatal(err)
	}

	posts := f.Recorded("chat.postMessage")
	if got := metadataKey(t, posts[210]); got != "41.1" {
		t.Errorf("the plain post's key = %q, want 41.1", got)
	}
	if got := metadataKey(t, posts[211]); got != "42.1" || len(posts[211].Buttons()) != 1 {
		t.Errorf("the post with buttons: key %q, %d buttons; want 42.1 and its button", got, len(posts[211].Buttons()))
	}
	if posts[213].Metadata != "" {
		t.Errorf("a plain Post carries metadata %q", posts[213].Metadata)
	}

	for _, tt := range []struct {
		thread core.ThreadRef
		key    string
		want   string
	}{
		{th, "41.1", plain},
		{th, "42.1", withButtons},
		{th, "43.1", ""}, // another thread's
		{th, "44.1", ""},
		{dm, "43.1", inDM},
		{dm, "41.1", ""},
	} {
		id, found, err := p.FindDelivered(ctx, tt.thread, tt.key)
		if err != nil || id != tt.want || found != (tt.want != "") {
			t.Errorf("FindDelivered(%s, %s) = %q, %v, %v; want %q", tt.thread.Channel, tt.key, id, found, err, tt.want)
		}
	}

	f.RateLimit("conversations.replies", 1)
	var rl *chat.RateLimitedError
	if _, _, err := p.FindDelivered(ctx, th, "41.1"); !errors.As(err, &rl) {
		t.Errorf("FindDelivered rate limited: %v, want a *chat.RateLimitedError", err)
	}
}

// diedAfterPosting is a store whose deliverer dies between posting a
// message and recording it: the outcome never reaches the store, and the
// message's claim is left to expire.
type diedAfterPosting struct{ outbox.Store }

var errDied = errors.New("the process died")

func (diedAfterPosting) OutboxSent(context.Context, int64, string) error { return errDied }
func (diedAfterPosting) OutboxRetry(context.Context, int64, time.Time, string) error {
	return errDied
}
func (diedAfterPosting) OutboxFail(context.Context, int64, string) error { return errDied }

// TestTakeoverDoesNotPostTwice: a gateway's deliverer posts a message on
// Slack and dies before recording it; once its claim expires, another
// gateway's deliverer takes the message over, finds the post by its
// metadata, and records it without posting it again.
func TestTakeoverDoesNotPostTwice(t *testing.T) {
	ctx := t.Context()
	f := slackfake.NewServer(t)
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "baton.db"), sqlite.Options{WorkspaceRoot: filepath.Join(dir, "ws")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	const lease = time.Minute

	for _, th := range []core.ThreadRef{thread("1700000000.000100"), {Platform: core.PlatformSlack, Team: slackfake.Team, Channel: "D1", Thread: "D1"}} {
		t.Run(th.Channel, func(t *testing.T) {
			task, _, err := st.EnsureTask(ctx, core.Task{Thread: th})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.AddOutbox(ctx, core.OutboxMessage{TaskID: task.ID, Kind: core.OutboxPost, Payload: chat.Payload{Text: "the answer"}.Encode()}); err != nil {
				t.Fatal(err)
			}
			due, err := st.DueOutbox(ctx, core.PlatformSlack, now, 10)
			if err != nil || len(due) != 1 {
				t.Fatalf("due = %+v, %v; want the message", due, err)
			}
			id := due[0].ID
			before := len(f.Recorded("chat.postMessage"))
			first := outbox.New(diedAfterPosting{st}, core.PlatformSlack, NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()}),
				outbox.Config{Owner: "gateway-1", Now: clock, Lease: lease})
			second := outbox.New(st, core.PlatformSlack, NewPoster(Config{BotToken: slackfake.BotToken, APIURL: f.URL()}),
				outbox.Config{Owner: "gateway-2", Now: clock, Lease: lease})
			if n, err := first.Flush(ctx); n != 1 || err != nil {
				t.Fatalf("the first gateway: %d deliveries, %v", n, err)
			}
			if n, _ := second.Flush(ctx); n != 0 {
				t.Fatal("the second gateway took the message while the first's claim held")
			}
			now = now.Add(lease)
			if n, err := second.Flush(ctx); n != 1 || err != nil {
				t.Fatalf("the second gateway after the lease: %d deliveries, %v", n, err)
			}

			posts := f.Recorded("chat.postMessage")[before:]
			if len(posts) != 1 {
				t.Fatalf("%d posts of the message, want 1: %+v", len(posts), posts)
			}
			// The store records the post Slack has.
			m, err := st.Outbox(ctx, id)
			if err != nil || m.State != core.OutboxSent || m.PlatformMsgID != posts[0].Posted || m.Claims != 2 {
				t.Errorf("the message after the takeover: %+v, %v; want sent as %s, claimed twice", m, err, posts[0].Posted)
			}
		})
	}
}
