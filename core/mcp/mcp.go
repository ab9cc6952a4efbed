// Package mcp gives the agent the tools of the operator's MCP servers
// (Model Context Protocol): commands Baton starts per job and speaks to over
// stdio, and Streamable HTTP endpoints. It is the client side of
// github.com/modelcontextprotocol/go-sdk, which speaks every protocol
// version from 2024-11-05 to 2026-07-28.
//
// A Manager holds the servers of the configuration and, for the life of the
// process, each server's tool list. Manager.Open gives one run of a job a
// Session: the tools of the servers bound to the job's channel and piece,
// less those the operator disabled, each a tools.Tool named
// mcp__<server>__<tool> with the server's input schema adapted to what
// OpenAI-compatible function calling accepts. When a job may use more than
// Config.MaxTools of them, the Session offers the single tool mcp_search,
// which finds tools by name and description and loads them. A stdio server
// is started when the session first needs it (to list its tools when no
// list is cached, or for a call), in the job's workspace with only its
// declared environment, and every connection ends with Session.Close: its
// process group is killed, so that nothing outlives the job's run.
//
// A call never returns a Go error: the server's isError results, its
// protocol errors, a crash, a hang past the call timeout and a server that
// cannot start are tool errors the model reads. Results go through the
// tool-output budget as Bash's output does (tools.FitResult), images
// become image parts. Whatever the server says is redacted by value of the
// secrets its configuration brought in before a log, a job event or the
// model sees it. Each call is a job event and a Meter count (server and
// outcome, never arguments).
//
// What the model reads — mcp_search's description and the errors — is the
// tools section of the catalogue (tools.mcp.*).
package mcp

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of a server's timeouts.
const (
	DefaultStartupTimeout = 10 * time.Second
	DefaultCallTimeout    = 60 * time.Second
	// DefaultMaxTools is how many tools a job is offered before mcp_search
	// stands for them.
	DefaultMaxTools = 40
)

// ServerConfig is one server, as the operator configured it.
type ServerConfig struct {
	// Name is the server's name (^[a-z0-9_-]+$), the middle of its tools'
	// names.
	Name string
	// Command, Args and Env start a stdio server; Env is its whole
	// declared environment (Config.Path and the usual HOME and LANG aside).
	Command string
	Args    []string
	Env     map[string]string
	// URL and Headers reach a Streamable HTTP server.
	URL     string
	Headers map[string]string
	// StartupTimeout bounds the start and the handshake, CallTimeout each
	// call (defaults above).
	StartupTimeout time.Duration
	CallTimeout    time.Duration
	// EnabledTools, when not empty, are the only tools offered;
	// DisabledTools are never offered nor called. Both name tools as the
	// server does.
	EnabledTools  []string
	DisabledTools []string
	// Channels (platform-qualified, slack:C123) and Pieces the server is
	// bound to; empty: every one.
	Channels []string
	Pieces   []string
	// Secrets are redacted by value from whatever the server says.
	Secrets []string
}

// Meter counts calls. Labels are bounded: the server's name and an
// outcome (Outcome*). Implementations are safe for concurrent use.
type Meter interface {
	MCPCall(server, outcome string, took time.Duration)
}

// Outcomes of a call, for Meter and the job events.
const (
	OutcomeOK          = "ok"
	OutcomeToolError   = "tool_error"     // the server's isError result
	OutcomeProtocol    = "protocol_error" // the server refused the call
	OutcomeTimeout     = "timeout"        // no answer within the call timeout
	OutcomeUnavailable = "unavailable"    // the server could not be started or reached, or stopped during the call
)

// Config configures a Manager.
type Config struct {
	Servers []ServerConfig
	// MaxTools: past this many allowed tools in a job, mcp_search stands
	// for them (DefaultMaxTools when <= 0).
	MaxTools int
	// Path and Lang are the PATH and LANG a stdio server gets unless its
	// Env sets them (defaults: the usual system directories, C.UTF-8).
	Path, Lang string
	Meter      Meter // optional
	Logger     *slog.Logger
}

// defaultPath is the PATH of stdio servers unless configured otherwise.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Manager holds the servers and their cached tool lists. It is safe for
// concurrent use.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	servers []*server // in the order configured
}

// server is one configured server and its tool list, cached for the life
// of the process once a session has listed it.
type server struct {
	cfg    ServerConfig
	redact *redactor

	mu     sync.Mutex
	listed []*sdk.Tool // guarded by mu; nil until listed
	defs   []toolDef   // guarded by mu: listed, adapted, the disabled left out
}

// New returns the manager of cfg's servers. It starts and reaches nothing.
func New(cfg Config) *Manager {
	if cfg.MaxTools <= 0 {
		cfg.MaxTools = DefaultMaxTools
	}
	if cfg.Path == "" {
		cfg.Path = defaultPath
	}
	if cfg.Lang == "" {
		cfg.Lang = "C.UTF-8"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, log: cfg.Logger.With("component", "mcp")}
	for _, sc := range cfg.Servers {
		if sc.StartupTimeout <= 0 {
			sc.StartupTimeout = DefaultStartupTimeout
		}
		if sc.CallTimeout <= 0 {
			sc.CallTimeout = DefaultCallTimeout
		}
		m.servers = append(m.servers, &server{cfg: sc, redact: newRedactor(sc.Secrets)})
	}
	return m
}

// Servers returns the configured servers' names, in order.
func (m *Manager) Servers() []string {
	names := make([]string, len(m.servers))
	for i, s := range m.servers {
		names[i] = s.cfg.Name
	}
	return names
}

// Bound returns the servers bound to channel and piece ("" matches only
// servers bound to every channel, or every piece).
func (m *Manager) Bound(channel, piece string) []string {
	var names []string
	for _, s := range m.servers {
		if s.bound(channel, piece) {
			names = append(names, s.cfg.Name)
		}
	}
	return names
}

func (s *server) bound(channel, piece string) bool {
	return (len(s.cfg.Channels) == 0 || slices.Contains(s.cfg.Channels, channel)) &&
		(len(s.cfg.Pieces) == 0 || slices.Contains(s.cfg.Pieces, piece))
}

// allowed reports whether the operator lets the tool the server calls
// name be offered and called.
func (s *server) allowed(name string) bool {
	if slices.Contains(s.cfg.DisabledTools, name) {
		return false
	}
	return len(s.cfg.EnabledTools) == 0 || slices.Contains(s.cfg.EnabledTools, name)
}

// cached returns the server's adapted tools when a session has listed
// them.
func (s *server) cached() ([]toolDef, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.defs, s.listed != nil
}

// remember caches the server's tool list.
func (s *server) remember(listed []*sdk.Tool) []toolDef {
	defs := adaptTools(s.cfg.Name, listed, s.allowed)
	s.mu.Lock()
	defer s.mu.Unlock()
	if listed == nil {
		listed = []*sdk.Tool{}
	}
	s.listed, s.defs = listed, defs
	return defs
}

// Scope is the job run a Session serves.
type Scope struct {
	// Channel (platform-qualified) and Piece choose the servers bound.
	Channel, Piece string
	// Dir is the workspace: a stdio server's working directory.
	Dir string
	// Event records a job event (kind, detail), already redacted; nil:
	// none.
	Event func(kind, detail string)
	// Elicit, when set, asks the person behind the job a server's
	// question and returns the answer (ok false: declined); nil declines
	// every elicitation.
	Elicit func(ctx context.Context, server, question string) (answer string, ok bool, err error)
	Logger *slog.Logger
}

// Open returns the session of one run of a job. It starts nothing: the
// servers are reached when the session first needs them. Close it when the
// run ends.
func (m *Manager) Open(scope Scope) *Session {
	if scope.Logger == nil {
		scope.Logger = m.log
	}
	s := &Session{m: m, scope: scope, conns: map[string]*conn{}}
	for _, srv := range m.servers {
		if srv.bound(scope.Channel, scope.Piece) {
			s.servers = append(s.servers, srv)
		}
	}
	return s
}

// clip cuts s to n bytes at a rune boundary, marked.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// oneLine folds s onto one line, for events and logs.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Binding is a server a channel's jobs may use.
type Binding struct {
	Server string
	Pieces []string // empty: every piece
	// Tools is how many tools of it are allowed, once a session or
	// Inspect has listed them (Listed).
	Tools  int
	Listed bool
}

// ForChannel returns the servers bound to channel (for some piece or
// every one), in the configuration's order.
func (m *Manager) ForChannel(channel string) []Binding {
	var out []Binding
	for _, s := range m.servers {
		if len(s.cfg.Channels) > 0 && !slices.Contains(s.cfg.Channels, channel) {
			continue
		}
		defs, listed := s.cached()
		out = append(out, Binding{Server: s.cfg.Name, Pieces: slices.Clone(s.cfg.Pieces), Tools: len(defs), Listed: listed})
	}
	return out
}
