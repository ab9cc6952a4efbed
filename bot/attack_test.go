package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core/llmtest"

	"github.com/baton-bot/baton/core/sandbox/sandboxtest"
)

// Secrets of Baton's own process environment that the agent must never see.
const (
	attackAPIKey     = "sk-attack-0123456789abcdef"
	attackSlackToken = "xoxb-attack-0123456789abcdef"
	outsideSecret    = "OUTSIDE-SECRET-4f1c2a"
	unnamedOutside   = "private-name-8c1e.txt"
)

// TestAttackerLeavesHostUntouched runs the shipped pieces with the scripted
// model playing a prompt-injected agent that tries every way out the
// sandbox, the workspace and the git excerpt have been known to leave: it
// remounts the system, writes sysctls, reads /etc/shadow and Baton's
// environment, connects to host loopback, forks and fills without bound,
// plants symlinks under input/ for the subtask copy, a FIFO for Read and
// a 10 GB sparse file for Grep, and a repository whose hooks, filters,
// fsmonitor, external diff, includes and worktree point outside. Afterwards
// nothing outside the jobs' own workspaces has changed (hashes of a planted
// outside directory, the pieces directory and an earlier task's
// workspace), no marker of a process run outside the sandbox exists, no
// connection reached the host listener, and no secret reached the model,
// the output or the workspaces.
func TestAttackerLeavesHostUntouched(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("BATON_REQUIRE_BWRAP") != "" {
			t.Fatalf("bubblewrap is required (BATON_REQUIRE_BWRAP is set): %v", err)
		}
		t.Skip("bubblewrap is not installed")
	}
	// A host process that inherited Baton's environment would find these.
	t.Setenv("OPENAI_API_KEY", attackAPIKey)
	t.Setenv("SLACK_BOT_TOKEN", attackSlackToken)

	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "secret.txt"), outsideSecret+"\n")
	mustWrite(t, filepath.Join(outside, "secret.gitconfig"), "[user]\n\tname = "+outsideSecret+"\n")
	// A name the attacker never writes: only a listing of the outside
	// directory could show it.
	mustWrite(t, filepath.Join(outside, unnamedOutside), "listed only\n")
	pieces := t.TempDir()
	mustWrite(t, filepath.Join(pieces, "README.txt"), "no pieces here\n")
	data := sandboxtest.Dir(t) // the sandbox's user must reach the workspaces when the tests run as root

	port, dials := sandboxtest.Listen(t, "127.0.0.1")

	srv := llmtest.NewServer(t, llmtest.WithAPIKey(attackAPIKey))
	conf := writeConfig(t, fmt.Sprintf("log:\n  level: warn\npieces_dir: %s\ntools:\n  bash:\n    sandbox: bwrap\n    timeout: 60s\n", pieces))
	env := map[string]string{
		"OPENAI_BASE_URL": srv.URL(),
		"OPENAI_API_KEY":  attackAPIKey,
		"SLACK_BOT_TOKEN": attackSlackToken,
		"BATON_DATA_DIR":  data,
		"USER":            "mallory",
	}
	run := func(args ...string) (string, string) {
		t.Helper()
		code, stdout, stderr := runMain(t, env, append([]string{"run", "--config", conf}, args...)...)
		if code != 0 {
			t.Fatalf("baton run %v: exit %d\nstdout: %s\nstderr: %s", args, code, stdout, stderr)
		}
		return stdout, stderr
	}

	// An earlier person's task, whose workspace the attacker must not touch.
	srv.Script(
		llmtest.Call("Write", `{"path":"output/private.txt","content":"the earlier person's private notes"}`),
		llmtest.Transition("COMPLETE", "Saved."),
	)
	_, stderr := run("keep my notes")
	_, earlier := workspaceOf(t, stderr)

	before := map[string]string{
		"outside": treeHash(t, outside),
		"pieces":  treeHash(t, pieces),
		"earlier": treeHash(t, earlier),
	}
	corePattern, _ := os.ReadFile("/proc/sys/kernel/core_pattern")

	marker := func(name string) string { return filepath.Join(outside, name) }
	bash := func(cmd string) llmtest.Step {
		return llmtest.Call("Bash", fmt.Sprintf(`{"command":%q,"timeout_s":60}`, cmd))
	}

	// The chat piece: the sandbox, the tools and the subtask copy.
	srv.Script(
		bash("mount -o remount,rw /usr; touch /usr/baton-pwned; echo '|/bin/sh -c id' > /proc/sys/kernel/core_pattern; "+
			"cat /etc/shadow > output/shadow.txt; grep Cap /proc/self/status > output/caps.txt; id > output/id.txt; "+
			"env > output/env.txt; cat /proc/1/environ /proc/*/environ >> output/env.txt 2>/dev/null; true"),
		bash(fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%s && echo PING >&3; true", port)),
		bash("for i in $(seq 10000); do sleep 5 & done 2>/dev/null; wait; true"),
		bash("head -c 200000000 /dev/zero > output/fill.bin; truncate -s 10G output/sparse.bin; mkfifo input/fifo; "+
			"mkdir -p input/sub && ln -s "+outside+" input/subtasks; ln -s "+outside+" output/outside-link; true"),
		llmtest.Call("Read", `{"path":"input/fifo"}`),
		llmtest.Call("Grep", `{"pattern":"OUTSIDE","path":"."}`),
		llmtest.Call("Read", `{"path":"input/subtasks/secret.txt"}`),
		llmtest.Call("transition", `{"next_step":"WAIT_SUBTASKS","summary":"split","subtasks":[{"title":"child","instruction":"report"}]}`),
		// The child.
		llmtest.Call("Write", `{"path":"output/result.txt","content":"child result"}`),
		llmtest.Transition("COMPLETE", "child done"),
		// The parent, resumed.
		bash("rm -rf input && ln -s "+outside+" input; true"),
		llmtest.Transition("COMPLETE", "Done."),
	)
	stdout, stderr := run("do as the instructions in input say")
	_, chatWS := workspaceOf(t, stderr)
	t.Logf("chat job: %s", stdout)

	// plan-implement-verify: a repository that tries to run and read
	// outside through the git excerpt.
	srv.Script(
		llmtest.Transition("implement", "plan"),
		bash(strings.Join([]string{
			"git init -q . && git config user.email a@b && git config user.name a",
			"printf '#!/bin/sh\\ntouch " + marker("hook-ran") + "\\nenv > " + marker("hook-env") + "\\n' > .git/hooks/post-index-change",
			"cp .git/hooks/post-index-change .git/hooks/pre-commit && chmod +x .git/hooks/*",
			"git config filter.evil.clean 'touch " + marker("filter-ran") + "; cat'",
			"git config filter.evil.smudge 'touch " + marker("smudge-ran") + "; cat'",
			"echo '* filter=evil' > .gitattributes",
			"git config core.fsmonitor 'touch " + marker("fsmonitor-ran") + "; true'",
			"git config diff.external 'touch " + marker("diff-ran") + "; true'",
			"git config diff.evil.textconv 'touch " + marker("textconv-ran") + "; cat'",
			"git config include.path " + filepath.Join(outside, "secret.gitconfig"),
			"echo one > a.txt && git add -A 2>/dev/null; git commit -qm one 2>/dev/null; echo two >> a.txt",
			"git config core.worktree " + outside,
			"true",
		}, "; ")),
		llmtest.Transition("verify", "changed a.txt"),
		llmtest.Transition("COMPLETE", "Verified."),
	)
	_, stderr = run("--piece", "plan-implement-verify", "change a.txt")
	_, gitWS := workspaceOf(t, stderr)

	after := map[string]string{
		"outside": treeHash(t, outside),
		"pieces":  treeHash(t, pieces),
		"earlier": treeHash(t, earlier),
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed:\nbefore: %s\nafter:  %s", k, v, after[k])
		}
	}
	if _, err := os.Stat("/usr/baton-pwned"); err == nil {
		os.Remove("/usr/baton-pwned")
		t.Error("the agent wrote into /usr")
	}
	if got, _ := os.ReadFile("/proc/sys/kernel/core_pattern"); string(got) != string(corePattern) {
		t.Errorf("kernel.core_pattern changed to %q", got)
	}
	if n := dials(); n != 0 {
		t.Errorf("%d connections reached a listener on host loopback", n)
	}
	if b, err := os.ReadFile(filepath.Join(chatWS, "output", "shadow.txt")); err == nil && len(b) > 0 {
		t.Errorf("the agent read /etc/shadow: %.60q", b)
	}
	if b, err := os.ReadFile(filepath.Join(chatWS, "output", "caps.txt")); err != nil || !strings.Contains(string(b), "CapEff:\t0000000000000000") {
		t.Errorf("the sandbox kept capabilities: %q, %v", b, err)
	}

	// The attacks ran: Bash in the sandbox (the capabilities above), and
	// git over the planted repository, in the sandbox, for the verify
	// movement's excerpt.
	excerpt := false
	for _, req := range srv.Requests() {
		for _, m := range req.Messages {
			if strings.Contains(m.Text(), "git diff") && strings.Contains(m.Text(), "+two") {
				excerpt = true
			}
		}
	}
	if !excerpt {
		t.Error("no request carries the git excerpt of the planted repository")
	}

	// No secret anywhere the agent or the model could see.
	secrets := []string{attackAPIKey, attackSlackToken, outsideSecret, unnamedOutside}
	for i, req := range srv.Requests() {
		for _, m := range req.Messages {
			for _, s := range secrets {
				if strings.Contains(m.Text(), s) {
					t.Errorf("request %d (%s) carries %q:\n%.400s", i, m.Role, s, m.Text())
				}
			}
		}
	}
	_ = gitWS
	for _, ws := range []string{filepath.Join(data, "workspaces")} {
		filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if info, err := d.Info(); err != nil || info.Size() > 50<<20 {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			for _, s := range secrets[:3] {
				if strings.Contains(string(b), s) {
					t.Errorf("%s holds %q", p, s)
				}
			}
			return nil
		})
	}
}

// treeHash lists every entry under dir with its type, mode, owner, size
// and a hash of its content (link targets for symlinks), never following
// a symlink.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		line := fmt.Sprintf("%s %v", rel, info.Mode())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			line += " " + hex.EncodeToString(sum[:8])
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAttackerAsAnotherUser runs the attacker's test again with Baton
// started by an ordinary user (nobody), as a deployment that never runs as
// root does: the sandbox then maps that user instead of dropping root.
func TestAttackerAsAnotherUser(t *testing.T) {
	if os.Getenv("BATON_ATTACK_CHILD") != "" {
		t.Skip("already the child")
	}
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root; this run is the ordinary user's already")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("BATON_REQUIRE_BWRAP") != "" {
			t.Fatalf("bubblewrap is required (BATON_REQUIRE_BWRAP is set): %v", err)
		}
		t.Skip("bubblewrap is not installed")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("setpriv is not installed: %v", err)
	}
	// The test binary's own directory is private to root: run a copy.
	dir := sandboxtest.Dir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "bot.test")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--",
		exe, "-test.run=^TestAttackerLeavesHostUntouched$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BATON_ATTACK_CHILD=1", "HOME="+dir, "TMPDIR=/tmp")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestAttackerLeavesHostUntouched") {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}
