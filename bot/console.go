package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/baton-bot/baton/core"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/baton-bot/baton/core/engine"
)

// What baton chat and baton run share on a terminal: whether a stream is
// one, its width, the log file that keeps log lines out of the
// conversation, and the hooks through which the console sees the jobs'
// steps and the model's retries.

// fileOf returns the file behind a standard stream, through the lock Run
// puts around Stderr.
func fileOf(v any) (*os.File, bool) {
	if l, ok := v.(*lockedWriter); ok {
		v = l.w
	}
	f, ok := v.(*os.File)
	return f, ok
}

// isTerminal reports whether v (a standard stream) is a terminal: a file
// that answers the terminal's window-size request. /dev/null, pipes and
// regular files are not, whatever their mode says.
func isTerminal(v any) bool {
	f, ok := fileOf(v)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	return err == nil
}

// termWidth returns a function that reads the columns of the terminal v
// is, 0 when it cannot tell (the Screen then takes 80).
func termWidth(v any) func() int {
	f, ok := fileOf(v)
	if !ok {
		return nil
	}
	return func() int {
		ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
		if err != nil {
			return 0
		}
		return int(ws.Col)
	}
}

// consoleLog sends the log of `baton cmd` to data_dir/logs/baton-CMD.log,
// so that log lines do not mix with the conversation, and says where once
// on Stderr; a retry of a request to the model still reaches n as one line
// (see noticeHandler), which the console shows. With verbose the log stays
// on Stderr, through the returned lineWriter (so that the console can take
// its lines above its prompt), and n gets nothing: the log line says it.
// close closes the log file.
func (m *Main) consoleLog(cmd string, verbose bool, n *notices) (lines *lineWriter, close func() error, err error) {
	if verbose {
		lines = &lineWriter{w: m.Stderr}
		logger, err := newLogger(m.Config.Log, lines)
		if err != nil {
			return nil, nil, configErr(cmd, err)
		}
		m.Logger = logger
		return lines, func() error { return nil }, nil
	}
	dir := filepath.Join(m.Config.DataDir, "logs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("baton %s: the log folder: %w", cmd, err)
	}
	path := filepath.Join(dir, "baton-"+cmd+".log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("baton %s: the log file: %w", cmd, err)
	}
	logger, err := newLogger(m.Config.Log, f)
	if err != nil {
		f.Close()
		return nil, nil, configErr(cmd, err)
	}
	m.Logger = slog.New(&noticeHandler{inner: logger.Handler(), n: n})
	fmt.Fprintf(m.Stderr, "baton: the log goes to %s (--verbose shows it here)\n", path)
	return nil, f.Close, nil
}

// notices hands one-line notices about the work under way to whoever shows
// them once they are there (the console is made after the logger).
type notices struct {
	mu   sync.Mutex
	show func(text string) // guarded by mu; nil: not shown
}

func (n *notices) set(show func(string)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.show = show
}

func (n *notices) notice(text string) {
	n.mu.Lock()
	show := n.show
	n.mu.Unlock()
	if show != nil {
		show(text)
	}
}

// noticeHandler passes every record to inner and, for a retry of a request
// to the model (core/llm's retry warning, with its retry, max_retries,
// wait and reason attributes), tells n one line about it. The
// log keeps the detail; the conversation gets the line.
type noticeHandler struct {
	inner slog.Handler
	n     *notices
}

func (h *noticeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.inner.Enabled(ctx, l)
}

func (h *noticeHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn && strings.HasPrefix(r.Message, "llm: ") && hasAttr(r, "max_retries") {
		h.n.notice(retryLine(r))
	}
	if !h.inner.Enabled(ctx, r.Level) {
		return nil
	}
	return h.inner.Handle(ctx, r)
}

func (h *noticeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &noticeHandler{inner: h.inner.WithAttrs(as), n: h.n}
}

func (h *noticeHandler) WithGroup(name string) slog.Handler {
	return &noticeHandler{inner: h.inner.WithGroup(name), n: h.n}
}

// hasAttr reports whether r carries an attribute named key.
func hasAttr(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == key
		return !found
	})
	return found
}

// retryLine is the one line about a retry: "the model: retry 2 of 5 in
// 4s (the server could not be reached)".
func retryLine(r slog.Record) string {
	var retry, maxRetries, reason string
	var wait time.Duration
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "retry":
			retry = a.Value.String()
		case "max_retries":
			maxRetries = a.Value.String()
		case "reason":
			reason = a.Value.String()
		case "wait":
			if a.Value.Kind() == slog.KindDuration {
				wait = a.Value.Duration()
			}
		}
		return true
	})
	if retry == "" {
		return "the model: " + strings.TrimPrefix(r.Message, "llm: ")
	}
	line := "the model: retry " + retry
	if maxRetries != "" {
		line += " of " + maxRetries
	}
	if wait > 0 {
		line += " in " + wait.Round(100*time.Millisecond).String()
	}
	if reason != "" {
		line += " (" + reason + ")"
	}
	return line
}

// stepRelay is the engine.Stepper of a process whose view of the jobs (the
// console, baton run's progress) is made after the system: steps before
// set are dropped.
type stepRelay struct {
	mu sync.Mutex
	to engine.Stepper // guarded by mu
}

var _ engine.Stepper = (*stepRelay)(nil)

func (r *stepRelay) set(to engine.Stepper) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.to = to
}

func (r *stepRelay) Step(ctx context.Context, s engine.Step) {
	if to := r.target(); to != nil {
		to.Step(ctx, s)
	}
}

func (r *stepRelay) target() engine.Stepper {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.to
}

// texter is a view that shows the answers' text as the model writes it
// (engine.Config.OnText and OnTextRestart).
type texter interface {
	Text(jobID int64, delta string)
	TextRestart(jobID int64)
}

var _ texter = (*stepRelay)(nil)

// Text passes the text to the view when it shows text.
func (r *stepRelay) Text(jobID int64, delta string) {
	if t, ok := r.target().(texter); ok {
		t.Text(jobID, delta)
	}
}

// TextRestart passes the restart to the view when it shows text.
func (r *stepRelay) TextRestart(jobID int64) {
	if t, ok := r.target().(texter); ok {
		t.TextRestart(jobID)
	}
}

// observers is the engine's Observer when a Stepper watches the jobs too:
// statuses go to status (nil: nowhere), steps to steps.
type observers struct {
	status engine.Observer
	steps  engine.Stepper
}

var _ engine.Stepper = observers{}

func (o observers) Observe(ctx context.Context, s engine.Status) {
	if o.status != nil {
		o.status.Observe(ctx, s)
	}
}

func (o observers) Step(ctx context.Context, s engine.Step) { o.steps.Step(ctx, s) }

// Progress passes a progress event to the status observer when it takes
// them.
func (o observers) Progress(ctx context.Context, ev core.ProgressEvent) {
	if p, ok := o.status.(engine.Progresser); ok {
		p.Progress(ctx, ev)
	}
}

// Question passes an MCP server's question to the status observer when it
// can put one in the thread.
func (o observers) Question(ctx context.Context, taskID int64, text string) error {
	if q, ok := o.status.(engine.Questioner); ok {
		return q.Question(ctx, taskID, text)
	}
	return errors.New("this job's thread takes no questions")
}

// Notice passes a notice for a job's thread to the status observer when
// it can post one.
func (o observers) Notice(ctx context.Context, taskID int64, text string) error {
	if n, ok := o.status.(engine.Notifier); ok {
		return n.Notice(ctx, taskID, text)
	}
	return errors.New("this job's thread takes no notices")
}

// lineWriter writes what it is given, line by line, through show (the
// console's screen), so that a verbose log keeps the prompt at the bottom.
type lineWriter struct {
	mu   sync.Mutex
	show func(string) // guarded by mu; nil: to w
	w    io.Writer
	part []byte // guarded by mu: a line not ended yet
}

func (l *lineWriter) set(show func(string)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.show = show
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.show == nil {
		return l.w.Write(p)
	}
	l.part = append(l.part, p...)
	for {
		i := strings.IndexByte(string(l.part), '\n')
		if i < 0 {
			return len(p), nil
		}
		l.show(string(l.part[:i]))
		l.part = l.part[i+1:]
	}
}
