package main

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/mcp"
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

// mcpExternals gives the engine the MCP servers' tools for each run of a
// job.
type mcpExternals struct{ m *mcp.Manager }

var _ engine.Externals = mcpExternals{}

func (x mcpExternals) Open(_ context.Context, s engine.ExternalScope) engine.ExternalTools {
	return x.m.Open(mcp.Scope{Channel: s.Channel, Piece: s.Piece, Dir: s.Dir, Event: s.Event})
}
