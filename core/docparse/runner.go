package docparse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Runner defaults.
const (
	DefaultTimeout = 30 * time.Second
	DefaultCPU     = 30 * time.Second
	DefaultMemory  = 1 << 30
	// waitDelay bounds how long Wait waits for the child's output pipes once
	// the child has exited or been killed.
	waitDelay = time.Second
	// maxStderr caps what is kept of the child's stderr for the log.
	maxStderr = 8 << 10
)

// Runner parses in a child process. Its zero value is not usable: Command is
// required. A Runner is safe for concurrent use; each Parse starts its own
// child.
type Runner struct {
	// Command returns an unstarted command that runs Main in a new process:
	// the baton binary with Subcommand (Exec(os.Executable(), Subcommand)),
	// possibly wrapped in a sandbox, or a test binary whose TestMain calls
	// Main. It is called once per Parse with Parse's context.
	//
	// The Runner sets the command's Stdin, Stdout and Stderr, starts it in a
	// process group of its own (SysProcAttr.Setpgid, kept with any other
	// SysProcAttr fields the command sets) and SIGKILLs that whole group on
	// timeout or cancellation, so a wrapper must keep the parser inside the
	// group or make it die with the wrapper (bubblewrap: --die-with-parent,
	// and no --new-session, or --unshare-pid so that the parser dies with
	// the namespace's init). A nil Env is replaced by an empty environment:
	// the child needs none, and must not see Baton's secrets. The child
	// needs no file system access, except /proc/self/status to size its
	// memory limit (without it, see limitSelf).
	Command func(ctx context.Context) (*exec.Cmd, error)
	// Timeout is the wall-clock limit of one Parse (default 30 s).
	Timeout time.Duration
	// CPU is the child's CPU-time limit, RLIMIT_CPU (default 30 s, rounded
	// up to whole seconds).
	CPU time.Duration
	// MemoryBytes is the memory the child may use beyond what its runtime
	// reserves at start (default 1 GiB): RLIMIT_AS on top of the reserved
	// address space, and the Go runtime's memory limit.
	MemoryBytes int64
	// Logger gets the child's stderr when it fails (nil: discarded).
	Logger *slog.Logger
}

// Exec returns a Runner.Command that runs path with args and an empty
// environment, outside any sandbox: where no sandbox is available the
// child still runs with its own limits.
func Exec(path string, args ...string) func(ctx context.Context) (*exec.Cmd, error) {
	return func(ctx context.Context) (*exec.Cmd, error) {
		cmd := exec.Command(path, args...)
		cmd.Env = []string{}
		return cmd, nil
	}
}

func (r *Runner) timeout() time.Duration {
	if r.Timeout <= 0 {
		return DefaultTimeout
	}
	return r.Timeout
}

func (r *Runner) cpu() time.Duration {
	if r.CPU <= 0 {
		return DefaultCPU
	}
	return (r.CPU + time.Second - 1).Truncate(time.Second)
}

func (r *Runner) memory() int64 {
	if r.MemoryBytes <= 0 {
		return DefaultMemory
	}
	return r.MemoryBytes
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// Parse runs kind's parser in a child over the bytes of in, read to EOF
// (the caller caps them; the child refuses more than MaxInputBytes).
//
// It returns within about a second of ctx ending or of the wall-clock limit,
// having killed the child's process group. Errors: ctx's error when ctx ended
// first; *InvalidError when the parser refused the input; *TimeoutError,
// *MemoryError or *OutputError when the child hit a limit; any other error
// when the child could not be started or failed otherwise (its stderr is
// logged).
func (r *Runner) Parse(ctx context.Context, kind Kind, in io.Reader) (Result, error) {
	if r.Command == nil {
		return Result{}, errors.New("docparse: the runner has no Command")
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	cmd, err := r.Command(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("docparse: build the child's command: %w", err)
	}
	head, err := json.Marshal(request{Kind: kind, CPUSeconds: uint64(r.cpu() / time.Second), MemoryBytes: r.memory()})
	if err != nil {
		return Result{}, err
	}
	out := &capped{max: maxFrameLine + MaxTextBytes}
	errOut := &capped{max: maxStderr}
	cmd.Stdin = io.MultiReader(bytes.NewReader(append(head, '\n')), in)
	cmd.Stdout, cmd.Stderr = out, errOut
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("docparse: start the child: %w", err)
	}
	k := &killer{pgid: cmd.Process.Pid}
	timer := time.AfterFunc(r.timeout(), func() { k.kill(errTimedOut) })
	stop := context.AfterFunc(ctx, func() { k.kill(context.Cause(ctx)) })
	werr := cmd.Wait()
	timer.Stop()
	stop()
	why := k.exited()

	switch {
	case errors.Is(why, errTimedOut):
		return Result{}, &TimeoutError{Limit: r.timeout()}
	case why != nil:
		return Result{}, fmt.Errorf("docparse: %w", why)
	}
	if werr == nil {
		return r.decodeReply(out, errOut)
	}
	return Result{}, r.failure(cmd, werr, errOut)
}

var errTimedOut = errors.New("timed out")

// outOfMemory are the words with which a Go runtime dies when the address
// space limit refuses it memory: the Go allocator, a new thread's stack,
// and the race detector's runtime and shadow memory (tests run with -race).
var outOfMemory = []string{
	"out of memory",
	"cannot allocate memory",
	"failed to create new OS thread",
	"address space collisions for -race mode",
	"ThreadSanitizer failed to allocate",
}

// failure classifies a child that exited without a reply.
func (r *Runner) failure(cmd *exec.Cmd, werr error, stderr *capped) error {
	log := r.logger()
	st := cmd.ProcessState
	if st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			switch sig := ws.Signal(); {
			case sig == syscall.SIGXCPU:
				return &TimeoutError{Limit: r.cpu(), CPU: true}
			case sig == syscall.SIGKILL:
				// Not ours: the CPU hard limit, or an OOM killer.
				if st.UserTime()+st.SystemTime() >= r.cpu()-r.cpu()/10 {
					return &TimeoutError{Limit: r.cpu(), CPU: true}
				}
				log.Warn("the parser child was killed", "stderr", stderr.String())
				return &MemoryError{LimitBytes: r.memory()}
			}
		}
	}
	msg := stderr.String()
	if strings.Contains(msg, "fatal error: stack overflow") {
		return &InvalidError{Reason: "the file is nested too deeply to parse"}
	}
	for _, oom := range outOfMemory {
		if strings.Contains(msg, oom) {
			return &MemoryError{LimitBytes: r.memory()}
		}
	}
	log.Warn("the parser child failed", "err", werr, "stderr", msg)
	return fmt.Errorf("docparse: the parser failed: %w", werr)
}

func (r *Runner) decodeReply(out, stderr *capped) (Result, error) {
	b, over := out.bytes()
	if over {
		return Result{}, &OutputError{LimitBytes: out.max}
	}
	line, text, ok := bytes.Cut(b, []byte("\n"))
	var rep reply
	if !ok || len(line) > maxFrameLine || json.Unmarshal(line, &rep) != nil {
		r.logger().Warn("the parser child wrote no valid reply", "stdout", string(b[:min(len(b), 200)]), "stderr", stderr.String())
		return Result{}, errors.New("docparse: the parser wrote no valid reply")
	}
	if rep.Error != "" {
		return Result{}, &InvalidError{Reason: rep.Error}
	}
	if rep.TextBytes != len(text) {
		return Result{}, fmt.Errorf("docparse: the reply announces %d bytes of text and carries %d", rep.TextBytes, len(text))
	}
	return Result{Text: string(text), Format: rep.Format, Width: rep.Width, Height: rep.Height}, nil
}

// killer SIGKILLs a child's process group at most once, and never after
// the child has been waited for (its group id could then be reused).
type killer struct {
	mu   sync.Mutex // guards the fields below
	pgid int
	done bool
	why  error // the first reason to kill
}

func (k *killer) kill(why error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done || k.why != nil {
		return
	}
	k.why = why
	syscall.Kill(-k.pgid, syscall.SIGKILL)
}

// exited marks the child waited for and returns why it was killed (nil
// when it was not).
func (k *killer) exited() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.done = true
	return k.why
}

// capped keeps the first max bytes written to it and drops the rest,
// recording that it did; it never fails a write, so a child writing too much
// is not blocked on a full pipe. It is safe for concurrent use: Wait can
// return (ErrWaitDelay) while exec's copying goroutine still writes.
type capped struct {
	max  int64
	mu   sync.Mutex // guards buf and over
	buf  bytes.Buffer
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - int64(c.buf.Len()); room < int64(len(p)) {
		c.over = true
		c.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	c.buf.Write(p)
	return len(p), nil
}

// bytes returns a copy of what was kept and whether anything was dropped.
func (c *capped) bytes() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes()), c.over
}

func (c *capped) String() string {
	b, _ := c.bytes()
	return strings.ToValidUTF8(string(b), "?")
}
