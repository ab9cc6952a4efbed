package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCompletionScripts: each shell's script names every command and every
// flag of run, offers the built-in pieces for --piece, and is valid for its
// shell (checked with the shell itself where it is installed; bash and fish
// are also asked to complete).
func TestCompletionScripts(t *testing.T) {
	for _, shell := range shells {
		t.Run(shell, func(t *testing.T) {
			code, script, stderr := runMain(t, nil, "completion", shell)
			if code != 0 || stderr != "" {
				t.Fatalf("baton completion %s: exit %d, stderr %q", shell, code, stderr)
			}
			for _, c := range commands {
				if !strings.Contains(script, c.name) {
					t.Errorf("the %s script does not mention %s", shell, c.name)
				}
			}
			for _, w := range []string{"config", "data-dir", "piece", "task", "approve", "deny", "reason", "plan-implement-verify", "research", "waiting_human"} {
				if !strings.Contains(script, w) {
					t.Errorf("the %s script does not mention %s", shell, w)
				}
			}
			bin, err := exec.LookPath(shell)
			if err != nil {
				t.Logf("%s is not installed: its script is not run", shell)
				return
			}
			file := filepath.Join(t.TempDir(), "baton."+shell)
			if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "-n", file).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s", shell, err, out)
			}
			switch shell {
			case "bash":
				for line, want := range map[string]string{
					"baton ru":                    "run",
					"baton run --pi":              "--piece",
					"baton run --piece ":          "chat plan-implement-verify research",
					"baton tasks ":                "list show logs",
					"baton tasks list --state wa": "waiting_human waiting_subtasks waiting_approval",
					"baton completion ":           "bash zsh fish",
				} {
					if got := bashComplete(t, bin, file, line); got != want {
						t.Errorf("bash completes %q to %q, want %q", line, got, want)
					}
				}
			case "fish":
				for line, want := range map[string]string{
					"baton ru":           "run",
					"baton run --piece ": "chat plan-implement-verify research",
					"baton tasks ":       "list logs show",
				} {
					out, err := exec.Command(bin, "--no-config", "-c", "source "+file+"; complete -C '"+line+"'").CombinedOutput()
					if err != nil {
						t.Fatalf("fish: %v\n%s", err, out)
					}
					var words []string
					for l := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
						w, _, _ := strings.Cut(l, "\t")
						words = append(words, w)
					}
					if got := strings.Join(words, " "); got != want {
						t.Errorf("fish completes %q to %q, want %q", line, got, want)
					}
				}
			}
		})
	}
	if code, _, stderr := runMain(t, nil, "completion", "powershell"); code != 2 || !strings.Contains(stderr, "bash, zsh, fish") {
		t.Errorf("baton completion powershell: exit %d, stderr %q", code, stderr)
	}
}

// bashComplete sources the script and asks _baton to complete line.
func bashComplete(t *testing.T, bash, script, line string) string {
	t.Helper()
	words := strings.Fields(line)
	if strings.HasSuffix(line, " ") {
		words = append(words, "")
	}
	var quoted []string
	for _, w := range words {
		quoted = append(quoted, shellQuote(w))
	}
	prog := "source " + shellQuote(script) + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" +
		strconv.Itoa(len(words)-1) + "\n_baton\necho \"${COMPREPLY[*]}\"\n"
	out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}
