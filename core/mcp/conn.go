package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// closeGrace is how long a stdio server has to exit once its stdin is
// closed before its process group is killed.
const closeGrace = time.Second

// stderrKept is how much of a stdio server's stderr is kept to explain a
// failure.
const stderrKept = 2 << 10

// conn is one live connection of a session to a server.
type conn struct {
	srv *server
	cs  *sdk.ClientSession

	// A stdio server's process, its exit, and the end of its stderr.
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been waited for
	stderr *tail

	dead      atomic.Bool // the connection failed; the next call connects anew
	closeOnce sync.Once

	mu    sync.Mutex
	timer *callTimer // guarded by mu: the call running, whose timeout a question to a person pauses
}

// callTimer is a call's timeout, which stops while the server waits for a
// person's answer (elicitation) and starts afresh after it.
type callTimer struct {
	d time.Duration
	t *time.Timer
}

// errCallTimeout is the cause of a call's context when its timeout ran out.
var errCallTimeout = errors.New("the call timed out")

// startCall starts the timeout of a call on c: cancel ends ctx with
// errCallTimeout when it runs out. The returned stop ends it.
func (c *conn) startCall(d time.Duration, cancel context.CancelCauseFunc) (stop func()) {
	ct := &callTimer{d: d, t: time.AfterFunc(d, func() { cancel(errCallTimeout) })}
	c.mu.Lock()
	c.timer = ct
	c.mu.Unlock()
	return func() {
		ct.t.Stop()
		c.mu.Lock()
		if c.timer == ct {
			c.timer = nil
		}
		c.mu.Unlock()
	}
}

// pause stops the running call's timeout while a person is asked; the
// returned resume gives the call its whole timeout again.
func (c *conn) pause() (resume func()) {
	c.mu.Lock()
	ct := c.timer
	c.mu.Unlock()
	if ct == nil || !ct.t.Stop() {
		return func() {}
	}
	return func() { ct.t.Reset(ct.d) }
}

// connect starts or reaches srv and completes the handshake within its
// startup timeout.
func (s *Session) connect(ctx context.Context, srv *server) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, srv.cfg.StartupTimeout)
	defer cancel()
	c := &conn{srv: srv}
	client := sdk.NewClient(&sdk.Implementation{Name: "baton", Version: "1"}, &sdk.ClientOptions{
		Logger:             s.m.log.With("server", srv.cfg.Name),
		ElicitationHandler: s.elicitHandler(srv, c),
		// Roots are a workspace's business, not the server's: none.
		Capabilities: &sdk.ClientCapabilities{},
	})
	var tr sdk.Transport
	if srv.cfg.Command != "" {
		t, err := c.start(s.m.cfg, s.scope.Dir)
		if err != nil {
			return nil, err
		}
		tr = t
	} else {
		tr = &sdk.StreamableClientTransport{
			Endpoint:   srv.cfg.URL,
			HTTPClient: &http.Client{Transport: headers{h: srv.cfg.Headers, base: http.DefaultTransport}},
			// Answers come on each call's own stream; no standing one.
			DisableStandaloneSSE: true,
			MaxRetries:           2,
		}
	}
	cs, err := client.Connect(ctx, tr, nil)
	if err != nil {
		c.close()
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer to the handshake within %s", srv.cfg.StartupTimeout)
		}
		return nil, c.explain(err)
	}
	c.cs = cs
	return c, nil
}

// start starts a stdio server in dir, in a process group of its own, with
// only its declared environment over PATH, HOME and LANG.
func (c *conn) start(cfg Config, dir string) (sdk.Transport, error) {
	sc := c.srv.cfg
	env := map[string]string{"PATH": cfg.Path, "HOME": dir, "LANG": cfg.Lang}
	maps.Copy(env, sc.Env)
	cmd := exec.Command(sc.Command, sc.Args...)
	cmd.Dir = dir
	cmd.Env = nil
	for _, k := range slices.Sorted(maps.Keys(env)) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Pipes of our own rather than exec's, so that waiting for the
	// process never races the reads of its output.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	c.stderr = &tail{max: stderrKept}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, c.stderr
	cmd.WaitDelay = closeGrace
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{inR, inW, outR, outW} {
			f.Close()
		}
		return nil, fmt.Errorf("start %s: %w", sc.Command, unwrapExec(err))
	}
	inR.Close()
	outW.Close()
	c.cmd, c.exited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		c.dead.Store(true)
		close(c.exited)
	}()
	return &sdk.IOTransport{Reader: outR, Writer: inW}, nil
}

// unwrapExec drops exec's repetition of the command in its errors.
func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// close ends the connection: the session, then for a stdio server its
// stdin, and after closeGrace its whole process group. It returns once the
// process has been waited for. Safe to call more than once.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.dead.Store(true)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if c.cs != nil {
				_ = c.cs.Close()
			}
		}()
		if c.cmd == nil {
			// An HTTP session's close is one DELETE, bounded by the SDK.
			<-done
			return
		}
		select {
		case <-c.exited:
		case <-time.After(closeGrace):
		}
		// The server's children too, whether or not it exited.
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
		<-done
	})
}

// alive reports whether the connection can still carry calls.
func (c *conn) alive() bool { return !c.dead.Load() }

// explain adds to err what the server wrote on stderr, redacted.
func (c *conn) explain(err error) error {
	msg := err.Error()
	if c.stderr != nil {
		if t := strings.TrimSpace(c.stderr.String()); t != "" {
			msg += " (stderr: " + clip(oneLine(t), 500) + ")"
		}
	}
	return errors.New(c.srv.redact.redact(msg))
}

// tail keeps the last max bytes written to it. Safe for concurrent use.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte // guarded by mu
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// headers adds a server's configured headers to every request.
type headers struct {
	h    map[string]string
	base http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.h {
			r.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(r)
}
