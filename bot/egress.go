package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/baton-bot/baton/core/egress"
	"github.com/baton-bot/baton/core/sandbox"
)

// EgressConfig is the egress proxy (core/egress): the sandbox's one way
// out to the network. With no allow entry and default deny (the
// defaults) there is no proxy and Bash reaches nothing, as without this
// section. Lists are read from the file only.
type EgressConfig struct {
	// Default is what happens to a connection no entry covers: deny, or
	// ask a person in the thread (the job waits, as for an approval).
	Default string        `yaml:"default"`
	Allow   []EgressEntry `yaml:"allow"`
	Deny    []EgressEntry `yaml:"deny"` // tried before allow
	// Per job: connections in all, at once, and bytes up and down.
	MaxConnections     int   `yaml:"max_connections"`
	MaxOpenConnections int   `yaml:"max_open_connections"`
	MaxBytes           int64 `yaml:"max_bytes"`
	// DialTimeout bounds resolving and connecting; IdleTimeout a
	// connection with no byte either way.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	IdleTimeout time.Duration `yaml:"idle_timeout"`
}

// EgressEntry is one allow or deny entry: a host pattern with an optional
// port (github.com, *.githubusercontent.com, pypi.org:443, 127.0.0.1:8080),
// written alone or as a mapping that limits it to channels and pieces.
type EgressEntry struct {
	Host     string   `yaml:"host"`
	Channels []string `yaml:"channels"` // platform-qualified: slack:C123, discord:1234; empty: every channel
	Pieces   []string `yaml:"pieces"`   // piece names; empty: every piece
}

// UnmarshalYAML takes an entry written as its host alone, or as a mapping.
func (e *EgressEntry) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*e = EgressEntry{Host: n.Value}
		return nil
	}
	type plain EgressEntry
	return n.Decode((*plain)(e))
}

// MarshalYAML writes an entry without scope as its host alone.
func (e EgressEntry) MarshalYAML() (any, error) {
	if len(e.Channels) == 0 && len(e.Pieces) == 0 {
		return e.Host, nil
	}
	type plain EgressEntry
	return plain(e), nil
}

// enabled reports whether the proxy runs: an entry allows something, or
// the default asks.
func (c EgressConfig) enabled() bool { return len(c.Allow) > 0 || c.Default == "ask" }

// policy returns the entries as the proxy takes them, each named by its
// key (egress.allow[2]), or every problem with them, each a *ConfigError
// naming the key to change.
func (c EgressConfig) policy() (egress.Policy, []*ConfigError) {
	p := egress.Policy{Ask: c.Default == "ask"}
	var errs []*ConfigError
	for _, list := range []struct {
		name    string
		entries []EgressEntry
		rules   *[]egress.Rule
	}{{"egress.allow", c.Allow, &p.Allow}, {"egress.deny", c.Deny, &p.Deny}} {
		for i, e := range list.entries {
			key := fmt.Sprintf("%s[%d]", list.name, i)
			r, err := egress.ParseRule(e.Host)
			if err != nil {
				errs = append(errs, &ConfigError{Key: key, Msg: err.Error()})
				continue
			}
			for j, ch := range e.Channels {
				if msg := idProblem(ch, channelKinds); msg != "" {
					errs = append(errs, &ConfigError{Key: fmt.Sprintf("%s.channels[%d]", key, j), Msg: msg})
				}
			}
			for j, pc := range e.Pieces {
				if pc == "" {
					errs = append(errs, &ConfigError{Key: fmt.Sprintf("%s.pieces[%d]", key, j), Msg: "must name a piece"})
				}
			}
			r.Channels, r.Pieces, r.Name = slices.Clone(e.Channels), slices.Clone(e.Pieces), key
			*list.rules = append(*list.rules, r)
		}
	}
	return p, errs
}

// problems returns what is wrong with the entries, each a *ConfigError
// naming its key. They are read from the file only, so decodeConfig
// reports them with their lines; validate reports them too, for a
// configuration built otherwise.
func (c EgressConfig) problems() []*ConfigError {
	_, errs := c.policy()
	return errs
}

// validate adds what is wrong with the section to v.
func (c EgressConfig) validate(v *validator) {
	v.oneOf("egress.default", c.Default, "deny", "ask")
	v.positive("egress.max_connections", int64(c.MaxConnections))
	v.positive("egress.max_open_connections", int64(c.MaxOpenConnections))
	v.positive("egress.max_bytes", c.MaxBytes)
	v.duration("egress.dial_timeout", c.DialTimeout)
	v.duration("egress.idle_timeout", c.IdleTimeout)
	for _, e := range c.problems() {
		v.errs = append(v.errs, e)
	}
}

// checkPieces refuses an entry scoped to a piece that does not exist.
func (c EgressConfig) checkPieces(known func(string) bool) error {
	var errs []*ConfigError
	for _, list := range []struct {
		name    string
		entries []EgressEntry
	}{{"egress.allow", c.Allow}, {"egress.deny", c.Deny}} {
		for i, e := range list.entries {
			for j, pc := range e.Pieces {
				if !known(pc) {
					errs = append(errs, &ConfigError{Key: fmt.Sprintf("%s[%d].pieces[%d]", list.name, i, j), Msg: fmt.Sprintf("no piece named %q", pc)})
				}
			}
		}
	}
	return joinConfigErrors(errs)
}

// egressMetrics counts the proxy's connections by outcome, and their
// bytes.
type egressMetrics struct {
	conns *prometheus.CounterVec
	bytes *prometheus.CounterVec
}

func newEgressMetrics(m *metrics) *egressMetrics {
	em := &egressMetrics{
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_egress_connections_total", Help: "Connections through the egress proxy by outcome (allowed, denied, asked)."}, []string{"outcome"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_egress_bytes_total", Help: "Bytes through the egress proxy by direction (up: to the host, down: from it)."}, []string{"direction"}),
	}
	m.reg.MustRegister(em.conns, em.bytes)
	return em
}

func (em *egressMetrics) audit(r egress.Record) {
	em.conns.WithLabelValues(r.Outcome).Inc()
	em.bytes.WithLabelValues("up").Add(float64(r.BytesUp))
	em.bytes.WithLabelValues("down").Add(float64(r.BytesDown))
}

// openEgress builds the egress proxy egress configures, or nil when it
// configures none, once the pieces are loaded (an entry may name them)
// and the sandbox is built (its commands are the proxy's clients).
func (s *system) openEgress(sb *sandbox.Sandbox) (*egress.Proxy, error) {
	c, log := s.cfg.Egress, s.log
	if !c.enabled() {
		return nil, nil
	}
	if err := c.checkPieces(func(name string) bool { _, ok := s.pieces.Lookup(name); return ok }); err != nil {
		return nil, err
	}
	pol, errs := c.policy()
	if len(errs) > 0 {
		return nil, joinConfigErrors(errs) // Validate refuses them first
	}
	switch ok, _ := sb.Available(); {
	case !ok:
		log.Warn("egress is configured, but Bash is disabled: nothing will use the proxy")
	case !sb.Isolated():
		log.Warn("egress is configured, but commands run without a sandbox (tools.bash.sandbox: none): they have the host's network, not the proxy")
	}
	em := newEgressMetrics(s.metrics)
	p, err := egress.New(egress.Config{
		Policy: pol, MaxConnections: c.MaxConnections, MaxOpen: c.MaxOpenConnections, MaxBytes: c.MaxBytes,
		DialTimeout: c.DialTimeout, IdleTimeout: c.IdleTimeout,
		Audit: em.audit, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	s.closers = append(s.closers, p.Close)
	return p, nil
}

// bridgeBinary is the binary the sandbox runs as its egress bridge: this
// one (baton sandbox-bridge), when the egress proxy runs; "" otherwise.
func bridgeBinary(cfg Config, log *slog.Logger) string {
	if !cfg.Egress.enabled() {
		return ""
	}
	exe, err := os.Executable()
	if err != nil {
		log.Warn("Bash cannot reach the egress proxy: the baton binary cannot be found to run as the sandbox's bridge", "err", err)
		return ""
	}
	return exe
}
