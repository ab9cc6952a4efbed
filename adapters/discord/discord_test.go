package discord

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/discord/discordfake"
)

// runAdapter runs an adapter over svc on a new fake Discord (cfg.APIURL
// is set to it) until the end of the test, and waits for /baton to be
// registered, the last step of its start.
func runAdapter(t *testing.T, svc Service, cfg Config) (*discordfake.Server, *logBuffer) {
	t.Helper()
	f := discordfake.New(t)
	cfg.APIURL = f.APIURL()
	a, logs := newAdapter(t, svc, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "/baton registered", func() bool { return len(f.Commands()) > 0 })
	return f, logs
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline (a hang, not a slow machine).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDisallowedIntents(t *testing.T) {
	f := discordfake.New(t)
	f.RefuseIntents()
	a, logs := newAdapter(t, nopService{}, Config{APIURL: f.APIURL()})
	err := a.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Message Content") {
		t.Fatalf("Run = %v, want an error naming the Message Content intent", err)
	}
	if !strings.Contains(logs.String(), "enable the Message Content intent for the bot in the Developer Portal") {
		t.Errorf("no advice in the log:\n%s", logs)
	}
}
