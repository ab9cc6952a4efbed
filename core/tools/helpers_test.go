package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/baton-bot/baton/core/tokens"
	"github.com/baton-bot/baton/core/workspace"
)

// newEnv opens a workspace in a temporary directory with the minimum budget.
func newEnv(tb testing.TB) *Env {
	tb.Helper()
	// The parent must be reachable by the sandbox's user (t.TempDir's
	// parent is private to its owner, root in CI).
	parent, err := os.MkdirTemp("", "baton-tools-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		tb.Fatal(err)
	}
	ws, err := workspace.Open(filepath.Join(parent, "7"))
	if err != nil {
		tb.Fatal(err)
	}
	return &Env{WS: ws, TokenizerBudget: MinBudget, Tokens: tokens.Default()}
}

// put writes a file into the workspace.
func put(tb testing.TB, env *Env, rel string, data []byte) string {
	tb.Helper()
	p := filepath.Join(env.WS.Root(), filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// call runs a tool through Safe with arguments marshalled from args.
func call(tb testing.TB, t Tool, env *Env, args any) Result {
	tb.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		tb.Fatal(err)
	}
	return Safe(context.Background(), t, env, raw)
}

// ok fails the test when r is an error result.
func ok(tb testing.TB, r Result) string {
	tb.Helper()
	if r.IsError {
		tb.Fatalf("unexpected error result: %s", r.Text)
	}
	return r.Text
}

// failed fails the test unless r is an error result.
func failed(tb testing.TB, r Result) string {
	tb.Helper()
	if !r.IsError {
		tb.Fatalf("want an error result, got: %.300s", r.Text)
	}
	return r.Text
}

type obj = map[string]any
