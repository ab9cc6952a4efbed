package engine

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Caps of the git excerpt handed to the movement after a git_context one.
const (
	gitStatusBytes = 2000
	gitDiffBytes   = 6000
)

// gitExcerpt returns `git status --short`, `git diff --stat` and a capped
// `git diff` of the workspace, or "" when it is not a git repository.
//
// The workspace and its .git are the agent's to write, so git runs with
// every hook into configured programs turned off: no fsmonitor, no external
// diff, no textconv, no pager, no global or system configuration.
func gitExcerpt(ctx context.Context, root string) string {
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		return ""
	}
	run := func(args ...string) string {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		base := []string{"-C", root, "-c", "core.fsmonitor=false", "-c", "core.pager=cat", "-c", "diff.external=", "-c", "safe.directory=*", "--no-pager"}
		cmd := exec.CommandContext(ctx, "git", append(base, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0", "LANG=C.UTF-8"}
		var out bytes.Buffer
		cmd.Stdout = &out
		if err := cmd.Run(); err != nil {
			return ""
		}
		return out.String()
	}
	status := capBytes(run("status", "--short"), gitStatusBytes)
	stat := capBytes(run("diff", "--no-ext-diff", "--no-textconv", "--stat"), gitStatusBytes)
	diff := capBytes(run("diff", "--no-ext-diff", "--no-textconv"), gitDiffBytes)
	if strings.TrimSpace(status+stat+diff) == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("git status --short:\n```\n" + strings.TrimRight(status, "\n") + "\n```")
	if stat != "" {
		b.WriteString("\ngit diff --stat:\n```\n" + strings.TrimRight(stat, "\n") + "\n```")
	}
	if diff != "" {
		b.WriteString("\ngit diff:\n```diff\n" + strings.TrimRight(diff, "\n") + "\n```")
	}
	return b.String()
}

// capBytes cuts s at n bytes on a line boundary, marking the cut.
func capBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := s[:n]
	if i := strings.LastIndexByte(cut, '\n'); i > 0 {
		cut = cut[:i+1]
	}
	return cut + "… (cut; run git in Bash for the rest)\n"
}
