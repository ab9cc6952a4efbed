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
	"time"

	"github.com/baton-bot/baton/core/catalog"
	"github.com/baton-bot/baton/core/sandbox"
	"github.com/baton-bot/baton/core/workspace"
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
	// waitDelay bounds how long output is drained once the command has
	// exited.
	waitDelay = sandbox.WaitDelay
)

// BashConfig configures the Bash tool. Zero values take the defaults.
type BashConfig struct {
	// Sandbox runs the commands (required): when it is unavailable the
	// tool is disabled with its reason.
	Sandbox *sandbox.Sandbox
	// Timeout applies to calls without timeout_s (default 120 s); calls
	// are capped at MaxBashTimeout.
	Timeout time.Duration
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
// the sandbox (read-only system, writable workspace except logs/, private
// /tmp, resource limits, no network unless Env.Network and the sandbox
// grants it, or the egress proxy alone when Env.Egress is set). Output is held in memory as head and tail only; a copy capped
// at KeptBytes is kept under logs/bash/ when the result had to be cut. Safe
// for concurrent use.
type Bash struct {
	cfg      BashConfig
	sb       *sandbox.Sandbox
	bash     string // absolute path of the shell
	disabled string // why the tool is unavailable (the sandbox's words); "" when available
	log      *slog.Logger
	seq      atomic.Int64
}

var _ Tool = (*Bash)(nil)

// NewBash checks the shell. When the sandbox is unavailable the tool is
// disabled (Available reports why) rather than failing: the sandbox's mode
// has already decided whether that may start.
func NewBash(cfg BashConfig) (*Bash, error) {
	if cfg.Sandbox == nil {
		return nil, errors.New("bash tool: no sandbox")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultBashTimeout
	}
	cfg.Timeout = min(cfg.Timeout, MaxBashTimeout)
	if cfg.BashPath == "" {
		cfg.BashPath = "bash"
	}
	if cfg.Path == "" {
		cfg.Path = sandbox.DefaultPath
	}
	if cfg.Lang == "" {
		cfg.Lang = "C.UTF-8"
	}
	if cfg.KeptBytes <= 0 {
		cfg.KeptBytes = DefaultKeptBytes
	}
	b := &Bash{cfg: cfg, sb: cfg.Sandbox, log: cfg.Logger}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.log = b.log.With("tool", "Bash")
	sh, err := exec.LookPath(cfg.BashPath)
	if err != nil {
		return nil, fmt.Errorf("bash tool: shell %s: %w", cfg.BashPath, err)
	}
	b.bash = sh
	if ok, why := b.sb.Available(); !ok {
		b.disabled = why
	}
	return b, nil
}

// Available reports whether the tool can run commands, and if not, why.
func (b *Bash) Available() (bool, string) {
	if b.disabled == "" {
		return true, ""
	}
	return false, "the Bash tool is disabled because " + b.disabled
}

// Sandboxed reports whether commands run inside bubblewrap.
func (b *Bash) Sandboxed() bool { return b.sb.Isolated() }

// Name implements Tool.
func (*Bash) Name() string { return "Bash" }

// Description implements Tool.
func (b *Bash) Description(tx *catalog.Texts) string {
	return tx.Fill("tools.bash.description", "timeout", itoa(int(b.cfg.Timeout.Seconds())), "max", itoa(int(MaxBashTimeout.Seconds())))
}

// Schema implements Tool.
func (*Bash) Schema(tx *catalog.Texts) json.RawMessage {
	return schema(tx, "bash", `{"type":"object","properties":{`+
		`"command":{"type":"string","description":$command},`+
		`"timeout_s":{"type":"integer","minimum":1,"maximum":600,"description":$timeout_s}},`+
		`"required":["command"],"additionalProperties":false}`)
}

type bashArgs struct {
	Command  string `json:"command"`
	TimeoutS int    `json:"timeout_s"`
}

// Call implements Tool.
func (b *Bash) Call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	if b.disabled != "" {
		return env.fail(b.Name(), "", fault("tools.bash.disabled", "why", b.disabled))
	}
	var a bashArgs
	if err := decode(raw, &a); err != nil {
		return env.fail(b.Name(), "", err)
	}
	if strings.TrimSpace(a.Command) == "" {
		return env.fail(b.Name(), "", fault("tools.bash.command_required"))
	}
	if a.TimeoutS < 0 {
		return env.fail(b.Name(), "", fault("tools.bash.timeout_negative"))
	}
	res, err := b.run(ctx, env, a)
	if err != nil {
		return env.fail(b.Name(), "", err)
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
		notes = append(notes, env.say("tools.bash.timeout_lowered", "n", itoa(a.TimeoutS), "max", itoa(int(MaxBashTimeout.Seconds()))))
		timeout = MaxBashTimeout
	}
	root := env.WS.Root()
	tmp := filepath.Join(root, "tmp")
	if err := env.WS.MkdirAll("tmp"); err != nil {
		return Result{}, fmt.Errorf("create tmp: %w", err)
	}
	logPath := fmt.Sprintf("logs/bash/%s-%d.log", time.Now().UTC().Format("20060102T150405"), b.seq.Add(1))
	logFile, err := env.WS.OpenLog(logPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return Result{}, fmt.Errorf("create output copy: %w", err)
	}
	capt := &capture{log: logFile, logMax: b.cfg.KeptBytes, tx: env.texts()}

	// What Baton made here (input/, output/, tmp/, files written by the
	// tools) must be writable by the sandbox's user; logs/ stays Baton's.
	if err := b.sb.Own(root, workspace.Logs); err != nil {
		logFile.Close()
		return Result{}, err
	}
	environ := []string{"PATH=" + b.cfg.Path, "HOME=" + root, "LANG=" + b.cfg.Lang, "TMPDIR=" + tmp}
	var eg *sandbox.Egress
	if env.Egress != nil && !env.Network && b.sb.Isolated() {
		ep, err := env.Egress.Open(ctx)
		if err != nil {
			logFile.Close()
			env.WS.RemoveLog(logPath)
			return Result{}, err
		}
		defer ep.Close()
		eg = &sandbox.Egress{Socket: ep.Socket, CAFile: ep.CAFile, Locale: ep.Locale}
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd, err := b.sb.Command(tctx, sandbox.Spec{
		Argv:    []string{b.bash, "-c", a.Command},
		Dir:     root,
		Binds:   []sandbox.Bind{{Path: root, Writable: true}, {Path: filepath.Join(root, workspace.Logs)}},
		Env:     environ,
		Network: env.Network,
		Egress:  eg,
	})
	if err != nil {
		logFile.Close()
		env.WS.RemoveLog(logPath)
		return Result{}, err
	}
	defer cmd.Close()
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
	cmd.Kill() //nolint:errcheck // background children left behind
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
		status = env.say("tools.bash.cancelled")
		isErr = true
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		status = env.say("tools.bash.timed_out", "timeout", timeout.String(), "max", itoa(int(MaxBashTimeout.Seconds())))
		isErr = true
	case cmd.ProcessState != nil && cmd.ProcessState.Exited():
		status = env.say("tools.bash.exit", "code", itoa(cmd.ProcessState.ExitCode()))
	default:
		status = env.say("tools.bash.abnormal", "err", fmt.Sprint(waitErr))
		isErr = true
	}
	b.log.DebugContext(ctx, "command finished", "elapsed", elapsed, "bytes", capt.total, "status", status, "sandboxed", b.sb.Isolated())

	text, cut := capt.result(env, status, notes, logPath)
	capt.finish()
	if !cut {
		env.WS.RemoveLog(logPath) // everything is in the result
	}
	return Result{Text: text, IsError: isErr}, nil
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
	tx     *catalog.Texts // words the notes
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
		return "\n" + c.tx.Fill("tools.bash.cut", "cut", itoa(int64(cutBytes)+gap), "total", itoa(c.total), "mb", itoa(c.logMax>>20), "path", logRel) + "\n"
	})
	if c.total == 0 {
		out = c.tx.Text("tools.bash.no_output")
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
	fmt.Fprintf(c.log, "\n%s\n", c.tx.Fill("tools.bash.not_kept", "n", itoa(skipped)))
	c.log.Write(tail) //nolint:errcheck // best effort
}
