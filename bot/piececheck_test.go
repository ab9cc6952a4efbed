package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMainBrokenPiecesDir: a piece file in pieces_dir that does not load is
// a configuration error (exit 2) naming the file and line, told before the
// store, workspaces/ or the sandbox's probe are created under data_dir;
// `pieces validate` on a bad piece is exit 2 too.
func TestMainBrokenPiecesDir(t *testing.T) {
	pieces := t.TempDir()
	bad := filepath.Join(pieces, "broken.yaml")
	if err := os.WriteFile(bad, []byte("name: broken\nmovements:\n  - name: one\n    instruction: Go.\n    tools: [Teleport]\n    next: [COMPLETE]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "log:\n  level: warn\npieces_dir: "+pieces+"\n")
	for _, args := range [][]string{
		{"run", "--config", cfg, "say hi"},
		{"chat", "--config", cfg},
		{"serve", "--config", cfg},
		{"pieces", "list", "--config", cfg},
		{"pieces", "validate", "--config", cfg},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			data := t.TempDir()
			code, _, stderr := runMain(t, map[string]string{"BATON_DATA_DIR": data, "OPENAI_API_KEY": "sk-test-key"}, args...)
			if code != 2 || !strings.Contains(stderr, bad+":5") || !strings.Contains(stderr, "Teleport") {
				t.Errorf("baton %s: exit %d, want 2 naming %s:5 and the tool\nstderr: %s", args[0], code, bad, stderr)
			}
			for _, name := range []string{"baton.db", "workspaces"} {
				if _, err := os.Stat(filepath.Join(data, name)); !os.IsNotExist(err) {
					t.Errorf("baton %s created %s before refusing the pieces (%v)", args[0], name, err)
				}
			}
		})
	}
	good := filepath.Join(t.TempDir(), "fine.yaml")
	if err := os.WriteFile(good, []byte("name: fine\nmovements:\n  - name: one\n    instruction: Go.\n    next: [COMPLETE]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	quiet := writeConfig(t, "log:\n  level: warn\n")
	env := map[string]string{"BATON_DATA_DIR": t.TempDir()}
	if code, stdout, stderr := runMain(t, env, "pieces", "validate", "--config", quiet, good); code != 0 || !strings.Contains(stdout, "1 pieces valid") {
		t.Errorf("pieces validate of a good file: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := runMain(t, env, "pieces", "validate", good, "--config", quiet, bad); code != 2 || !strings.Contains(stderr, bad+":5") {
		t.Errorf("pieces validate of a bad file, flags between the files: exit %d\n%s", code, stderr)
	}
}
