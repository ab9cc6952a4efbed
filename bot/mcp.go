package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/mcp"
	"github.com/baton-bot/baton/core/policy"
)

// mcpManager builds the manager of the configured MCP servers, in name
// order; nil when there are none.
func mcpManager(cfg Config, meter mcp.Meter, log *slog.Logger) *mcp.Manager {
	if len(cfg.MCP.Servers) == 0 {
		return nil
	}
	var servers []mcp.ServerConfig
	for _, name := range slices.Sorted(maps.Keys(cfg.MCP.Servers)) {
		s := cfg.MCP.Servers[name]
		sc := mcp.ServerConfig{
			Name: name, Command: s.Command, Args: slices.Clone(s.Args), URL: s.URL,
			StartupTimeout: s.StartupTimeout, CallTimeout: s.CallTimeout,
			EnabledTools: slices.Clone(s.EnabledTools), DisabledTools: slices.Clone(s.DisabledTools),
			Channels: slices.Clone(s.Channels), Pieces: slices.Clone(s.Pieces),
			Env: reveal(s.Env), Headers: reveal(s.Headers),
		}
		for _, v := range s.Secrets {
			sc.Secrets = append(sc.Secrets, v.Reveal())
		}
		servers = append(servers, sc)
	}
	return mcp.New(mcp.Config{Servers: servers, MaxTools: cfg.MCP.MaxTools, Meter: meter, Logger: log})
}

// reveal returns the values of m, for the one place that hands them to
// the server they are meant for.
func reveal(m map[string]Secret) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v.Reveal()
	}
	return out
}

// externals is what the engine gets of the MCP servers: nil without any.
func (s *system) externals() engine.Externals {
	if s.mcp == nil {
		return nil
	}
	return mcpExternals{m: s.mcp}
}

// mcpChannels tells the conversation service which servers a channel's
// jobs may use (/baton mcp).
type mcpChannels struct{ m *mcp.Manager }

func (x mcpChannels) ForChannel(channel string) []chat.MCPServer {
	var out []chat.MCPServer
	for _, b := range x.m.ForChannel(channel) {
		out = append(out, chat.MCPServer{Name: b.Server, Pieces: b.Pieces, Tools: b.Tools, Listed: b.Listed})
	}
	return out
}

// chatMCP is what the conversation service gets of the MCP servers: nil
// without any.
func (s *system) chatMCP() chat.MCPServers {
	if s.mcp == nil {
		return nil
	}
	return mcpChannels{m: s.mcp}
}

// mcpExternals gives the engine the MCP servers' tools for each run of a
// job.
type mcpExternals struct{ m *mcp.Manager }

var _ engine.Externals = mcpExternals{}

func (x mcpExternals) Open(_ context.Context, s engine.ExternalScope) engine.ExternalTools {
	return x.m.Open(mcp.Scope{Channel: s.Channel, Piece: s.Piece, Dir: s.Dir, Event: s.Event, Elicit: s.Ask})
}

// mcpCommand runs `baton mcp list`: each configured server started or
// reached, its tools listed with what a call of each would meet (allowed,
// asked, denied by the approvals rules that hold in every channel, or
// disabled), and what failed. Exit 1 when a server failed.
func (m *Main) mcpCommand(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageErr("baton mcp: a subcommand is required: list")
	}
	if wantsHelp(args[:1]) {
		var cf commonFlags
		m.showHelp("mcp", namedFlags{fs: m.flagSet("mcp", &cf, false)})
		return &exitError{code: exitOK, err: flag.ErrHelp, reported: true}
	}
	if args[0] != "list" {
		return usageErr("baton mcp: unknown subcommand %q: want list", args[0])
	}
	if err := m.configOnly("mcp", args[1:]); err != nil {
		return err
	}
	mgr := mcpManager(m.Config, nil, m.Logger)
	if mgr == nil {
		fmt.Fprintln(m.Stdout, "baton: no MCP servers are configured (mcp.servers)")
		return nil
	}
	rules, errs := m.Config.Approvals.policyRules()
	if len(errs) > 0 {
		return configErr("mcp", joinConfigErrors(errs))
	}
	gate := policy.New(rules, nil)
	failed := 0
	for _, r := range mgr.Inspect(ctx) {
		fmt.Fprintf(m.Stdout, "%s (%s: %s; channels: %s; pieces: %s)\n", r.Server, r.Transport, redactURL(r.Target), allOr(r.Channels), allOr(r.Pieces))
		if r.Err != nil {
			failed++
			fmt.Fprintf(m.Stdout, "  failed: %v\n", r.Err)
			continue
		}
		if len(r.Tools) == 0 {
			fmt.Fprintln(m.Stdout, "  no tools")
		}
		for _, t := range r.Tools {
			if t.Disabled {
				fmt.Fprintf(m.Stdout, "  %-40s %s\n", t.Remote, "disabled")
				continue
			}
			kind := policy.External
			if t.ReadOnly {
				kind = policy.ExternalRead
			}
			d, _ := gate.Decide(ctx, policy.Request{Kind: kind, Tool: t.Name, Subject: "{}"})
			status := map[policy.Action]string{policy.Allow: "allowed", policy.Ask: "needs approval", policy.Deny: "denied"}[d.Action]
			if d.Rule != "default" {
				status += " (" + d.Rule + ")"
			}
			fmt.Fprintf(m.Stdout, "  %-40s %s\n", t.Name, status)
		}
	}
	if failed > 0 {
		return &exitError{code: exitInternal, err: fmt.Errorf("baton mcp list: %d of %d servers failed", failed, len(mgr.Servers()))}
	}
	return nil
}

// allOr lists names, or says all.
func allOr(names []string) string {
	if len(names) == 0 {
		return "all"
	}
	return strings.Join(names, ", ")
}
