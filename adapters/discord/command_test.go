package discord

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/adapters/discord/discordfake"
	"github.com/baton-bot/baton/core/chat"
)

// commandService answers /baton as told: after release is closed (nil:
// at once), with reply or err.
type commandService struct {
	nopService
	release chan struct{}
	reply   chat.Reply
	err     error
}

func (s *commandService) HandleCommand(ctx context.Context, c chat.Command) (chat.Reply, error) {
	if s.release != nil {
		<-s.release
	}
	return s.reply, s.err
}

// runCommandAdapter runs an adapter over svc on a fake Discord and sends
// it /baton abort in a DM as interaction id; it returns the fake.
func runCommandAdapter(t *testing.T, svc Service, wait time.Duration, id string) *discordfake.Server {
	t.Helper()
	f, _ := runAdapter(t, svc, Config{GuildID: discordfake.Guild, CommandWait: wait})
	f.Dispatch("INTERACTION_CREATE", map[string]any{
		"id": id, "application_id": discordfake.App, "type": 2, "token": "tok", "channel_id": discordfake.DM,
		"user": map[string]any{"id": "42", "username": "alice"},
		"data": map[string]any{"id": "c1", "name": "baton", "type": 1, "options": []any{map[string]any{"name": "abort", "type": 1}}},
	})
	return f
}

// answered waits for an answer to the interaction and returns the
// responses and answers.
func answered(t *testing.T, f *discordfake.Server) (responses, answers []string) {
	t.Helper()
	waitFor(t, "the /baton answer", func() bool { return len(f.Answers()) > 0 })
	return f.Responses(), f.Answers()
}

// TestCommandStoreFailureAnswered: a /baton command whose store write
// fails is answered within Discord's 3 seconds with an ephemeral error,
// not a deferred response.
func TestCommandStoreFailureAnswered(t *testing.T) {
	svc := &commandService{err: errors.New("request abort: database or disk is full (13)")}
	f := runCommandAdapter(t, svc, 2*time.Second, "i1")
	responses, answers := answered(t, f)
	if diff := cmp.Diff([]string{"i1 type=4 flags=64"}, responses); diff != "" {
		t.Errorf("interaction responses (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{textFailed}, answers); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
}

// TestSlowCommandDeferred: a command that outlives CommandWait is
// deferred, then its answer edited in.
func TestSlowCommandDeferred(t *testing.T) {
	svc := &commandService{release: make(chan struct{}), reply: chat.Reply{Text: "Aborted task #3."}}
	f := runCommandAdapter(t, svc, 20*time.Millisecond, "i2")
	waitFor(t, "the deferred response", func() bool { return len(f.Responses()) > 0 })
	close(svc.release)
	responses, answers := answered(t, f)
	if diff := cmp.Diff([]string{"i2 type=5 flags=64"}, responses); diff != "" {
		t.Errorf("interaction responses (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Aborted task #3."}, answers); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
}

// TestLateInteraction: a /baton command whose response Discord refuses as
// too late (after its 3 seconds) is logged, and never answered.
func TestLateInteraction(t *testing.T) {
	svc := &commandService{reply: chat.Reply{Text: "No active tasks."}}
	f, logs := runAdapter(t, svc, Config{GuildID: discordfake.Guild})
	f.Dispatch("INTERACTION_CREATE", map[string]any{
		"id": discordfake.LateInteraction, "application_id": discordfake.App, "type": 2, "token": "tok",
		"channel_id": discordfake.Text, "guild_id": discordfake.Guild,
		"member": map[string]any{"user": map[string]any{"id": "42", "username": "alice"}, "roles": []string{}},
		"data":   map[string]any{"id": "c1", "name": "baton", "type": 1, "options": []any{map[string]any{"name": "list", "type": 1}}},
	})
	waitFor(t, "the late interaction logged", func() bool { return strings.Contains(logs.String(), "answered too late") })
	if answers := f.Answers(); len(answers) != 0 {
		t.Errorf("a late interaction was answered: %q", answers)
	}
}
