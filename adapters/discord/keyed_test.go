package discord

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/discord/discordfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/outbox"
	"github.com/baton-bot/baton/core/sqlite"
)

// TestPostKeyed: a keyed post sends its key as an enforced nonce, so that
// posting it again answers the message made the first time; buttons go
// with it, and a key too long for a nonce is not sent.
func TestPostKeyed(t *testing.T) {
	ctx := context.Background()
	f := discordfake.New(t)
	f.Archive("7001")
	a, _ := newAdapter(t, nopService{}, Config{APIURL: f.APIURL()})

	first, err := a.PostKeyed(ctx, taskThread, "done", nil, "41.1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.PostKeyed(ctx, taskThread, "done", nil, "41.1")
	if err != nil || again != first {
		t.Errorf("the same key posted again = %q, %v; want the first message, %q", again, err, first)
	}
	if _, err := a.PostKeyed(ctx, taskThread, "approve?", []chat.Button{{Action: "approve:1", Label: "Approve"}}, "42.1"); err != nil {
		t.Fatal(err)
	}
	long := "12345678901234567890.123456"
	if _, err := a.PostKeyed(ctx, taskThread, "long key", nil, long); err != nil {
		t.Fatal(err)
	}
	posts := f.Posts()
	if len(posts) != 3 {
		t.Fatalf("%d posts, want 3: %+v", len(posts), posts)
	}
	if p := posts[0]; p.Nonce != "41.1" || !p.EnforceNonce || p.Content != "done" || p.Channel != "7001" || !p.HasAllowed || len(p.Parse) != 0 {
		t.Errorf("the keyed post = %+v; want nonce 41.1 enforced, in the thread (reopened), pinging nobody", p)
	}
	if p := posts[1]; p.Nonce != "42.1" || len(p.Buttons()) != 1 {
		t.Errorf("the keyed post with buttons = %+v; want nonce 42.1 and its button", p)
	}
	if p := posts[2]; p.Nonce != "" || p.EnforceNonce {
		t.Errorf("a post with a key over 25 characters sent nonce %q (enforced %v), want none", p.Nonce, p.EnforceNonce)
	}
	forbidden := core.ThreadRef{Platform: core.PlatformDiscord, Team: discordfake.Guild, Channel: discordfake.Text, Thread: discordfake.Forbidden}
	if _, err := a.PostKeyed(ctx, forbidden, "x", nil, "43.1"); !errors.Is(err, chat.ErrPermanent) {
		t.Errorf("a keyed post refused with Missing Permissions: %v, want chat.ErrPermanent", err)
	}
}

// diedAfterPosting is a store whose deliverer dies between posting a
// message and recording it: the message's claim is left to expire.
type diedAfterPosting struct{ outbox.Store }

var errDied = errors.New("the process died")

func (diedAfterPosting) OutboxSent(context.Context, int64, string) error { return errDied }
func (diedAfterPosting) OutboxRetry(context.Context, int64, time.Time, string) error {
	return errDied
}
func (diedAfterPosting) OutboxFail(context.Context, int64, string) error { return errDied }

// TestTakeoverDoesNotPostTwice: a gateway's deliverer posts a message and
// dies before recording it; the deliverer that takes it over once the
// claim has expired posts it with the same nonce, and Discord answers with
// the message posted the first time.
func TestTakeoverDoesNotPostTwice(t *testing.T) {
	ctx := t.Context()
	f := discordfake.New(t)
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "baton.db"), sqlite.Options{WorkspaceRoot: filepath.Join(dir, "ws")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	const lease = time.Minute
	task, _, err := st.EnsureTask(ctx, core.Task{Thread: taskThread})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddOutbox(ctx, core.OutboxMessage{TaskID: task.ID, Kind: core.OutboxPost, Payload: chat.Payload{Text: "the answer"}.Encode()}); err != nil {
		t.Fatal(err)
	}
	due, err := st.DueOutbox(ctx, core.PlatformDiscord, now, 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("due = %+v, %v", due, err)
	}
	a1, _ := newAdapter(t, nopService{}, Config{APIURL: f.APIURL()})
	a2, _ := newAdapter(t, nopService{}, Config{APIURL: f.APIURL()})
	first := outbox.New(diedAfterPosting{st}, core.PlatformDiscord, a1, outbox.Config{Owner: "gateway-1", Now: clock, Lease: lease})
	second := outbox.New(st, core.PlatformDiscord, a2, outbox.Config{Owner: "gateway-2", Now: clock, Lease: lease})
	if n, err := first.Flush(ctx); n != 1 || err != nil {
		t.Fatalf("the first gateway: %d deliveries, %v", n, err)
	}
	now = now.Add(lease)
	if n, err := second.Flush(ctx); n != 1 || err != nil {
		t.Fatalf("the second gateway after the lease: %d deliveries, %v", n, err)
	}
	posts := f.Posts()
	if len(posts) != 1 {
		t.Fatalf("%d posts of the message, want 1: %+v", len(posts), posts)
	}
	m, err := st.Outbox(ctx, due[0].ID)
	if err != nil || m.State != core.OutboxSent || m.PlatformMsgID != posts[0].ID || m.Claims != 2 {
		t.Errorf("the message after the takeover: %+v, %v; want sent as %s, claimed twice", m, err, posts[0].ID)
	}
}
