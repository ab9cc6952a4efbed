package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core/sandbox"

	"github.com/baton-bot/baton/core/sandbox/sandboxtest"
)

const secret = "SECRET-8d1f0c"

// gitSandbox is a working sandbox, or the test skips (fails under
// BATON_REQUIRE_BWRAP=1).
func gitSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	sb, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Bwrap})
	if err != nil {
		if os.Getenv("BATON_REQUIRE_BWRAP") != "1" {
			t.Skipf("bubblewrap does not work here: %v", err)
		}
		t.Fatal(err)
	}
	return sb
}

// gitRepo makes a workspace holding a repository with output/notes.txt
// committed and then changed, and an outside directory (a host directory
// the agent must not reach) with a script that leaves a marker when run
// and a tree holding the secret.
func gitRepo(t *testing.T) (ws, outside string) {
	t.Helper()
	base := sandboxtest.Dir(t)
	ws, outside = filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{ws + "/output", outside + "/tree/output"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(outside, "tree/output/notes.txt"), secret+"\n", 0o644)
	write(t, filepath.Join(outside, "run.sh"), "#!/bin/sh\ntouch "+outside+"/ran-\"$(basename \"$0\")\"\ncat\n", 0o755)
	for _, name := range []string{"post-index-change", "clean", "fsmonitor", "external"} {
		os.Symlink(filepath.Join(outside, "run.sh"), filepath.Join(outside, name))
	}
	git(t, ws, "init", "-q")
	write(t, filepath.Join(ws, "output/notes.txt"), "old line\n", 0o644)
	git(t, ws, "add", "output/notes.txt")
	git(t, ws, "commit", "-q", "-m", "start")
	write(t, filepath.Join(ws, "output/notes.txt"), "new line, longer\n", 0o644)
	return ws, outside
}

func write(t testing.TB, p, s string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), mode); err != nil {
		t.Fatal(err)
	}
}

func git(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// TestGitExcerptRunsNothingOutside plants in the repository what made a
// host-side git run the agent's programs or read host files: none of them
// runs (no marker appears outside) and nothing outside is read (the
// secret is not in the excerpt), while the excerpt still shows the change.
func TestGitExcerptRunsNothingOutside(t *testing.T) {
	sb := gitSandbox(t)
	attacks := []struct {
		name   string
		plant  func(t *testing.T, ws, outside string)
		marker string // a file outside that must not appear; "" for none
	}{
		{"post-index-change hook", func(t *testing.T, ws, outside string) {
			write(t, filepath.Join(ws, ".git/hooks/post-index-change"), "#!/bin/sh\ntouch "+outside+"/ran-hook\n", 0o755)
		}, "ran-hook"},
		{"core.hooksPath", func(t *testing.T, ws, outside string) {
			git(t, ws, "config", "core.hooksPath", outside)
		}, "ran-post-index-change"},
		{"clean filter", func(t *testing.T, ws, outside string) {
			write(t, filepath.Join(ws, ".gitattributes"), "* filter=evil\n", 0o644)
			git(t, ws, "config", "filter.evil.clean", filepath.Join(outside, "clean"))
			git(t, ws, "config", "filter.evil.smudge", filepath.Join(outside, "clean"))
		}, "ran-clean"},
		{"core.fsmonitor", func(t *testing.T, ws, outside string) {
			git(t, ws, "config", "core.fsmonitor", filepath.Join(outside, "fsmonitor"))
		}, "ran-fsmonitor"},
		{"diff.external", func(t *testing.T, ws, outside string) {
			git(t, ws, "config", "diff.external", filepath.Join(outside, "external"))
		}, "ran-external"},
		{"core.worktree to a host directory", func(t *testing.T, ws, outside string) {
			git(t, ws, "config", "core.worktree", filepath.Join(outside, "tree"))
		}, ""},
		{"include.path to a host file", func(t *testing.T, ws, outside string) {
			write(t, filepath.Join(outside, "evil.config"), "[core]\n\tworktree = "+filepath.Join(outside, "tree")+"\n"+
				"[filter \"evil\"]\n\tclean = "+filepath.Join(outside, "clean")+"\n", 0o644)
			write(t, filepath.Join(ws, ".gitattributes"), "* filter=evil\n", 0o644)
			git(t, ws, "config", "include.path", filepath.Join(outside, "evil.config"))
		}, "ran-clean"},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			ws, outside := gitRepo(t)
			a.plant(t, ws, outside)
			got := gitExcerpt(context.Background(), sb, ws, "unavailable: {reason}")
			if strings.Contains(got, secret) {
				t.Errorf("a host file was read into the excerpt:\n%s", got)
			}
			markers, _ := filepath.Glob(filepath.Join(outside, "ran-*"))
			if len(markers) > 0 {
				t.Errorf("the repository ran a program: %v", markers)
			}
			for _, want := range []string{" M output/notes.txt", "-old line", "+new line, longer"} {
				if !strings.Contains(got, want) {
					t.Errorf("excerpt lacks %q:\n%s", want, got)
				}
			}
		})
	}
}

// TestGitExcerptWithoutSandbox: git is never run unsandboxed; the excerpt
// is a note saying why.
func TestGitExcerptWithoutSandbox(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	none, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.None})
	if err != nil {
		t.Fatal(err)
	}
	broken, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Auto, BwrapPath: "/bin/false"})
	if err != nil {
		t.Fatal(err)
	}
	for name, sb := range map[string]Sandbox{"none": none, "probe failed": broken, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			ws, outside := gitRepo(t)
			write(t, filepath.Join(ws, ".git/hooks/post-index-change"), "#!/bin/sh\ntouch "+outside+"/ran-hook\n", 0o755)
			got := gitExcerpt(context.Background(), sb, ws, "(git context unavailable: {reason}.)")
			if !strings.HasPrefix(got, "(git context unavailable: ") || strings.Contains(got, "output/notes.txt") {
				t.Errorf("excerpt %q", got)
			}
			if m, _ := filepath.Glob(filepath.Join(outside, "ran-*")); len(m) > 0 {
				t.Errorf("git ran: %v", m)
			}
		})
	}
}

// TestGitExcerptLargeRepository: 100,000 changed files stay within the
// commands' timeouts (every section has output) and the caps.
func TestGitExcerptLargeRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100,000 files")
	}
	sb := gitSandbox(t)
	// In memory where the host has it: the test measures git, not how fast
	// this disk creates 200,000 files.
	base := sandboxtest.Dir(t)
	if dir, err := os.MkdirTemp("/dev/shm", "baton-git-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		base = dir
	}
	ws := filepath.Join(base, "ws")
	for i := range 100 {
		d := filepath.Join(ws, fmt.Sprintf("d%02d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := range 1000 {
			write(t, filepath.Join(d, fmt.Sprintf("f%03d.txt", j)), "old\n", 0o644)
		}
	}
	git(t, ws, "init", "-q")
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-q", "-m", "start")
	for i := range 100 {
		for j := range 1000 {
			write(t, filepath.Join(ws, fmt.Sprintf("d%02d/f%03d.txt", i, j)), "new and longer\n", 0o644)
		}
	}
	got := gitExcerpt(context.Background(), sb, ws, "unavailable: {reason}")
	for _, want := range []string{"git status --short:\n```\n M d00/f000.txt", "git diff --stat:", "+new and longer", "(cut; run git in Bash for the rest)"} {
		if !strings.Contains(got, want) {
			t.Errorf("excerpt lacks %q:\n%.500s", want, got)
		}
	}
	if max := 2*gitStatusBytes + gitDiffBytes + 400; len(got) > max {
		t.Errorf("excerpt is %d bytes, cap %d", len(got), max)
	}
}
