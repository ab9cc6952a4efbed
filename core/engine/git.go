package engine

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/baton-bot/baton/core/sandbox"
)

// Caps of the git excerpt handed to the movement after a git_context one.
const (
	gitStatusBytes = 2000
	gitDiffBytes   = 6000
	// gitCommandTimeout bounds each of the three git commands.
	gitCommandTimeout = 10 * time.Second
)

// Sandbox runs commands over a workspace; *sandbox.Sandbox implements it.
type Sandbox interface {
	// Isolated reports whether commands run inside the sandbox (not on the
	// host); Available says why not.
	Isolated() bool
	Available() (bool, string)
	Command(ctx context.Context, spec sandbox.Spec) (*sandbox.Cmd, error)
}

var _ Sandbox = (*sandbox.Sandbox)(nil)

// gitSection separates the three outputs of gitScript.
const gitSection = "\x00baton-git-section\x00"

// gitScript runs in the sandbox with the workspace bound read-only ($1).
// The workspace and its .git are the agent's to write, so git never reads
// the repository's own configuration (hooks, filter and diff drivers,
// core.worktree, fsmonitor, include.path, sshCommand, …): it runs over a
// fresh git directory in the sandbox's private /tmp holding a minimal
// config (the format version and the object and ref formats, read without
// includes), copies of HEAD, packed-refs and the index, and links to the
// repository's objects and refs. GIT_WORK_TREE names the workspace, and
// the command line turns off hooks, fsmonitor, external diff, textconv and
// the pager; stat checks ignore owners (the sandbox's uid differs from the
// one that wrote the index; the index copy keeps its mtime, which git's
// racy-entry check compares with). The --stat covers the first 100 changed
// files, so that it never reads a whole large tree. Each output is capped with head, which stops
// git on a huge diff.
const gitScript = `set -u
root=$1 t=$2 cs=$3 cd=$4
src=$root/.git
[ -d "$src" ] && [ -f "$src/HEAD" ] || exit 3
g=$(mktemp -d /tmp/git.XXXXXX)
conf() { git config --no-includes --file "$src/config" --get "$1" 2>/dev/null | head -c 100; }
ver=$(conf core.repositoryformatversion); fmt=$(conf extensions.objectformat); refs=$(conf extensions.refstorage)
{
	printf '[core]\n\trepositoryformatversion = %s\n\tbare = false\n' "${ver:-0}"
	[ -z "$fmt$refs" ] || printf '[extensions]\n'
	[ -z "$fmt" ] || printf '\tobjectformat = %s\n' "$fmt"
	[ -z "$refs" ] || printf '\trefstorage = %s\n' "$refs"
} > "$g/config"
for f in HEAD packed-refs index; do
	[ -f "$src/$f" ] && head -c 67108864 "$src/$f" > "$g/$f" && touch -r "$src/$f" "$g/$f"
done
for d in objects refs reftable; do
	[ -d "$src/$d" ] && ln -s "$src/$d" "$g/$d"
done
mkdir -p "$g/refs"
export GIT_DIR=$g GIT_WORK_TREE=$root GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_OPTIONAL_LOCKS=0 GIT_TERMINAL_PROMPT=0 GIT_LITERAL_PATHSPECS=1
set -- -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.untrackedCache=false -c diff.external= \
	-c core.pager=cat -c core.checkStat=minimal -c safe.directory='*' --no-pager
cd "$root"
timeout "$t" git "$@" status --short 2>/dev/null | head -c "$cs"
printf '` + `\0baton-git-section\0` + `'
timeout "$t" git "$@" diff --name-only -z 2>/dev/null | head -z -n 100 |
	timeout "$t" xargs -0 -r git "$@" diff --no-ext-diff --no-textconv --stat -- 2>/dev/null | head -c "$cs"
printf '` + `\0baton-git-section\0` + `'
timeout "$t" git "$@" diff --no-ext-diff --no-textconv 2>/dev/null | head -c "$cd"
exit 0
`

// gitExcerpt returns `git status --short`, `git diff --stat` and a capped
// `git diff` of the workspace, run inside sb, or "" when the workspace is
// not a git repository. Without a working sandbox git is never run: the
// excerpt is a note saying why (unavailable is the note's template, with
// {reason}).
func gitExcerpt(ctx context.Context, sb Sandbox, root string, unavailable string) string {
	if _, err := os.Lstat(filepath.Join(root, ".git")); err != nil {
		return ""
	}
	if sb == nil || !sb.Isolated() {
		reason := "there is no sandbox (tools.bash.sandbox: none)"
		if sb != nil {
			if ok, why := sb.Available(); !ok {
				reason = why
			}
		}
		return strings.ReplaceAll(unavailable, "{reason}", reason)
	}
	out, err := runGit(ctx, sb, root)
	if err != nil {
		return ""
	}
	parts := strings.SplitN(strings.ToValidUTF8(string(out), "\uFFFD"), gitSection, 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	status := capBytes(parts[0], gitStatusBytes)
	stat := capBytes(parts[1], gitStatusBytes)
	diff := capBytes(parts[2], gitDiffBytes)
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

// runGit runs gitScript over root and returns its output (at most the
// three caps plus one byte each).
func runGit(ctx context.Context, sb Sandbox, root string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*gitCommandTimeout+5*time.Second)
	defer cancel()
	secs := strconv.Itoa(int(gitCommandTimeout.Seconds()))
	cmd, err := sb.Command(ctx, sandbox.Spec{
		Argv: []string{"/bin/sh", "-c", gitScript, "git-excerpt", root, secs,
			strconv.Itoa(gitStatusBytes + 1), strconv.Itoa(gitDiffBytes + 1)},
		Dir:   root,
		Binds: []sandbox.Bind{{Path: root}},
		Env:   []string{"PATH=" + sandbox.DefaultPath, "HOME=/tmp", "LANG=C.UTF-8"},
	})
	if err != nil {
		return nil, err
	}
	defer cmd.Close()
	var out bytes.Buffer
	cmd.Stdout = &limitedWriter{w: &out, n: 2*gitStatusBytes + gitDiffBytes + 64}
	cmd.Stderr = io.Discard
	err = cmd.Run()
	cmd.Kill() //nolint:errcheck // children left behind, if any
	if err != nil {
		return nil, fmt.Errorf("git excerpt: %w", err)
	}
	return out.Bytes(), nil
}

// limitedWriter keeps the first n bytes and drops the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n <= 0 {
		return len(p), nil
	}
	k := min(len(p), l.n)
	l.n -= k
	if _, err := l.w.Write(p[:k]); err != nil {
		return 0, err
	}
	return len(p), nil
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
