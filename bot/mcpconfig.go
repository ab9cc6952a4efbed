package main

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// MCPConfig is the operator's MCP servers, whose tools the agent may call
// (core/mcp). Servers are read from the file only: pieces, chat text and
// workspace files can never define or change one.
type MCPConfig struct {
	// MaxTools is how many MCP tools a job may be offered at once; past
	// it the model gets mcp_search instead, which loads the ones it needs.
	MaxTools int `yaml:"max_tools"`
	// Servers by name (^[a-z0-9_-]+$); the model sees their tools as
	// mcp__<name>__<tool>.
	Servers map[string]MCPServer `yaml:"servers"`
}

// MCPServer is one server: a command Baton starts per job (stdio) or a
// Streamable HTTP endpoint. The values of Env and Headers, and URL, may
// hold ${VAR}, replaced at load from Baton's environment; a variable that
// is not set is a configuration error.
type MCPServer struct {
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]Secret `yaml:"env"`
	URL     string            `yaml:"url"`
	Headers map[string]Secret `yaml:"headers"`
	// StartupTimeout bounds the start and handshake (0: 10s);
	// CallTimeout each call (0: 60s).
	StartupTimeout time.Duration `yaml:"startup_timeout"`
	CallTimeout    time.Duration `yaml:"call_timeout"`
	// EnabledTools, when not empty, are the only tools offered;
	// DisabledTools are never offered, nor called.
	EnabledTools  []string `yaml:"enabled_tools"`
	DisabledTools []string `yaml:"disabled_tools"`
	// Channels (platform-qualified) and Pieces the server is bound to;
	// empty: all.
	Channels []string `yaml:"channels"`
	Pieces   []string `yaml:"pieces"`

	// Secrets are the values the server's ${VAR}s brought in, which Baton
	// redacts by value from whatever the server says (its errors, its
	// stderr, its results) before a log, a job event, the model or a
	// person sees it.
	Secrets []Secret `yaml:"-"`
}

// MCP defaults for servers that leave a timeout at zero.
const (
	defaultMCPStartup = 10 * time.Second
	defaultMCPCall    = 60 * time.Second
)

// mcpServerName is the form of a server's name.
var mcpServerName = regexp.MustCompile(`^[a-z0-9_-]+$`)

// envRef finds the ${VAR}s of a value.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnvRefs returns value (the value of key) with each ${VAR} replaced
// by Baton's environment's VAR. A variable that is not set (or empty) adds
// a *ConfigError naming key to errs; got, when not nil, is given each
// value brought in (a secret to redact).
func expandEnvRefs(key, value string, env func(string) string, errs *[]*ConfigError, got func(string)) string {
	return envRef.ReplaceAllStringFunc(value, func(ref string) string {
		name := ref[2 : len(ref)-1]
		val, _, err := envValue(env, name)
		switch {
		case err != nil:
			*errs = append(*errs, &ConfigError{Key: key, Msg: err.Error()})
		case val == "":
			*errs = append(*errs, &ConfigError{Key: key, Msg: fmt.Sprintf("refers to ${%s}, which is not set in Baton's environment", name)})
		case got != nil:
			got(val)
		}
		return val
	})
}

// expand replaces the ${VAR}s of the servers' url, env and headers with
// Baton's environment, recording each value brought in among the
// server's Secrets. A variable that is not set (or empty) is a
// *ConfigError naming the key that refers to it.
func (c *MCPConfig) expand(env func(string) string) []*ConfigError {
	var errs []*ConfigError
	for _, name := range slices.Sorted(maps.Keys(c.Servers)) {
		s := c.Servers[name]
		s.Secrets = nil
		key := "mcp.servers." + name
		sub := func(k, v string) string {
			return expandEnvRefs(k, v, env, &errs, func(val string) {
				if !slices.Contains(s.Secrets, Secret(val)) {
					s.Secrets = append(s.Secrets, Secret(val))
				}
			})
		}
		s.URL = sub(key+".url", s.URL)
		s.Env = expandMap(s.Env, key+".env.", sub)
		s.Headers = expandMap(s.Headers, key+".headers.", sub)
		c.Servers[name] = s
	}
	return errs
}

func expandMap(m map[string]Secret, prefix string, sub func(k, v string) string) map[string]Secret {
	if m == nil {
		return nil
	}
	out := make(map[string]Secret, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out[k] = Secret(sub(prefix+k, m[k].Reveal()))
	}
	return out
}

// problems returns what is wrong with the servers, each a *ConfigError
// naming its key (mcp.servers.github.url). The pieces they name are
// checked once the pieces are loaded (newSystem).
func (c MCPConfig) problems() []*ConfigError {
	var errs []*ConfigError
	fail := func(key, msg string) { errs = append(errs, &ConfigError{Key: key, Msg: msg}) }
	if c.MaxTools <= 0 {
		fail("mcp.max_tools", fmt.Sprintf("must be positive, got %d", c.MaxTools))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Servers)) {
		s, key := c.Servers[name], "mcp.servers."+name
		if !mcpServerName.MatchString(name) {
			fail(key, fmt.Sprintf("the server's name %q must match ^[a-z0-9_-]+$ (lower-case letters, digits, _ and -)", name))
		}
		switch {
		case s.Command != "" && s.URL != "":
			fail(key, "has both command (a server Baton starts) and url (a server it connects to): keep one")
		case s.Command == "" && s.URL == "":
			fail(key, "needs command (a server Baton starts, spoken to over stdio) or url (a Streamable HTTP endpoint)")
		case s.Command != "":
			if len(s.Headers) > 0 {
				fail(key+".headers", "are for a url server; a command server takes env")
			}
		default:
			// Before expansion (decodeConfig) a ${VAR} is checked later.
			if u, err := url.Parse(s.URL); !strings.Contains(s.URL, "${") && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
				fail(key+".url", "must be an http:// or https:// URL")
			}
			if len(s.Args) > 0 {
				fail(key+".args", "are for a command server")
			}
			if len(s.Env) > 0 {
				fail(key+".env", "is for a command server; a url server takes headers")
			}
		}
		if s.StartupTimeout < 0 {
			fail(key+".startup_timeout", fmt.Sprintf("must not be negative, got %s (0: %s)", s.StartupTimeout, defaultMCPStartup))
		}
		if s.CallTimeout < 0 {
			fail(key+".call_timeout", fmt.Sprintf("must not be negative, got %s (0: %s)", s.CallTimeout, defaultMCPCall))
		}
		for k := range s.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				fail(key+".env", fmt.Sprintf("%q is not a variable name", k))
			}
		}
		for j, ch := range s.Channels {
			if msg := idProblem(ch, channelKinds); msg != "" {
				fail(fmt.Sprintf("%s.channels[%d]", key, j), msg)
			}
		}
		for _, list := range []struct {
			name  string
			tools []string
		}{{"enabled_tools", s.EnabledTools}, {"disabled_tools", s.DisabledTools}} {
			for j, tool := range list.tools {
				if strings.TrimSpace(tool) == "" {
					fail(fmt.Sprintf("%s.%s[%d]", key, list.name, j), "must name a tool as the server names it")
				}
			}
		}
	}
	return errs
}

// pieceProblems returns the servers' pieces that known does not know.
func (c MCPConfig) pieceProblems(known func(string) bool) []*ConfigError {
	var errs []*ConfigError
	for _, name := range slices.Sorted(maps.Keys(c.Servers)) {
		for j, p := range c.Servers[name].Pieces {
			if !known(p) {
				errs = append(errs, &ConfigError{Key: fmt.Sprintf("mcp.servers.%s.pieces[%d]", name, j), Msg: fmt.Sprintf("no piece named %q", p)})
			}
		}
	}
	return errs
}
