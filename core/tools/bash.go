package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Sandbox modes for BashConfig.Sandbox.
const (
	SandboxAuto  = "auto"
	SandboxBwrap = "bwrap"
	SandboxNone  = "none"
)

// Bash limits.
const (
	DefaultBashTimeout = 120 * time.Second
	MaxBashTimeout     = 600 * time.Second
	// DefaultKeptBytes caps the copy of a command's output kept under
	// logs/bash/ (plus the last captureTail bytes).
	DefaultKeptBytes = 10 << 20
	// captureHead and captureTail bound what is held in memory while a
	// command runs: its first and last bytes.
	captureHead = 192 << 10
	captureTail = 192 << 10
	// waitDelay bounds how long Wait waits for a process that ignores the
	// kill, and how long output is drained once the command has exited.
	waitDelay = 2 * time.Second
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// BashConfig configures the Bash tool. Zero values take the defaults.
type BashConfig struct {
	// Sandbox is "auto" (default: bubblewrap when it works here, else the
	// tool is disabled), "bwrap" (NewBash fails when bubblewrap does not
	// work) or "none" (no sandbox: only when an operator writes it).
	Sandbox string
	// Timeout applies to calls without timeout_s (default 120 s); calls
	// are capped at MaxBashTimeout.
	Timeout time.Duration
	// BwrapPath is the bubblewrap binary (default "bwrap" from PATH).
	BwrapPath string
	// BashPath is the shell (default "bash" from PATH).
	BashPath string
	// Path and Lang are the PATH and LANG commands see (defaults: the usual
	// system directories, C.UTF-8). Nothing else of Baton's environment
	// reaches a command.
	Path string
	Lang string
	// KeptBytes caps the output copy kept under logs/bash/ (default 10 MB).
	KeptBytes int64
	Logger    *slog.Logger
}

// Bash runs `bash -c` in the task's workspace: in its own process group
// killed on timeout and on cancellation, with a scrubbed environment, inside
// a bubblewrap sandbox (read-only system, writable workspace except logs/,
// private /tmp, no network unless Env.Network). Output is held in memory as
// head and tail only; a copy capped at KeptBytes is kept under logs/bash/
// when the result had to be cut. Safe for concurrent use.
type Bash struct {
	cfg      BashConfig
	bash     string // absolute path of the shell
	bwrap    string // absolute path of bubblewrap; "" when unsandboxed
	disabled string // why the tool is unavailable; "" when available
	log      *slog.Logger
	seq      atomic.Int64
}

var _ Tool = (*Bash)(nil)

// NewBash checks the shell and, unless Sandbox is "none", probes once that
// bubblewrap works here. In "auto" mode a failed probe disables the tool
// (Available reports why) instead of failing; in "bwrap" mode it is an
// error.
//
// Probing as root: bubblewrap 0.8 runs as root without a setuid helper, and
// --unshare-all (which includes --unshare-user-try) works there as it does
// for ordinary users with unprivileged user namespaces. Inside a container
// without user namespaces or CAP_SYS_ADMIN the probe fails and "auto"
// disables Bash.
func NewBash(cfg BashConfig) (*Bash, error) {
	if cfg.Sandbox == "" {
		cfg.Sandbox = SandboxAuto
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultBashTimeout
	}
	cfg.Timeout = min(cfg.Timeout, MaxBashTimeout)
	if cfg.BwrapPath == "" {
		cfg.BwrapPath = "bwrap"
	}
	if cfg.BashPath == "" {
		cfg.BashPath = "bash"
	}
	if cfg.Path == "" {
		cfg.Path = defaultPath
	}
	if cfg.Lang == "" {
		cfg.Lang = "C.UTF-8"
	}
	if cfg.KeptBytes <= 0 {
		cfg.KeptBytes = DefaultKeptBytes
	}
	b := &Bash{cfg: cfg, log: cfg.Logger}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.log = b.log.With("tool", "Bash")
	sh, err := exec.LookPath(cfg.BashPath)
	if err != nil {
		return nil, fmt.Errorf("bash tool: shell %s: %w", cfg.BashPath, err)
	}
	b.bash = sh
	switch cfg.Sandbox {
	case SandboxNone:
		b.log.Warn("Bash runs without a sandbox (tools.bash.sandbox: none): commands can read and write anything Baton can")
		return b, nil
	case SandboxAuto, SandboxBwrap:
	default:
		return nil, fmt.Errorf("bash tool: sandbox %q: want auto, bwrap or none", cfg.Sandbox)
	}
	if err := b.probe(); err != nil {
		if cfg.Sandbox == SandboxBwrap {
			return nil, fmt.Errorf("bash tool: sandbox bwrap: %w", err)
		}
		b.disabled = fmt.Sprintf("the Bash tool is disabled because the bubblewrap sandbox does not work on this host (%v); "+
			"an operator can install bubblewrap or set tools.bash.sandbox", err)
		b.log.Warn("Bash disabled: bubblewrap does not work here", "err", err)
	}
	return b, nil
}

func (b *Bash) probe() error {
	bw, err := exec.LookPath(b.cfg.BwrapPath)
	if err != nil {
		return fmt.Errorf("bubblewrap not found: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := append(systemBinds(), "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
		"--setenv", "PATH", b.cfg.Path, "--", b.bash, "-c", "true")
	cmd := exec.CommandContext(ctx, bw, args...)
	cmd.Env = []string{"PATH=" + b.cfg.Path}
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 300 {
			msg = msg[:300]
		}
		if msg != "" {
			return fmt.Errorf("%s: %w: %s", bw, err, msg)
		}
		return fmt.Errorf("%s: %w", bw, err)
	}
	b.bwrap = bw
	return nil
}

// systemBinds makes the system visible read-only inside the sandbox: the
// usual directories, not the whole root, so that other workspaces, Baton's
// data directory and home directories stay out of sight. The order matters:
// the fresh /tmp comes before any workspace bind, which may live under /tmp.
func systemBinds() []string {
	args := []string{"--ro-bind", "/usr", "/usr"}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"} {
		args = append(args, "--ro-bind-try", d, d)
	}
	return append(args, "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")
}

// Available reports whether the tool can run commands, and if not, why.
func (b *Bash) Available() (bool, string) {
	return b.disabled == "", b.disabled
}

// Sandboxed reports whether commands run inside bubblewrap.
func (b *Bash) Sandboxed() bool { return b.bwrap != "" }

// Name implements Tool.
func (*Bash) Name() string { return "Bash" }

// Description implements Tool.
func (b *Bash) Description() string {
	return fmt.Sprintf("Run a shell command with `bash -c` in the workspace folder (input/, output/, logs/). "+
		"stdout and stderr are combined; long output keeps its beginning and end, and the full output is "+
		"kept under logs/bash/. Prefer narrowing output with head, tail, grep, awk or sed, or redirect it to "+
		"a file and Read or Grep that. logs/ is read-only. Timeout: %d s by default, at most %d s (timeout_s).",
		int(b.cfg.Timeout.Seconds()), int(MaxBashTimeout.Seconds()))
}

// Schema implements Tool.
func (*Bash) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"command":{"type":"string","description":"the command line, run with bash -c"},` +
		`"timeout_s":{"type":"integer","minimum":1,"maximum":600,"description":"seconds before the command is killed"}},` +
		`"required":["command"],"additionalProperties":false}`)
}

type bashArgs struct {
	Command  string `json:"command"`
	TimeoutS int    `json:"timeout_s"`
}

// Call implements Tool.
func (b *Bash) Call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	if b.disabled != "" {
		return Errorf("Bash: %s", b.disabled)
	}
	var a bashArgs
	if err := decode(raw, &a); err != nil {
		return failure(b.Name(), err)
	}
	if strings.TrimSpace(a.Command) == "" {
		return Errorf("Bash: command is required")
	}
	if a.TimeoutS < 0 {
		return Errorf("Bash: timeout_s must be positive")
	}
	res, err := b.run(ctx, env, a)
	if err != nil {
		return failure(b.Name(), err)
	}
	return res
}

func (b *Bash) run(ctx context.Context, env *Env, a bashArgs) (Result, error) {
	timeout := b.cfg.Timeout
	var notes []string
	if a.TimeoutS > 0 {
		timeout = time.Duration(a.TimeoutS) * time.Second
	}
	if timeout > MaxBashTimeout {
		notes = append(notes, fmt.Sprintf("[timeout_s %d lowered to the maximum, %d]", a.TimeoutS, int(MaxBashTimeout.Seconds())))
		timeout = MaxBashTimeout
	}
	root := env.WS.Root()
	tmp := filepath.Join(root, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return Result{}, fmt.Errorf("create tmp: %w", err)
	}
	logPath := fmt.Sprintf("logs/bash/%s-%d.log", time.Now().UTC().Format("20060102T150405"), b.seq.Add(1))
	logFile, err := env.WS.OpenLog(logPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return Result{}, fmt.Errorf("create output copy: %w", err)
	}
	capt := &capture{log: logFile, logMax: b.cfg.KeptBytes}

	environ := []string{"PATH=" + b.cfg.Path, "HOME=" + root, "LANG=" + b.cfg.Lang, "TMPDIR=" + tmp}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var cmd *exec.Cmd
	if b.bwrap != "" {
		args := systemBinds()
		args = append(args,
			"--bind", root, root,
			"--ro-bind", filepath.Join(root, "logs"), filepath.Join(root, "logs"),
			"--unshare-all")
		if env.Network {
			args = append(args, "--share-net")
		}
		args = append(args, "--die-with-parent", "--new-session", "--chdir", root, "--clearenv")
		for _, kv := range environ {
			k, v, _ := strings.Cut(kv, "=")
			args = append(args, "--setenv", k, v)
		}
		args = append(args, "--", b.bash, "-c", a.Command)
		cmd = exec.CommandContext(tctx, b.bwrap, args...)
	} else {
		cmd = exec.CommandContext(tctx, b.bash, "-c", a.Command)
	}
	cmd.Dir = root
	cmd.Env = environ
	// Own process group, killed as a whole: a command's children die with
	// it. (In the sandbox, killing bubblewrap ends its PID namespace.)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = waitDelay
	// A pipe of our own rather than exec's: Wait then returns when the
	// shell exits even if a background child still holds the pipe, and the
	// group is killed before draining.
	pr, pw, err := os.Pipe()
	if err != nil {
		logFile.Close()
		return Result{}, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	if err := cmd.Start(); err != nil {
		pw.Close()
		pr.Close()
		logFile.Close()
		env.WS.RemoveLog(logPath)
		return Result{}, fmt.Errorf("start: %w", err)
	}
	pw.Close()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(capt, pr) //nolint:errcheck // ends at EOF or the read deadline
	}()
	waitErr := cmd.Wait()
	killGroup(cmd) // background children left behind
	select {
	case <-copied:
	case <-time.After(waitDelay):
		pr.SetReadDeadline(time.Now()) // a process escaped the group and holds the pipe
		<-copied
	}
	pr.Close()
	elapsed := time.Since(start)

	var status string
	isErr := false
	switch {
	case ctx.Err() != nil:
		status = "[cancelled: the command and its children were killed]"
		isErr = true
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		status = fmt.Sprintf("[timed out after %s: the command and its children were killed; give a larger timeout_s (max %d) or run less at once]",
			timeout, int(MaxBashTimeout.Seconds()))
		isErr = true
	case cmd.ProcessState != nil && cmd.ProcessState.Exited():
		status = fmt.Sprintf("[exit code %d]", cmd.ProcessState.ExitCode())
	default:
		status = fmt.Sprintf("[ended abnormally: %v]", waitErr)
		isErr = true
	}
	b.log.Debug("command finished", "elapsed", elapsed, "bytes", capt.total, "status", status, "sandboxed", b.bwrap != "")

	text, cut := capt.result(env, status, notes, logPath)
	capt.finish()
	if !cut {
		env.WS.RemoveLog(logPath) // everything is in the result
	}
	return Result{Text: text, IsError: isErr}, nil
}

// killGroup sends SIGKILL to the command's process group.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// capture holds a command's output as its first captureHead bytes and a ring
// of its last captureTail bytes, and streams the first logMax bytes to log.
// Its Write is called from one goroutine.
type capture struct {
	head   []byte
	ring   []byte // captureTail bytes once allocated
	pos    int    // next write position in ring
	filled bool   // ring wrapped at least once
	total  int64

	log    *os.File
	logged int64
	logMax int64
	logErr error
}

func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	if c.log != nil && c.logErr == nil && c.logged < c.logMax {
		k := min(int64(len(p)), c.logMax-c.logged)
		_, c.logErr = c.log.Write(p[:k])
		c.logged += k
	}
	if room := captureHead - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if c.ring == nil {
		c.ring = make([]byte, captureTail)
	}
	if len(p) >= len(c.ring) {
		copy(c.ring, p[len(p)-len(c.ring):])
		c.pos, c.filled = 0, true
		return n, nil
	}
	k := copy(c.ring[c.pos:], p)
	if k < len(p) {
		copy(c.ring, p[k:])
		c.filled = true
	}
	c.pos = (c.pos + len(p)) % len(c.ring)
	if c.pos == 0 {
		c.filled = true
	}
	return n, nil
}

func (c *capture) tail() []byte {
	if !c.filled {
		return c.ring[:c.pos]
	}
	out := make([]byte, 0, len(c.ring))
	out = append(out, c.ring[c.pos:]...)
	return append(out, c.ring[:c.pos]...)
}

// result renders the output within the budget, followed by the status.
func (c *capture) result(env *Env, status string, notes []string, logRel string) (string, bool) {
	footer := strings.Join(append(notes, status), "\n")
	tail := c.tail()
	gap := c.total - int64(len(c.head)) - int64(len(tail)) // bytes held nowhere in memory
	joined := strings.ToValidUTF8(string(c.head)+string(tail), "\uFFFD")
	counter := env.counter()
	budget := env.budget() - counter.Count(footer) - 1
	out, cut := headTail(joined, budget, counter, gap > 0, func(cutBytes int) string {
		return fmt.Sprintf("\n[… %d of %d output bytes cut from the middle to fit the context. The output (capped at %d MB) is kept at %s: "+
			"Read or Grep it, or rerun narrowing the output with head, tail, grep, awk or sed, or redirect it to a file …]\n",
			int64(cutBytes)+gap, c.total, c.logMax>>20, logRel)
	})
	if c.total == 0 {
		out = "(no output)"
	}
	if !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return out + footer, cut
}

// finish completes the kept copy with the tail that went past logMax.
func (c *capture) finish() {
	if c.log == nil {
		return
	}
	defer c.log.Close()
	if c.logErr != nil || c.total <= c.logged {
		return
	}
	tail := c.tail()
	// Only the part of the tail that was not logged already.
	if missing := c.total - c.logged; int64(len(tail)) > missing {
		tail = tail[int64(len(tail))-missing:]
	}
	skipped := c.total - c.logged - int64(len(tail))
	fmt.Fprintf(c.log, "\n[… %d bytes not kept …]\n", skipped)
	c.log.Write(tail) //nolint:errcheck // best effort
}
