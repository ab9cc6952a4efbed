package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/workspace"
)

const writer = `
name: writer
description: test piece that writes
max_movements: 2
movements:
  - name: work
    persona: You write files.
    instruction: "{task}"
    tools: [Read, Write, Edit, Bash]
    next: [COMPLETE]
    max_iterations: 10
`

// toolResults returns the tool results the model was sent, in order, by
// the last request (each request repeats the movement so far; the last
// one answers the call before the transition).
func toolResults(f *fixture) []string {
	reqs := f.srv.Requests()
	var out []string
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == "tool" {
			out = append(out, m.Text())
		}
	}
	return out
}

// TestWorkspaceCap: a call that takes the workspace over workspaces.max_bytes
// comes back with a note; the next Write is refused; Bash may still delete,
// and once the workspace is under the cap again writing is allowed.
func TestWorkspaceCap(t *testing.T) {
	f := newFixture(t, map[string]string{"writer": writer}, func(c *engine.Config) { c.MaxWorkspaceBytes = 64 << 10 })
	big := strings.Repeat("x", 80<<10)
	f.srv.Script(
		llmtest.Call("Write", `{"path":"output/big.txt","content":"`+big+`"}`),
		llmtest.Call("Write", `{"path":"output/small.txt","content":"refused"}`),
		llmtest.Call("Edit", `{"path":"output/big.txt","old_string":"xx","new_string":"y"}`),
		llmtest.Call("Bash", `{"command":"rm output/big.txt"}`),
		llmtest.Call("Write", `{"path":"output/small.txt","content":"allowed"}`),
		llmtest.Transition("COMPLETE", "done"),
	)
	f.run(f.start("writer", "fill the disk"))
	res := toolResults(f)
	if len(res) != 5 {
		t.Fatalf("%d tool results, want 5: %q", len(res), clipAll(res))
	}
	checks := []struct {
		i    int
		want string
	}{
		{0, "over its size cap of 64.0 KB"},
		{1, "Write was not run: the workspace takes"},
		{2, "Edit was not run"},
		{3, "under its size cap again"},
	}
	for _, c := range checks {
		if !strings.Contains(res[c.i], c.want) {
			t.Errorf("result %d = %q, want %q in it", c.i+1, clip(res[c.i]), c.want)
		}
	}
	if strings.Contains(res[4], "not run") || strings.Contains(res[4], "size cap") {
		t.Errorf("the Write after deleting = %q, want it done without a note", res[4])
	}
	if b, err := os.ReadFile(filepath.Join(f.ws, "output", "small.txt")); err != nil || string(b) != "allowed" {
		t.Errorf("output/small.txt = %q, %v; want only the allowed write", b, err)
	}
}

// TestWorkspaceCapBashThatGrows: over the cap, a Bash call that adds
// instead of deleting is the last Bash call that runs.
func TestWorkspaceCapBashThatGrows(t *testing.T) {
	f := newFixture(t, map[string]string{"writer": writer}, func(c *engine.Config) { c.MaxWorkspaceBytes = 100 << 10 })
	f.srv.Script(
		llmtest.Call("Bash", `{"command":"head -c 200000 /dev/zero > output/a"}`),
		llmtest.Call("Bash", `{"command":"head -c 200000 /dev/zero > output/b"}`),
		llmtest.Call("Bash", `{"command":"rm output/a output/b"}`),
		llmtest.Transition("COMPLETE", "done"),
	)
	f.run(f.start("writer", "fill the disk"))
	res := toolResults(f)
	if len(res) != 3 || !strings.Contains(res[0], "over its size cap") || !strings.Contains(res[1], "made it bigger") ||
		!strings.Contains(res[2], "Bash was not run") {
		t.Fatalf("tool results = %q", clipAll(res))
	}
	if _, err := os.Stat(filepath.Join(f.ws, "output", "a")); err != nil {
		t.Errorf("the refused rm ran: %v", err)
	}
}

// TestFreeSpaceFloor: below data_dir's floor (an injected statfs), Write,
// Edit and Bash are refused with a plain reason; Read still runs.
func TestFreeSpaceFloor(t *testing.T) {
	free := int64(10 << 20)
	floor := workspace.NewFloor(workspace.FloorConfig{Dir: t.TempDir(), MinFreeBytes: 1 << 30,
		Statfs: func(string) (int64, error) { return free, nil }})
	f := newFixture(t, map[string]string{"writer": writer}, func(c *engine.Config) { c.Floor = floor })
	if err := os.WriteFile(filepath.Join(f.ws, "input", "a.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.srv.Script(
		llmtest.Call("Write", `{"path":"output/x.txt","content":"x"}`),
		llmtest.Call("Bash", `{"command":"touch output/y.txt"}`),
		llmtest.Call("Read", `{"path":"input/a.txt"}`),
		llmtest.Transition("COMPLETE", "done"),
	)
	f.run(f.start("writer", "write"))
	res := toolResults(f)
	if len(res) != 3 {
		t.Fatalf("tool results = %q", clipAll(res))
	}
	for i, tool := range []string{"Write", "Bash"} {
		if !strings.Contains(res[i], tool+" was not run: the server's disk is almost full (10.0 MB free, under the floor of 1.0 GB)") {
			t.Errorf("result %d = %q, want the floor's refusal", i+1, res[i])
		}
	}
	if !strings.Contains(res[2], "hello") {
		t.Errorf("Read below the floor = %q, want the file", res[2])
	}
	for _, name := range []string{"x.txt", "y.txt"} {
		if _, err := os.Stat(filepath.Join(f.ws, "output", name)); err == nil {
			t.Errorf("output/%s was written below the floor", name)
		}
	}
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func clipAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = clip(s)
	}
	return out
}
