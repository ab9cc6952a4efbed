// Package web is Baton's operator dashboard: server-rendered pages under
// /ui/ that show every task (filtered, searched, paged), a task's thread
// and jobs, a job's timeline movement by movement (model requests, tool
// calls, transitions, questions, approvals, egress), its movement logs
// (paged), the queue and the token usage, and that act on jobs: Retry,
// Abort and Re-run from a movement, each a POST carrying the session's
// CSRF token.
//
// Pages are html/template; a running job's timeline follows the job over
// server-sent events (static/live.js), the queue refreshes itself, both
// with the vendored htmx (static/htmx.min.js, its licence beside it): no
// build step.
//
// Nothing is reachable without a session. A session starts at the login
// form (GET /ui/login, which posts the field token to POST /ui/login) with
// the configured token; it is kept in a secure, HTTP-only, SameSite=Strict
// cookie. Failed logins say nothing of what was wrong and are rate-limited
// per client address. With an empty token the UI is off: every route
// answers 404, as if it were not there.
package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

//go:embed static templates
var files embed.FS

// Store is the part of core.Store the pages read. Implementations are safe
// for concurrent use and return errors wrapping core.ErrNotFound for what
// does not exist.
type Store interface {
	Task(ctx context.Context, id int64) (core.Task, error)
	Tasks(ctx context.Context, f core.TaskFilter) ([]core.Task, error)
	Job(ctx context.Context, id int64) (core.Job, error)
	Jobs(ctx context.Context, f core.JobFilter) ([]core.Job, error)
	RecentComments(ctx context.Context, taskID int64, n int) ([]core.Comment, error)
	Events(ctx context.Context, jobID int64) ([]core.JobEvent, error)
	CountJobs(ctx context.Context) (map[core.JobState]int64, error)
}

var _ Store = (core.Store)(nil)

// Service is the part of the conversation service (*chat.Service) the
// actions use: it owns retries, aborts and re-runs. Errors wrapping
// chat.ErrRerun are plain sentences for the operator.
type Service interface {
	RetryJob(ctx context.Context, id int64, by string) (core.Job, error)
	AbortJob(ctx context.Context, id int64, by string) (core.Job, error)
	Rerun(ctx context.Context, r chat.Rerun) (core.Job, error)
}

var _ Service = (*chat.Service)(nil)

// Config configures the UI.
type Config struct {
	// Token is what the login form must be given (ui.token). Empty: the
	// UI is off and every route answers 404.
	Token  string
	Logger *slog.Logger
	// Links, when set, returns the address of a task's chat thread ("":
	// none).
	Links func(core.Task) string
	// TraceID, when set, returns the trace id of a job's run ("": none),
	// shown on the job page; unset, the page shows the trace of the job's
	// newest trace event (core.EventTrace), if any.
	TraceID func(core.Job) string
	// Session is how long a session lasts (12h by default).
	Session time.Duration
	// LoginFailures is how many failed logins a client address may make
	// per LoginWindow (5 a minute by default) before it is refused with
	// 429 until the window ends.
	LoginFailures int
	LoginWindow   time.Duration
	// OIDC, when set, adds a login through an OpenID Connect provider.
	OIDC *OIDC
	// LiveEvery is how often a running job's live stream looks at the
	// store (1s by default).
	LiveEvery time.Duration
	// Now is the clock (time.Now by default).
	Now func() time.Time
}

// UI serves the dashboard. It is safe for concurrent use.
type UI struct {
	store Store
	svc   Service
	cfg   Config
	log   *slog.Logger
	pages *pages
	token [32]byte
	oidc  *oidcClient // nil: no OIDC login

	mu       sync.Mutex // guards sessions and failures
	sessions map[string]session
	failures map[string]*failure
}

type session struct {
	csrf    string
	expires time.Time
}

type failure struct {
	n     int
	since time.Time
}

// New returns the UI over store and svc.
func New(store Store, svc Service, cfg Config) (*UI, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Session <= 0 {
		cfg.Session = 12 * time.Hour
	}
	if cfg.LoginFailures <= 0 {
		cfg.LoginFailures = 5
	}
	if cfg.LoginWindow <= 0 {
		cfg.LoginWindow = time.Minute
	}
	if cfg.LiveEvery <= 0 {
		cfg.LiveEvery = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	u := &UI{
		store: store, svc: svc, cfg: cfg, log: cfg.Logger, pages: p, token: sha256.Sum256([]byte(cfg.Token)),
		sessions: map[string]session{}, failures: map[string]*failure{},
	}
	if cfg.OIDC != nil && cfg.OIDC.Issuer != "" {
		u.oidc = &oidcClient{cfg: *cfg.OIDC}
	}
	return u, nil
}

// cookieName is the session cookie's.
const cookieName = "baton_ui"

// Handler returns the routes, to be mounted at /ui/.
func (u *UI) Handler() http.Handler {
	if u.cfg.Token == "" {
		return http.NotFoundHandler()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui/login", u.loginForm)
	mux.HandleFunc("POST /ui/login", u.login)
	if u.oidc != nil {
		mux.HandleFunc("GET /ui/login/oidc", u.oidcStart)
		mux.HandleFunc("GET /ui/login/oidc/callback", u.oidcCallback)
	}
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/", http.FileServerFS(files)))
	mux.Handle("POST /ui/logout", u.authed(u.logout))
	mux.Handle("GET /ui/{$}", u.authed(func(w http.ResponseWriter, r *http.Request, _ session) {
		http.Redirect(w, r, "/ui/tasks", http.StatusSeeOther)
	}))
	mux.Handle("GET /ui/tasks", u.authed(u.tasks))
	mux.Handle("GET /ui/tasks/{id}", u.authed(u.task))
	mux.Handle("GET /ui/jobs/{id}", u.authed(u.job))
	mux.Handle("GET /ui/jobs/{id}/timeline", u.authed(u.jobTimeline))
	mux.Handle("GET /ui/jobs/{id}/live", u.authed(u.live))
	mux.Handle("GET /ui/jobs/{id}/logs/{name}", u.authed(u.movementLog))
	mux.Handle("GET /ui/queue", u.authed(u.queue))
	mux.Handle("POST /ui/jobs/{id}/retry", u.authed(u.retry))
	mux.Handle("POST /ui/jobs/{id}/abort", u.authed(u.abort))
	mux.Handle("POST /ui/jobs/{id}/rerun", u.authed(u.rerun))
	mux.Handle("/ui/", u.authed(func(w http.ResponseWriter, r *http.Request, s session) {
		u.notFound(w, r, s)
	}))
	return secureHeaders(mux)
}

// secureHeaders sets the headers every page carries.
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "same-origin")
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// authed lets requests with a live session through to h; others are sent
// to the login form (a page) or refused (a POST). A POST must carry the
// session's CSRF token in the field csrf (or the X-CSRF-Token header).
func (u *UI) authed(h func(http.ResponseWriter, *http.Request, session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := u.session(r)
		if !ok {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				http.Error(w, "no session", http.StatusForbidden)
				return
			}
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost {
			got := r.Header.Get("X-CSRF-Token")
			if got == "" {
				got = r.PostFormValue("csrf")
			}
			if subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
				http.Error(w, "missing or wrong CSRF token", http.StatusForbidden)
				return
			}
		}
		h(w, r, s)
	})
}

// session returns the live session of r's cookie.
func (u *UI) session(r *http.Request) (session, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return session{}, false
	}
	key := sessionKey(c.Value)
	u.mu.Lock()
	defer u.mu.Unlock()
	s, ok := u.sessions[key]
	if !ok {
		return session{}, false
	}
	if !u.cfg.Now().Before(s.expires) {
		delete(u.sessions, key)
		return session{}, false
	}
	return s, true
}

// sessionKey is what the session map is keyed on: the cookie's hash, so
// that the map holds no usable cookie.
func sessionKey(cookie string) string {
	h := sha256.Sum256([]byte(cookie))
	return hex.EncodeToString(h[:])
}

func (u *UI) loginForm(w http.ResponseWriter, r *http.Request) {
	if _, ok := u.session(r); ok {
		http.Redirect(w, r, "/ui/tasks", http.StatusSeeOther)
		return
	}
	u.render(w, http.StatusOK, "login", u.loginPage(""))
}

// loginPage is the login form's page with the error.
func (u *UI) loginPage(err string) page {
	return page{Title: "Log in", Error: err, Data: u.oidc != nil}
}

// loginFailed is all a wrong login is told.
const loginFailed = "Login failed."

func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	client := clientAddr(r)
	now := u.cfg.Now()
	if u.limited(client, now) {
		w.Header().Set("Retry-After", "60")
		u.render(w, http.StatusTooManyRequests, "login", u.loginPage("Too many failed logins; try again later."))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	given := sha256.Sum256([]byte(r.PostFormValue("token")))
	if subtle.ConstantTimeCompare(given[:], u.token[:]) != 1 {
		u.failed(client, now)
		u.log.Warn("a UI login failed", "client", client)
		u.render(w, http.StatusUnauthorized, "login", u.loginPage(loginFailed))
		return
	}
	u.startSession(w, client, now)
	u.log.Info("a UI session started", "client", client)
	http.Redirect(w, r, "/ui/tasks", http.StatusSeeOther)
}

// startSession starts a session for client and sets its cookie.
func (u *UI) startSession(w http.ResponseWriter, client string, now time.Time) {
	cookie, csrf := randomHex(), randomHex()
	u.mu.Lock()
	u.sessions[sessionKey(cookie)] = session{csrf: csrf, expires: now.Add(u.cfg.Session)}
	for k, s := range u.sessions { // sessions of the past
		if !now.Before(s.expires) {
			delete(u.sessions, k)
		}
	}
	delete(u.failures, client)
	u.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: cookie, Path: "/ui/", MaxAge: int(u.cfg.Session / time.Second),
		Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode,
	})
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request, _ session) {
	if c, err := r.Cookie(cookieName); err == nil {
		u.mu.Lock()
		delete(u.sessions, sessionKey(c.Value))
		u.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/ui/", MaxAge: -1, Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// limited reports whether client made too many failed logins in the
// current window.
func (u *UI) limited(client string, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	f, ok := u.failures[client]
	if !ok {
		return false
	}
	if now.Sub(f.since) >= u.cfg.LoginWindow {
		delete(u.failures, client)
		return false
	}
	return f.n >= u.cfg.LoginFailures
}

func (u *UI) failed(client string, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f, ok := u.failures[client]
	if !ok || now.Sub(f.since) >= u.cfg.LoginWindow {
		f = &failure{since: now}
		u.failures[client] = f
	}
	f.n++
	if len(u.failures) > 10000 { // a flood of addresses: forget the oldest windows
		for k, v := range u.failures {
			if now.Sub(v.since) >= u.cfg.LoginWindow {
				delete(u.failures, k)
			}
		}
	}
}

// clientAddr is the host of r's peer.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func randomHex() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// errNotFound is what a handler returns for an unknown id.
var errNotFound = errors.New("not found")
