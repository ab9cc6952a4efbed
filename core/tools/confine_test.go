package tools

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/workspace/workspacetest"
)

// TestNamedPipeRefused puts named pipes where the file tools expect files:
// each returns a tool error at once instead of blocking on the open.
func TestNamedPipeRefused(t *testing.T) {
	env := newEnv(t)
	for _, name := range []string{"input/pipe", "input/pipe.png", "input/pipe.pdf", "input/pipe.docx"} {
		if err := syscall.Mkfifo(filepath.Join(env.WS.Root(), name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	calls := []struct {
		name string
		tool Tool
		args obj
	}{
		{"Read", Read{}, obj{"path": "input/pipe"}},
		{"Write", Write{}, obj{"path": "input/pipe", "content": "x"}},
		{"Edit", Edit{}, obj{"path": "input/pipe", "old_string": "a", "new_string": "b"}},
		{"ReadImage", ReadImage{}, obj{"path": "input/pipe.png"}},
		{"ReadDocument pdf", ReadDocument{}, obj{"path": "input/pipe.pdf"}},
		{"ReadDocument docx", ReadDocument{}, obj{"path": "input/pipe.docx"}},
		{"Grep", Grep{}, obj{"pattern": "x", "path": "input/pipe"}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan Result, 1)
			go func() { done <- call(t, c.tool, env, c.args) }()
			select {
			case res := <-done:
				if msg := failed(t, res); !strings.Contains(msg, "named pipe") || !strings.Contains(msg, "regular file") {
					t.Errorf("unclear error: %q", msg)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("blocked on a named pipe")
			}
		})
	}
	// A whole-workspace Grep passes the pipes by.
	if got := ok(t, call(t, Grep{}, env, obj{"pattern": "x"})); got != "No matches for x" {
		t.Errorf("Grep over the workspace: %q", got)
	}
}

// TestWriteSwapRace writes through a folder that another process keeps
// swapping for a symlink to outside the workspace: nothing outside is ever
// written.
func TestWriteSwapRace(t *testing.T) {
	env := newEnv(t)
	outside := filepath.Join(filepath.Dir(env.WS.Root()), "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(env.WS.Root(), "output", "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stop := workspacetest.Swap(t, dir, outside)
	for range 1500 {
		call(t, Write{}, env, obj{"path": "output/d/w.txt", "content": "alpha"})
		call(t, Edit{}, env, obj{"path": "output/d/w.txt", "old_string": "alpha", "new_string": "pwned"})
	}
	t.Logf("%d swaps", stop())
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("%d files written outside the workspace, first %s", len(entries), entries[0].Name())
	}
}

// TestReadSwapRace reads through a folder that keeps being swapped for a
// symlink to a folder outside holding a file of the same name: the
// outside file's content never comes back.
func TestReadSwapRace(t *testing.T) {
	env := newEnv(t)
	secret := filepath.Join(filepath.Dir(env.WS.Root()), "secret")
	if err := os.Mkdir(secret, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secret, "f.txt"), []byte("TOP-SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secret, "plan.json"), []byte(`{"name":"plan","items":[{"text":"TOP-SECRET"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	put(t, env, "output/d/f.txt", []byte("inside\n"))
	put(t, env, "logs/checklists/plan.json", []byte(`{"name":"plan","items":[{"text":"inside"}]}`))
	stop := workspacetest.Swap(t, filepath.Join(env.WS.Root(), "output", "d"), secret)
	stopLogs := workspacetest.Swap(t, filepath.Join(env.WS.Root(), "logs", "checklists"), secret)
	for range 500 {
		for _, res := range []Result{
			call(t, Read{}, env, obj{"path": "output/d/f.txt"}),
			call(t, Grep{}, env, obj{"pattern": "TOP-.ECRET"}),
			call(t, Checklist{}, env, obj{"action": "show"}),
		} {
			if strings.Contains(res.Text, "SECRET") {
				stop()
				stopLogs()
				t.Fatalf("read outside the workspace: %q", res.Text)
			}
		}
		if s, _ := LoadChecklists(env.WS, nil); strings.Contains(s, "SECRET") {
			stop()
			stopLogs()
			t.Fatalf("checklists loaded from outside: %q", s)
		}
	}
	t.Logf("%d and %d swaps", stop(), stopLogs())
}
