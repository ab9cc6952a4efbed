package main

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"

	"github.com/baton-bot/baton/adapters/api"
	"github.com/baton-bot/baton/adapters/discord"
	"github.com/baton-bot/baton/adapters/slack"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/lease"
	"github.com/baton-bot/baton/core/workspace"
)

// serveAll runs `baton serve` (workers true) or `baton gateway`: the
// conversation service with its deliverers and entry points, HTTP, and —
// for serve — the workers and the reconciler, until ctx ends; then it stops
// taking requests, lets running jobs finish for workers.shutdown_grace and
// requeues the rest.
func (m *Main) serveAll(ctx context.Context, cmd string, workers bool) error {
	sys, err := newSystem(ctx, m.Config, m.Logger, systemOptions{role: cmd, converse: true, workspaces: m.workspaces})
	if err != nil {
		return m.systemErr(cmd, err)
	}
	defer sys.Close()
	m.startChecks(cmd, sys, nil)
	if workers {
		// Before any job of this process is created or claimed.
		if err := sys.recoverJobs(ctx); err != nil {
			m.Logger.Warn("the reconciler will take up the jobs an earlier process left", "err", err)
		}
	}

	open := m.listener
	if open == nil {
		open = listen
	}
	ln, err := open("http.addr", m.Config.HTTP.Addr)
	if err != nil {
		return err
	}
	// Health and metrics move to admin.addr when it is set, so that a
	// public endpoint (Slack's events, the task API) does not expose them.
	mux := http.NewServeMux()
	ops := mux
	var adminSrv *http.Server
	adminErr := make(chan error, 1) // never sent on without admin.addr
	at := listening{http: ln.Addr().String()}
	if m.Config.Admin.Addr != "" {
		aln, err := open("admin.addr", m.Config.Admin.Addr)
		if err != nil {
			ln.Close()
			return err
		}
		ops = http.NewServeMux()
		m.profileRoutes(ops)
		adminSrv = newHTTPServer(ops, m.Logger)
		aln = limitConns(aln, m.Config.HTTP.MaxConnections)
		go func() { adminErr <- adminSrv.Serve(aln) }()
		at.admin = aln.Addr().String()
		m.Logger.Info("admin endpoints on", "addr", at.admin)
	}
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	adapterErr := make(chan error, 2)
	// The adapters' Run drain the events they acknowledged on the way out,
	// which needs the store: they end before sys.Close.
	var adapters sync.WaitGroup
	waitAdapters := func() {
		if !waitFor(&adapters, adapterStop) {
			m.Logger.Warn("an adapter did not stop in time", "waited", adapterStop)
		}
	}
	defer func() { stopWork(); waitAdapters() }()
	lastEvent, err := m.startAdapters(workCtx, sys, mux, &adapters, adapterErr)
	if err != nil {
		ln.Close()
		if adminSrv != nil {
			adminSrv.Close()
		}
		return err
	}
	sys.metrics.watch(gauges{store: sys.store, queue: sys.queue, lastEvent: lastEvent})
	// live ends when shutdown begins, for whatever reason: /readyz turns
	// false then, so that a load balancer stops sending traffic.
	live, endLive := context.WithCancel(ctx)
	defer endLive()
	sys.opsRoutes(live, ops)
	if token := m.Config.API.Token.Reveal(); token != "" {
		mux.Handle("/api/", api.New(sys.chat, sys.store, api.Config{Token: token, Logger: m.Logger}).Handler())
		sys.deliver(workCtx, core.PlatformAPI, api.Poster{})
		m.Logger.Info("task API on", "addr", ln.Addr().String())
	}
	if err := m.mountUI(sys, ops); err != nil {
		ln.Close()
		if adminSrv != nil {
			adminSrv.Close()
		}
		return err
	}
	srv := newHTTPServer(mux, m.Logger)
	ln = limitConns(ln, m.Config.HTTP.MaxConnections)

	var wg sync.WaitGroup
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	m.startRetention(runCtx, sys, &wg)
	// What needs the queue starts once it answers. Until then HTTP and the
	// adapters take requests (/readyz says the queue is not answering);
	// the jobs they store wait in the store and are dispatched when Redis
	// answers.
	poolDone := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(poolDone)
		waited, err := sys.connectQueue(runCtx)
		if err != nil {
			m.Logger.Warn("stopping before the queue answered", "queue", sys.queueName, "err", err)
			return
		}
		if waited {
			// Enqueueing the jobs stored while Redis was down failed:
			// dispatch them now rather than at a reconciler's pass.
			if n, err := sys.rec.Recover(workCtx); err != nil {
				m.Logger.Warn("dispatching the jobs stored while Redis was down failed; the reconciler retries", "err", err)
			} else if n > 0 {
				m.Logger.Info("dispatched the jobs stored while Redis was down", "jobs", n)
			}
		}
		if !workers {
			return
		}
		wg.Go(func() { _ = sys.rec.Run(workCtx) })
		_ = sys.pool.Run(runCtx) // graceful once runCtx ends
	}()
	httpErr := make(chan error, 1)
	go func() { httpErr <- srv.Serve(ln) }()
	nWorkers := 0
	if workers {
		nWorkers = m.Config.Workers.Concurrency
	}
	startupWarnings(m.Config, m.origins, m.Logger)
	m.Logger.Info("baton "+cmd+" started", startupSummary(m.Config, at, nWorkers)...)

	var fatal error
	select {
	case <-ctx.Done():
	case err := <-httpErr:
		if !errors.Is(err, http.ErrServerClosed) {
			m.Logger.Error("HTTP server failed", "on", "http.addr", "err", err)
			fatal = fmt.Errorf("http.addr: %w", err)
		}
	case err := <-adminErr:
		// Without health and metrics the process cannot be watched: it
		// stops, as when http.addr fails.
		if !errors.Is(err, http.ErrServerClosed) {
			m.Logger.Error("HTTP server failed", "on", "admin.addr", "err", err)
			fatal = fmt.Errorf("admin.addr: %w", err)
		}
	case err := <-adapterErr:
		m.Logger.Error("an adapter stopped; shutting down", "err", err)
		fatal = err
	}
	endLive()
	// http.addr stops taking requests at once; admin.addr keeps answering
	// (/readyz: 503) while running jobs finish, and stops before the store
	// and the queue close under its handlers.
	shutdown(srv, m.Logger, "http.addr")
	stopRun()
	<-poolDone
	stopWork()
	wg.Wait()
	waitAdapters()
	if adminSrv != nil {
		shutdown(adminSrv, m.Logger, "admin.addr")
	}
	m.Logger.Info("baton " + cmd + " stopped")
	if fatal != nil {
		return &exitError{code: exitInternal, err: fmt.Errorf("baton %s: %w", cmd, fatal)}
	}
	return nil
}

// workerOps is `baton worker`'s admin.addr server: /healthz, /readyz and
// /metrics, so that an orchestrator can watch a process that takes no
// requests (a worker opens no http.addr). Without admin.addr it serves
// nothing and its methods do nothing.
type workerOps struct {
	srv  *http.Server // nil without admin.addr
	log  *slog.Logger
	end  context.CancelFunc // turns /readyz to 503
	done chan struct{}      // closed when Serve has returned
	once sync.Once
	mu   sync.Mutex
	err  error // guarded by mu: why the server stopped serving, nil while it serves
}

// startWorkerOps starts the worker's admin.addr server on sys. /readyz answers
// 503 once ctx ends (shutdown has begun) while running jobs finish; stop
// ends the server. When the server fails, the failure is logged and fail
// is called, so that the worker stops rather than run on unwatched.
func (m *Main) startWorkerOps(ctx context.Context, sys *system, fail context.CancelFunc) (*workerOps, error) {
	o := &workerOps{log: m.Logger, end: func() {}, done: make(chan struct{})}
	if m.Config.Admin.Addr == "" {
		close(o.done)
		return o, nil
	}
	open := m.listener
	if open == nil {
		open = listen
	}
	ln, err := open("admin.addr", m.Config.Admin.Addr)
	if err != nil {
		return nil, err
	}
	live, end := context.WithCancel(ctx)
	o.end = end
	mux := http.NewServeMux()
	m.profileRoutes(mux)
	sys.metrics.watch(gauges{store: sys.store, queue: sys.queue})
	sys.opsRoutes(live, mux)
	o.srv = newHTTPServer(mux, m.Logger)
	m.Logger.Info("admin endpoints on", "addr", ln.Addr().String())
	go func() {
		defer close(o.done)
		err := o.srv.Serve(limitConns(ln, m.Config.HTTP.MaxConnections))
		if errors.Is(err, http.ErrServerClosed) {
			return
		}
		m.Logger.Error("HTTP server failed", "on", "admin.addr", "err", err)
		o.mu.Lock()
		defer o.mu.Unlock()
		o.err = err
		fail()
	}()
	return o, nil
}

// stop turns /readyz to 503 and ends the server; it returns once the
// server has stopped. Safe to call more than once.
func (o *workerOps) stop() {
	o.once.Do(func() {
		o.end()
		if o.srv != nil {
			shutdown(o.srv, o.log, "admin.addr")
		}
		<-o.done
	})
}

// fatal returns the server's failure as the worker's exit error, or nil
// when it did not fail.
func (o *workerOps) fatal() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		return nil
	}
	return &exitError{code: exitInternal, err: fmt.Errorf("baton worker: admin.addr: %w", o.err)}
}

// startAdapters starts the enabled chat adapters and their deliverers
// (only the process that runs an adapter posts for its platform: Discord's
// rate limits are per process); Discord's only while this process holds
// its lease (startDiscord). An adapter that stops with an error (a
// bad token, a refused intent) is reported on errc; wg is done when every
// adapter returned. It returns the adapters' last-event clocks for
// /metrics.
func (m *Main) startAdapters(ctx context.Context, sys *system, mux *http.ServeMux, wg *sync.WaitGroup, errc chan<- error) (map[string]func() time.Time, error) {
	last := map[string]func() time.Time{}
	sys.ready = map[string]func(context.Context) error{}
	sys.notes = map[string]func() string{}
	run := func(name string, fn func(context.Context) error) {
		wg.Go(func() {
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		})
	}
	if c := m.Config.Slack; c.Enabled {
		a, err := slack.New(sys.chat, slack.Config{
			Inbox:    sys.store,
			BotToken: c.BotToken.Reveal(), AppToken: c.AppToken.Reveal(), SigningSecret: c.SigningSecret.Reveal(),
			APIURL: c.APIURL, Mode: c.Mode, RequireMention: c.RequireMention, IgnoreBots: c.IgnoreBots,
			Command: c.Command, Locale: m.Config.Locale,
			Groups: slackGroups(m.Config.Access), Logger: m.Logger.With("adapter", "slack"),
		})
		if err != nil {
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("slack: %w", err)}
		}
		sys.deliver(ctx, core.PlatformSlack, a.Poster())
		if c.Mode == "http" {
			mux.Handle("/slack/", a.Handler())
		}
		run("slack", a.Run)
		last["slack"] = a.LastEvent
		sys.ready["slack"] = identified(ctx, a.Identify, m.Logger)
		m.Logger.Info("Slack adapter on", "mode", c.Mode)
	}
	if m.Config.Discord.Enabled {
		held, err := m.startDiscord(sys, run, last)
		if err != nil {
			return nil, err
		}
		sys.metrics.watchDiscord(held)
	}
	return last, nil
}

// discordLease is the lease of Discord's gateway connection: of the
// processes sharing a store only its holder connects and delivers
// Discord's outbox (two connections would each receive every message).
// Its holder renews it every 5 s for 15 s; a standby tries every 5 s, so
// that a holder that died is replaced within 20 s.
const discordLease = "discord"

// startDiscord starts the Discord adapter and its deliverer for each term
// during which this process holds discordLease (core/lease), through run;
// on standby /readyz says so and counts the process ready. A lost lease
// closes the connection and stops the deliverer at once; a stopping
// process releases the lease so that another takes over at once. An
// adapter cannot run twice: each term has a new one. held reports whether
// this process holds the connection.
func (m *Main) startDiscord(sys *system, run func(name string, fn func(context.Context) error), last map[string]func() time.Time) (held func() bool, err error) {
	c := m.Config.Discord
	cfg := discord.Config{
		Token: c.BotToken.Reveal(), APIURL: c.APIURL, GuildID: c.GuildID,
		RequireMention: c.RequireMention, IgnoreBots: c.IgnoreBots, Logger: m.Logger.With("adapter", "discord"),
	}
	// The first one checks the configuration before anything starts.
	next, err := discord.New(sys.chat, cfg)
	if err != nil {
		return nil, &exitError{code: exitUsage, err: fmt.Errorf("discord: %w", err)}
	}
	var leases core.LeaseStore = sys.store
	if m.leases != nil {
		leases = m.leases(leases)
	}
	holder, err := lease.New(leases, lease.Config{Name: discordLease, TTL: lease.DefaultTTL, Every: lease.DefaultEvery,
		Logger: m.Logger.With("adapter", "discord")})
	if err != nil {
		return nil, err
	}
	var current atomic.Pointer[discord.Adapter] // the adapter of the term under way
	term := func(ctx context.Context) error {
		a := next // terms never overlap
		if next = nil; a == nil {
			var err error
			if a, err = discord.New(sys.chat, cfg); err != nil {
				return fmt.Errorf("discord: %w", err)
			}
		}
		current.Store(a)
		defer current.Store(nil)
		dctx, stop := context.WithCancel(ctx)
		_, stopped := sys.deliver(dctx, core.PlatformDiscord, a)
		defer func() { stop(); <-stopped }()
		return a.Run(ctx)
	}
	run("discord", func(ctx context.Context) error { return holder.Run(ctx, term) })
	last["discord"] = func() time.Time {
		if a := current.Load(); a != nil {
			return a.LastEvent()
		}
		return time.Time{}
	}
	sys.ready["discord"] = func(context.Context) error {
		a := current.Load()
		if a == nil {
			return nil // standby: another process holds the connection
		}
		// The gateway's heartbeat acks count as events.
		if t := a.LastEvent(); t.IsZero() || time.Since(t) > 2*time.Minute {
			return errors.New("no gateway event for 2 minutes")
		}
		return nil
	}
	sys.notes["discord"] = func() string {
		if current.Load() == nil {
			return "standby: another process holds the Discord connection, or none does yet"
		}
		return "holds the Discord connection"
	}
	m.Logger.Info("Discord adapter on: it connects while this process holds the Discord lease", "lease", discordLease)
	return func() bool { return current.Load() != nil }, nil
}

// adapterStop bounds the wait for the adapters at shutdown; Slack's
// drains its acknowledged events for up to 10 s.
const adapterStop = 20 * time.Second

// waitFor waits for wg, up to d; it reports false when d passed first.
func waitFor(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// slackGroups lists the Slack user groups the access lists name, the only
// ones the adapter looks up.
func slackGroups(a AccessConfig) []string {
	var out []string
	for _, id := range slices.Concat(a.Admins, a.AllowedUsers) {
		if strings.HasPrefix(id, slack.GroupPrefix) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// httpErrorLog sends net/http's own messages (a handler's panic, a TLS
// handshake error) to Baton's log rather than the standard logger.
// HTTP limits: a client has requestRead to send a request, headers and body;
// a response is written within responseWrite; an idle keep-alive connection
// is closed after idleConn. Bodies are capped at maxRequestBody on every
// route (routes may cap lower).
const (
	requestRead    = 10 * time.Second
	responseWrite  = 30 * time.Second
	idleConn       = 60 * time.Second
	maxRequestBody = 1 << 20
)

// newHTTPServer returns the server of one of Baton's listeners: slow or idle
// clients are cut off, so that they cannot hold connections open for ever.
func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           http.MaxBytesHandler(h, maxRequestBody),
		ReadHeaderTimeout: requestRead,
		ReadTimeout:       requestRead,
		WriteTimeout:      responseWrite,
		IdleTimeout:       idleConn,
		ErrorLog:          httpErrorLog(log),
	}
}

// limitConns caps the connections ln has open at once at n (http.
// max_connections), below the process's open-file limit, so that a flood of
// clients cannot starve the health checks and the store of descriptors.
func limitConns(ln net.Listener, n int) net.Listener {
	return netutil.LimitListener(ln, n)
}

func httpErrorLog(log *slog.Logger) *stdlog.Logger {
	return slog.NewLogLogger(log.With("component", "http").Handler(), slog.LevelWarn)
}

// shutdown stops srv: no new connection, requests in flight answered
// within 5 s, then whatever is left is closed.
func shutdown(srv *http.Server, log *slog.Logger, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("HTTP requests still running at shutdown: closing them", "on", key, "err", err)
		_ = srv.Close()
	}
}

func queueKind(cfg Config) string {
	if !cfg.Redis.enabled() {
		return "in-process"
	}
	return "redis"
}

// listen opens the listener of config key (http.addr, admin.addr); a port
// in use is named.
func listen(key, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &exitError{code: exitInternal, err: fmt.Errorf("baton: %s %s: %w", key, addr, err)}
	}
	return ln, nil
}

// opsRoutes serves /healthz, /readyz and /metrics on mux. /readyz answers
// 503 once live has ended (shutdown has begun), while the store cannot
// write (its heartbeat, a tiny write every 10 s, failed) or data_dir is
// below workspaces.min_free_bytes, and while the queue or an adapter is
// not ready; /healthz keeps answering 200 while the process drains. A
// ready answer says "ready", then a line per adapter note ("discord:
// standby: …").
func (s *system) opsRoutes(live context.Context, mux *http.ServeMux) {
	writable := s.watchWrites(live)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if live.Err() != nil {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		if err := s.store.Ping(rctx); err != nil {
			msg := "store: unreachable"
			if errors.Is(err, core.ErrStoreReplaced) {
				msg = "store: its file was deleted or replaced; restart Baton"
			}
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		if err := writable(); err != nil {
			http.Error(w, "store: cannot write (see the log)", http.StatusServiceUnavailable)
			return
		}
		if err := s.floor.Check(); err != nil {
			msg := "data_dir: free space unknown"
			if errors.Is(err, workspace.ErrLowSpace) {
				msg = "data_dir: below workspaces.min_free_bytes"
			}
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		if err := s.queue.Ping(rctx); err != nil {
			http.Error(w, "queue: "+s.queueName+" is not answering", http.StatusServiceUnavailable)
			return
		}
		for name, check := range s.ready {
			if err := check(rctx); err != nil {
				http.Error(w, name+": "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ready")
		for _, name := range slices.Sorted(maps.Keys(s.notes)) {
			fmt.Fprintf(w, "%s: %s\n", name, s.notes[name]())
		}
	})
	mux.Handle("GET /metrics", s.metrics.handler())
}

// profileRoutes serves Go's runtime profiles under /debug/pprof/ on mux
// when admin.pprof is on; mux must be admin.addr's (the configuration
// refuses admin.pprof without it).
func (m *Main) profileRoutes(mux *http.ServeMux) {
	if !m.Config.Admin.Pprof {
		return
	}
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	m.Logger.Info("Go's runtime profiles on admin.addr at /debug/pprof/ (admin.pprof)")
}

// heartbeatEvery is how often /readyz's store heartbeat writes;
// heartbeatTimeout how long one may take before the store counts as
// unable to write (an acknowledged Slack event must commit within 2 s).
const (
	heartbeatEvery   = 10 * time.Second
	heartbeatTimeout = 2 * time.Second
)

// watchWrites writes the store's heartbeat now and then every
// heartbeatEvery until ctx ends, and returns a func reporting the last
// outcome. The log hears when writes start failing and when they pass
// again.
func (s *system) watchWrites(ctx context.Context) func() error {
	beat := func(ctx context.Context) error {
		hctx, cancel := context.WithTimeout(ctx, heartbeatTimeout)
		defer cancel()
		return s.store.Heartbeat(hctx)
	}
	interval := s.heartbeatEvery
	if interval <= 0 {
		interval = heartbeatEvery
	}
	var failing atomic.Bool
	return every(ctx, interval, beat(ctx), func(ctx context.Context) error {
		err := beat(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil && failing.CompareAndSwap(false, true):
			s.log.Error("the store cannot write: /readyz answers 503 until it can", "err", err)
		case err == nil && failing.CompareAndSwap(true, false):
			s.log.Info("the store writes again")
		}
		return err
	})
}

// every runs check every interval until ctx ends and returns a func
// reporting the last result; until the first check ends it reports first.
func every(ctx context.Context, interval time.Duration, first error, check func(context.Context) error) func() error {
	var last atomic.Pointer[error]
	last.Store(&first)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := check(ctx)
			last.Store(&err)
		}
	}()
	return func() error { return *last.Load() }
}

// identified checks an adapter's credentials once a minute in the
// background and reports the last result, so that /readyz turns false on a
// revoked token without calling the platform on every probe.
func identified(ctx context.Context, identify func(context.Context) error, log *slog.Logger) func(context.Context) error {
	var last atomic.Pointer[error]
	pending := errors.New("not checked yet")
	last.Store(&pending)
	go func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := identify(cctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				log.Warn("adapter credentials check failed", "err", err)
			}
			last.Store(&err)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func(context.Context) error { return *last.Load() }
}
