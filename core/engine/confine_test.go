package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
)

// TestEngineRecordsStayInLogs plants symlinks where the engine keeps its
// records (the movement logs, lessons.jsonl, checklists, Bash's kept
// output, the saved request, logs/ itself) and runs a job that writes all
// of them: nothing outside the workspace is written, and the job still
// finishes.
func TestEngineRecordsStayInLogs(t *testing.T) {
	tests := []struct {
		name  string
		links map[string]string // workspace path → target; "@" stands for the outside folder
	}{
		{"inside logs/", map[string]string{
			"logs/movements":     "@",
			"logs/lessons.jsonl": "@/lessons.jsonl",
			"logs/checklists":    "@",
			"logs/bash":          "@",
		}},
		{"logs/ itself", map[string]string{"logs": "@"}},
		{"logs/ to output/", map[string]string{"logs": "output"}},
		{"input/", map[string]string{"input": "@"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			outside := filepath.Join(t.TempDir(), "outside")
			if err := os.Mkdir(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			for rel, target := range tt.links {
				p := filepath.Join(f.ws, rel)
				if err := os.RemoveAll(p); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(strings.Replace(target, "@", outside, 1), p); err != nil {
					t.Fatal(err)
				}
			}
			f.srv.Script(
				llmtest.Calls(
					llmtest.Call("Checklist", `{"action":"set","name":"plan","items":["one"]}`),
					llmtest.Call("Bash", `{"command":"seq 1 200000"}`), // long enough to be kept
				),
				llmtest.Transition("COMPLETE", "done", "lessons", "a lesson"),
			)
			fin := f.run(f.start("chat", strings.Repeat("long request ", 1000)))
			if fin.To != core.JobSucceeded {
				t.Errorf("job ended %s (%s), want succeeded", fin.To, fin.Error)
			}
			if entries, _ := os.ReadDir(outside); len(entries) > 0 {
				t.Errorf("written outside the workspace: %s and %d more", entries[0].Name(), len(entries)-1)
			}
			if entries, _ := os.ReadDir(filepath.Join(f.ws, "output")); len(entries) > 0 && tt.name == "logs/ to output/" {
				t.Errorf("engine records written into output/: %s", entries[0].Name())
			}
		})
	}
}
