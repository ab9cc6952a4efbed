// Package egress is the one way out of the sandbox to the network: an HTTP
// proxy (CONNECT for HTTPS and anything else over TCP, plain HTTP
// forwarding) that lets a job reach only the hosts the policy allows, asks
// a person about the rest when configured to, refuses the host's own
// loopback and private networks, caps each job's connections and bytes,
// and reports every connection.
//
// A Proxy is built once per process with New. Each job run gets a Session
// (Proxy.Session), and each sandboxed command of that job a Unix socket of
// its own (Session.Open) that is bound into the command's sandbox, where
// `baton sandbox-bridge` (Bridge) relays 127.0.0.1:BridgePort to it.
//
// # Who is asking
//
// The sandbox is hostile: whatever it sends can be forged, so nothing it
// sends names the job. A connection belongs to the job whose socket it
// arrived on: every socket is made for one session and only that job's
// sandbox is given it (a Proxy-Authorization header would be a secret
// the sandbox holds, and could leak to or be replayed by another job; a
// socket per session cannot). Proxy-Authorization is ignored and never
// forwarded. A socket lives in a directory only Baton can list, under a
// random name.
//
// # What is checked
//
// A request names a host and a port. The deny entries are tried first
// (any that matches refuses), then the allow entries, then the default
// (refuse, or ask the session's Asker). A name is then resolved once; every
// address is checked, and a loopback, private, link-local, multicast,
// unspecified or reserved address (Special), or one of the host's own, is
// dropped unless an allow entry names that literal address (at the port
// asked for, unless a person is to be asked); the connection is made to an address
// that passed, never to the name again (no DNS rebinding). Each job may
// have Config.MaxOpen connections at once, Config.MaxConnections in all and
// Config.MaxBytes through them, up and down together; a connection
// without a byte either way for Config.IdleTimeout is closed.
package egress

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-bot/baton/core/catalog"
)

// Defaults of Config.
const (
	DefaultMaxConnections = 1000
	DefaultMaxOpen        = 64
	DefaultMaxBytes       = 1 << 30
	DefaultDialTimeout    = 10 * time.Second
	DefaultIdleTimeout    = 5 * time.Minute
	DefaultHeaderTimeout  = 30 * time.Second
	DefaultAskTimeout     = 30 * time.Second
	// MaxHeaderBytes bounds a request's line and headers.
	MaxHeaderBytes = 64 << 10
)

// Resolver resolves host names; *net.Resolver is one.
type Resolver interface {
	// LookupNetIP returns the addresses of host; network is "ip".
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Proxy. Zero values take the defaults.
type Config struct {
	Policy Policy
	// MaxConnections is how many connections a job may make in all (a
	// session's life); MaxOpen how many it may hold at once; MaxBytes how
	// many bytes may pass through them, up and down together.
	MaxConnections int
	MaxOpen        int
	MaxBytes       int64
	// DialTimeout bounds the resolution and the connection to the host;
	// IdleTimeout a connection with no byte either way (and the wait for
	// an HTTP response); HeaderTimeout the client's request line and
	// headers; AskTimeout a question to the Asker.
	DialTimeout, IdleTimeout, HeaderTimeout, AskTimeout time.Duration
	// Resolver resolves names (default net.DefaultResolver); tests hand
	// in their own.
	Resolver Resolver
	// SocketDir holds the sessions' sockets (default: a new directory
	// under os.TempDir, removed by Close). It must be searchable by the
	// sandbox's user and listable by nobody else.
	SocketDir string
	// Credentials are headers added to the requests to their hosts over
	// TLS the proxy terminates with CA (see ca.go); they need CA.
	// UpstreamRoots verify those hosts' certificates (nil: the system's).
	// SystemRootsPEM are the roots the sandbox's TLS clients trust besides
	// CA (the system's bundle): their bundle (Endpoint.CAFile) holds both.
	Credentials    []Credential
	CA             *CA
	UpstreamRoots  *x509.CertPool
	SystemRootsPEM []byte
	// Audit, when set, is told of every connection once it has ended, in
	// the goroutine that served it (after the session's own Audit).
	Audit  func(Record)
	Logger *slog.Logger
	// Texts words what the proxy tells clients and the audit: a refusal's
	// body, which Bash's output and so the model read, and a Record's
	// Reason (the catalogue's egress section; nil: English).
	Texts *catalog.Texts
}

// Job is who a session serves, as the rules' scoping and the audit name
// it.
type Job struct {
	ID      int64
	Channel string // platform-qualified channel the job's acts are judged in
	Piece   string
}

// Record is one connection, as the audit sees it once it has ended.
type Record struct {
	Job    Job
	Host   string // as the client named it: a name or a literal address
	Port   int
	Addr   string // the address connected to; "" when none was
	Method string // CONNECT, or the HTTP method of a forwarded request
	// Outcome is Allowed, Denied or Asked; Rule what decided ("egress.allow[0]",
	// "egress.default", a person's approval); Reason, when not "", why it
	// was refused or ended early, in words people read.
	Outcome, Rule, Reason string
	// BytesUp are bytes sent to the host, BytesDown bytes received from it.
	BytesUp, BytesDown int64
	Duration           time.Duration
}

// Asker decides on a connection the policy asks about. The proxy calls it
// from the connection's goroutine, with a context that ends after
// Config.AskTimeout, and holds the connection until it returns.
type Asker interface {
	// Ask returns Allowed to let the connection through, Denied to refuse
	// it, or Asked to refuse it for now because a person has been asked
	// and has not decided (the client is told to retry once approved). An
	// error refuses it.
	Ask(ctx context.Context, q Question) (Answer, error)
}

// Question is a connection the policy asks about.
type Question struct {
	Job  Job
	Host string // a name or a literal address, as the client named it
	Port int
	// Addrs are the addresses the connection would go to, resolved and
	// checked: a person may want to know that a name leads to a
	// loopback or private address (Special).
	Addrs []netip.Addr
}

// HostPort is the question's host:port, as approvals and rules show it.
func (q Question) HostPort() string { return target{host: q.Host, port: q.Port}.String() }

// Answer is an Asker's decision.
type Answer struct {
	Outcome string // Allowed, Denied or Asked
	Rule    string // what decided, as people read it ("approved by slack:U1", "always-allow rule 3")
	Reason  string // for the client when refused; "" for the proxy's own words
}

// Proxy is the egress proxy of one process. It is safe for concurrent use.
type Proxy struct {
	cfg    Config
	log    *slog.Logger
	dir    string
	ownDir bool   // dir was made by New and is removed by Close
	caFile string // the CA bundle commands trust; "" when no TLS is terminated
	// local are the host's own addresses, public ones included: a
	// service listening on them is Baton's side too.
	local   map[netip.Addr]bool
	resolve Resolver

	mu       sync.Mutex
	sessions map[*Session]struct{} // guarded by mu
	closed   bool                  // guarded by mu
}

// New returns the proxy; it makes Config.SocketDir (or its own directory)
// with mode 0711.
func New(cfg Config) (*Proxy, error) {
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.MaxOpen <= 0 {
		cfg.MaxOpen = DefaultMaxOpen
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	for p, def := range map[*time.Duration]time.Duration{
		&cfg.DialTimeout: DefaultDialTimeout, &cfg.IdleTimeout: DefaultIdleTimeout,
		&cfg.HeaderTimeout: DefaultHeaderTimeout, &cfg.AskTimeout: DefaultAskTimeout,
	} {
		if *p <= 0 {
			*p = def
		}
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger, resolve: cfg.Resolver, sessions: map[*Session]struct{}{}}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.log = p.log.With("component", "egress")
	if p.resolve == nil {
		p.resolve = net.DefaultResolver
	}
	p.local = localAddrs()
	p.dir = cfg.SocketDir
	if p.dir == "" {
		dir, err := os.MkdirTemp("", "baton-egress-")
		if err != nil {
			return nil, fmt.Errorf("egress: socket directory: %w", err)
		}
		p.dir, p.ownDir = dir, true
	} else if err := os.MkdirAll(p.dir, 0o711); err != nil {
		return nil, fmt.Errorf("egress: socket directory: %w", err)
	}
	// Searchable by the sandbox's user (bubblewrap resolves a bind as it),
	// listable by Baton alone: a socket's name is its secret.
	if err := os.Chmod(p.dir, 0o711); err != nil {
		return nil, fmt.Errorf("egress: socket directory: %w", err)
	}
	if len(cfg.Credentials) > 0 {
		if cfg.CA == nil {
			return nil, errors.New("egress: credentials need a CA")
		}
		// Readable by the sandbox's user: certificates only.
		p.caFile = filepath.Join(p.dir, "ca-bundle.pem")
		bundle := append(append(slices.Clip(cfg.SystemRootsPEM), '\n'), cfg.CA.CertPEM()...)
		if err := os.WriteFile(p.caFile, bundle, 0o644); err != nil {
			return nil, fmt.Errorf("egress: CA bundle: %w", err)
		}
		if err := os.Chmod(p.caFile, 0o644); err != nil {
			return nil, fmt.Errorf("egress: CA bundle: %w", err)
		}
	}
	return p, nil
}

// say returns the catalogue's text "egress."+key, with vars (name, value,
// …) filled in.
func (p *Proxy) say(key string, vars ...string) string {
	return p.cfg.Texts.Fill("egress."+key, vars...)
}

// localAddrs returns the addresses of the host's interfaces.
func localAddrs() map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return out
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
				out[ip.Unmap()] = true
			}
		}
	}
	return out
}

// Close ends every session and removes the socket directory New made.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	sessions := make([]*Session, 0, len(p.sessions))
	for s := range p.sessions {
		sessions = append(sessions, s)
	}
	p.mu.Unlock()
	for _, s := range sessions {
		s.Close()
	}
	if p.ownDir {
		return os.RemoveAll(p.dir)
	}
	return nil
}

// SessionConfig is what a session serves.
type SessionConfig struct {
	Job Job
	// Asker decides what the policy asks about; nil refuses it.
	Asker Asker
	// Audit, when set, is told of each of the session's connections once
	// it has ended, in the goroutine that served it.
	Audit func(Record)
}

// Session is one job run's use of the proxy: its sockets, its caps and its
// counters. It is safe for concurrent use.
type Session struct {
	p   *Proxy
	cfg SessionConfig
	log *slog.Logger

	ctx    context.Context // ends with Close: in-flight questions and dials
	cancel context.CancelFunc
	wg     sync.WaitGroup

	made  atomic.Int64 // connections made (or tried) so far: MaxConnections
	bytes atomic.Int64 // bytes up and down so far: MaxBytes

	mu        sync.Mutex
	open      map[net.Conn]struct{}     // guarded by mu: the clients' connections being served
	listeners map[net.Listener]struct{} // guarded by mu
	closed    bool                      // guarded by mu
}

// Session starts the session of one job run. Close it when the run ends.
func (p *Proxy) Session(cfg SessionConfig) *Session {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Session{
		p: p, cfg: cfg, ctx: ctx, cancel: cancel,
		log:  p.log.With("job", cfg.Job.ID),
		open: map[net.Conn]struct{}{}, listeners: map[net.Listener]struct{}{},
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		s.closed = true
		cancel()
		return s
	}
	p.sessions[s] = struct{}{}
	return s
}

// ErrClosed is returned by Serve and Open on a closed session.
var ErrClosed = errors.New("egress: session closed")

// Endpoint is one command's way to its session: what its sandbox is
// given.
type Endpoint struct {
	// Socket is the host path of the Unix socket, to be bound into the
	// command's sandbox (at BridgeSocket).
	Socket string
	// CAFile, when not "", is a bundle of the system's roots and Baton's
	// CA, for the command's TLS clients to trust: the proxy terminates
	// TLS for the hosts it adds credentials for.
	CAFile string
	// Locale is the catalogue's locale the proxy words refusals in, for
	// the bridge to word its own failures in.
	Locale string
	stop   func()
}

// Close stops serving the endpoint's socket and removes it. Connections
// it accepted are served on (until the session is closed).
func (e Endpoint) Close() {
	if e.stop != nil {
		e.stop()
	}
}

// Open makes a Unix socket for one command of the session and serves it
// until the endpoint is closed (or the session is).
func (s *Session) Open(ctx context.Context) (Endpoint, error) {
	var name [16]byte
	if _, err := rand.Read(name[:]); err != nil {
		return Endpoint{}, fmt.Errorf("egress: socket name: %w", err)
	}
	path := filepath.Join(s.p.dir, hex.EncodeToString(name[:])+".sock")
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		return Endpoint{}, fmt.Errorf("egress: listen: %w", err)
	}
	// The sandbox's user connects to it (when Baton runs as root it is
	// another user); the directory keeps others from finding it.
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return Endpoint{}, fmt.Errorf("egress: socket: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(ln)
	}()
	return Endpoint{Socket: path, CAFile: s.p.caFile, Locale: s.p.cfg.Texts.Locale(), stop: func() { ln.Close(); <-done }}, nil
}

// Serve accepts connections on ln and serves them, until ln is closed or
// the session is; it closes ln. Every connection on ln is the session's.
func (s *Session) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		open, ok := s.track(c)
		if !ok {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(c)
			s.serveConn(c, open)
		}()
	}
}

// track records c as open and returns how many are open with it, counted
// as it is accepted, so that a burst of connections is judged in the order
// they came; false when the session is closed (c is closed).
func (s *Session) track(c net.Conn) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return 0, false
	}
	s.open[c] = struct{}{}
	return len(s.open), true
}

func (s *Session) untrack(c net.Conn) {
	c.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open, c)
}

// openCount is how many client connections are being served.
func (s *Session) openCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// Close stops the session's listeners, ends its connections and waits for
// them.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	s.cancel()
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.p.mu.Lock()
	delete(s.p.sessions, s)
	s.p.mu.Unlock()
	return nil
}

// Usage is what a session has used so far.
type Usage struct {
	Connections int64 // made or tried
	Bytes       int64 // up and down
}

// Usage returns what the session has used so far.
func (s *Session) Usage() Usage {
	return Usage{Connections: s.made.Load(), Bytes: s.bytes.Load()}
}

// audit reports r to the session's and the proxy's audit.
func (s *Session) audit(r Record) {
	r.Job = s.cfg.Job
	s.log.Debug("connection", "host", r.Host, "port", r.Port, "outcome", r.Outcome, "rule", r.Rule,
		"reason", r.Reason, "up", r.BytesUp, "down", r.BytesDown, "took", r.Duration)
	if s.cfg.Audit != nil {
		s.cfg.Audit(r)
	}
	if s.p.cfg.Audit != nil {
		s.p.cfg.Audit(r)
	}
}
