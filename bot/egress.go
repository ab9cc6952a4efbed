package main

import (
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/baton-bot/baton/core/catalog"
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
	// Credentials are added on the way to their hosts, over TLS the
	// proxy terminates with Baton's CA: the secret never enters the
	// sandbox.
	Credentials []EgressCredential `yaml:"credentials"`
	// CACertFile and CAKeyFile are the CA that signs the hosts'
	// certificates; empty: one generated into data_dir/egress-ca/ at
	// first start.
	CACertFile string `yaml:"ca_cert_file"`
	CAKeyFile  string `yaml:"ca_key_file"`
	// UpstreamCAFile holds more roots to verify the hosts' certificates
	// with, besides the system's (a private CA, a test's).
	UpstreamCAFile string `yaml:"upstream_ca_file"`
}

// EgressCredential is one host's credential: a header, or a user and
// password sent as basic authentication. ${VAR} in header and password is
// replaced by the environment variable VAR when the configuration loads.
type EgressCredential struct {
	Host     string `yaml:"host"`   // an entry as in allow: github.com, *.example.com, api.example.com:443
	Header   Secret `yaml:"header"` // "Authorization: Bearer ${GITHUB_TOKEN}"
	Username string `yaml:"username"`
	Password Secret `yaml:"password"`
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

// problems returns what is wrong with the entries and the credentials,
// each a *ConfigError naming its key. They are read from the file only,
// so decodeConfig reports them with their lines; validate reports them
// too, for a configuration built otherwise.
func (c EgressConfig) problems() []*ConfigError {
	_, errs := c.policy()
	_, credErrs := c.credentials()
	return append(errs, credErrs...)
}

// credentials returns the credentials as the proxy takes them, or every
// problem with them.
func (c EgressConfig) credentials() ([]egress.Credential, []*ConfigError) {
	var out []egress.Credential
	var errs []*ConfigError
	for i, cr := range c.Credentials {
		key := fmt.Sprintf("egress.credentials[%d]", i)
		r, err := egress.ParseRule(cr.Host)
		if err != nil {
			errs = append(errs, &ConfigError{Key: key + ".host", Msg: err.Error()})
			continue
		}
		r.Name = key
		switch header := cr.Header.Reveal(); {
		case header != "" && (cr.Username != "" || cr.Password != ""):
			errs = append(errs, &ConfigError{Key: key, Msg: "write a header, or a username and password, not both"})
		case header != "":
			name, value, ok := strings.Cut(header, ":")
			name, value = strings.TrimSpace(name), strings.TrimSpace(value)
			if !ok || !httpToken(name) || value == "" || strings.ContainsAny(value, "\r\n") {
				// The value is never shown: it is a secret.
				errs = append(errs, &ConfigError{Key: key + ".header", Msg: "must be Name: value, such as Authorization: Bearer ${GITHUB_TOKEN}"})
				continue
			}
			out = append(out, egress.Credential{Match: r, Header: http.CanonicalHeaderKey(name), Value: value})
		case cr.Username != "" && cr.Password != "":
			basic := base64.StdEncoding.EncodeToString([]byte(cr.Username + ":" + cr.Password.Reveal()))
			out = append(out, egress.Credential{Match: r, Header: "Authorization", Value: "Basic " + basic})
		default:
			errs = append(errs, &ConfigError{Key: key, Msg: "needs a header (Authorization: Bearer …) or a username and password"})
		}
	}
	if (c.CACertFile == "") != (c.CAKeyFile == "") {
		errs = append(errs, &ConfigError{Key: "egress.ca_key_file", Msg: "egress.ca_cert_file and egress.ca_key_file go together: set both, or neither for a CA generated into data_dir"})
	}
	return out, errs
}

// httpToken reports whether s can be a header's name.
func httpToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c > 0x7e || c <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", c) {
			return false
		}
	}
	return true
}

// expandCredentials replaces ${VAR} in the credentials' headers and
// passwords with the environment's VAR, or reports every variable that is
// not set.
func (c *EgressConfig) expandCredentials(env func(string) string) []*ConfigError {
	var errs []*ConfigError
	for i := range c.Credentials {
		cr := &c.Credentials[i]
		for field, s := range map[string]*Secret{"header": &cr.Header, "password": &cr.Password} {
			key := fmt.Sprintf("egress.credentials[%d].%s", i, field)
			*s = Secret(expandEnvRefs(key, string(*s), env, &errs, nil))
		}
	}
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
	creds, errs := c.credentials()
	if len(errs) > 0 {
		return nil, joinConfigErrors(errs)
	}
	ecfg := egress.Config{
		Policy: pol, MaxConnections: c.MaxConnections, MaxOpen: c.MaxOpenConnections, MaxBytes: c.MaxBytes,
		DialTimeout: c.DialTimeout, IdleTimeout: c.IdleTimeout, Credentials: creds, Logger: log,
		Texts: catalog.Or(s.cfg.Locale),
	}
	if len(creds) > 0 {
		var err error
		if ecfg.CA, err = loadEgressCA(s.cfg, log); err != nil {
			return nil, err
		}
		if ecfg.UpstreamRoots, err = upstreamRoots(c.UpstreamCAFile); err != nil {
			return nil, err
		}
		ecfg.SystemRootsPEM = systemRoots(log)
	}
	em := newEgressMetrics(s.metrics)
	ecfg.Audit = em.audit
	p, err := egress.New(ecfg)
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	s.closers = append(s.closers, p.Close)
	return p, nil
}

// loadEgressCA reads the CA egress.ca_cert_file and ca_key_file name, or
// the one under data_dir/egress-ca/, made at first start (its key
// readable by Baton's user alone).
func loadEgressCA(cfg Config, log *slog.Logger) (*egress.CA, error) {
	certFile, keyFile := cfg.Egress.CACertFile, cfg.Egress.CAKeyFile
	if certFile == "" {
		dir := filepath.Join(cfg.DataDir, "egress-ca")
		certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
		if _, err := os.Stat(keyFile); errors.Is(err, fs.ErrNotExist) {
			certPEM, keyPEM, err := egress.NewCA(time.Now())
			if err != nil {
				return nil, err
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("egress CA: %w", err)
			}
			if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
				return nil, fmt.Errorf("egress CA: %w", err)
			}
			if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
				return nil, fmt.Errorf("egress CA: %w", err)
			}
			log.Info("made the egress proxy's CA for the hosts with credentials", "cert", certFile)
		}
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, &ConfigError{Key: "egress.ca_cert_file", Msg: err.Error()}
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, &ConfigError{Key: "egress.ca_key_file", Msg: err.Error()}
	}
	ca, err := egress.ParseCA(certPEM, keyPEM)
	if err != nil {
		return nil, &ConfigError{Key: "egress.ca_cert_file", Msg: fmt.Sprintf("%s: %v", certFile, err)}
	}
	return ca, nil
}

// upstreamRoots are the roots the hosts with credentials are verified
// against: the system's, and those of file (egress.upstream_ca_file).
func upstreamRoots(file string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if file == "" {
		return pool, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, &ConfigError{Key: "egress.upstream_ca_file", Msg: err.Error()}
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, &ConfigError{Key: "egress.upstream_ca_file", Msg: file + " holds no PEM certificate"}
	}
	return pool, nil
}

// systemRootFiles are where Linux distributions keep the system's roots,
// as Go's crypto/x509 looks for them.
var systemRootFiles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// systemRoots returns the system's roots as PEM, for the sandbox's
// bundle: with Baton's CA added, its TLS clients still trust every other
// host.
func systemRoots(log *slog.Logger) []byte {
	for _, f := range systemRootFiles {
		if b, err := os.ReadFile(f); err == nil {
			return b
		}
	}
	log.Warn("no system CA bundle found: commands in the sandbox trust only Baton's CA, and TLS to hosts without credentials fails")
	return nil
}

// egressCheck is baton doctor's line on the egress proxy (configured):
// whether Bash's commands will reach it, and with what.
func egressCheck(cfg Config, sb *sandbox.Sandbox, sbErr error) check {
	const name = "sandbox.egress"
	c := cfg.Egress
	switch {
	case sbErr != nil || sb == nil:
		return warning(name, "egress is configured, but without a working sandbox no command uses the proxy", "see the sandbox line")
	case !sb.Isolated():
		return warning(name, "egress is configured, but Bash is disabled or runs on the host (tools.bash.sandbox): commands do not go through the proxy", "see the sandbox line")
	case bridgeBinary(cfg, slog.New(slog.DiscardHandler)) == "":
		return failure(name, "the baton binary cannot be found to run as the sandbox's egress bridge", "run baton from a path that os.Executable can find")
	}
	detail := fmt.Sprintf("Bash reaches the network through the egress proxy only: %d allow and %d deny entries, default %s", len(c.Allow), len(c.Deny), c.Default)
	if n := len(c.Credentials); n > 0 {
		detail += fmt.Sprintf("; credentials for %d hosts, added over TLS Baton terminates", n)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		return warning(name, detail+"; curl is not installed, the client agents reach for first", "install curl")
	}
	return passed(name, detail)
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
