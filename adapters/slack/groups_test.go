package slack

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core/chat"
	"github.com/google/go-cmp/cmp"
)

// warnings counts the warnings logged through it.
type warnings struct {
	mu   sync.Mutex
	msgs []string // guarded by mu
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.msgs)
}

func TestGroupMembership(t *testing.T) {
	f := slackfake.NewServer(t)
	f.SetMembers("S1", "U1", "U2")
	// S2 is unknown to Slack: every lookup of it fails.
	warn := &warnings{}
	g := newGroups(newClient(Config{BotToken: slackfake.BotToken, APIURL: f.URL()}), []string{"slack-group:S1", "S2", "slack-group:S1", ""}, 5*time.Minute, slog.New(warn))
	now := time.Unix(1_700_000_000, 0)
	g.now = func() time.Time { return now }
	ctx := context.Background()
	calls := f.MemberCalls

	if diff := cmp.Diff([]string{"slack-group:S1"}, g.of(ctx, "U1")); diff != "" {
		t.Errorf("groups of U1 (-want +got):\n%s", diff)
	}
	if got := g.of(ctx, "U3"); got != nil {
		t.Errorf("groups of U3 = %v, want none", got)
	}
	if got := g.of(ctx, "U2"); len(got) != 1 {
		t.Errorf("groups of U2 = %v, want S1", got)
	}
	if n := calls(); n != 2 {
		t.Errorf("%d usergroups.users.list calls for three users, want 2 (S1 once, S2 once)", n)
	}
	if n := warn.count(); n != 1 {
		t.Errorf("%d warnings, want the failing group logged once", n)
	}

	now = now.Add(time.Minute) // past the retry of a failed lookup, within the TTL
	f.SetMembers("S1", "U2")
	g.of(ctx, "U1")
	if n := calls(); n != 3 {
		t.Errorf("%d calls after a minute, want 3 (S2 tried again, S1 cached)", n)
	}
	if n := warn.count(); n != 1 {
		t.Errorf("%d warnings, want the failure still logged once", n)
	}

	now = now.Add(5 * time.Minute) // past the TTL: S1's new members show
	if got := g.of(ctx, "U1"); got != nil {
		t.Errorf("groups of U1 after the TTL = %v, want none (removed from S1)", got)
	}

	if got := newGroups(nil, nil, time.Minute, slog.New(warn)).of(ctx, "U1"); got != nil {
		t.Errorf("no groups configured: %v", got)
	}
}

// TestGroupsHandedOver: messages, reactions and slash commands carry the
// author's groups among those configured.
func TestGroupsHandedOver(t *testing.T) {
	svc := &recorder{reply: chat.Reply{Text: "ok"}}
	f := slackfake.NewServer(t)
	f.SetMembers("S1", "U1")
	f.SetMembers("S7", "U1") // not configured: never asked
	_, base := startHTTP(t, svc, f, Config{Groups: []string{"slack-group:S1"}})
	const root = "1700000000.000100"
	for _, body := range []string{
		slackfake.MentionEvent("Ev1", "U1", "<@UBATON> hi", root, ""),
		slackfake.Callback("Ev2", map[string]any{"type": "reaction_added", "user": "U1", "reaction": "x",
			"item": map[string]any{"type": "message", "channel": "C1", "ts": root}, "event_ts": "1700000000.000900"}),
	} {
		if status, b := do(t, slackfake.Sign(t, base, "/slack/events", body, time.Now(), "application/json")); status != 200 {
			t.Fatalf("event answered %d: %s", status, b)
		}
	}
	form := "team_id=T1&channel_id=C1&user_id=U1&user_name=alice&command=%2Fbaton&text=list"
	if status, b := do(t, slackfake.Sign(t, base, "/slack/commands", form, time.Now(), "application/x-www-form-urlencoded")); status != 200 {
		t.Fatalf("command answered %d: %s", status, b)
	}
	eventually(t, "all three handed over", func() bool { return svc.handed() >= 3 })
	svc.mu.Lock()
	defer svc.mu.Unlock()
	want := []string{"slack-group:S1"}
	for what, got := range map[string][]string{"message": svc.messages[0].Author.Groups, "reaction": svc.reacts[0].Author.Groups, "command": svc.commands[0].Author.Groups} {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s author groups (-want +got):\n%s", what, diff)
		}
	}
}
