package mcp

import (
	"context"
	"fmt"
	"os"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Report is what Inspect found of one server.
type Report struct {
	Server string
	// Transport is "stdio" (with Target the command) or "http" (Target
	// the URL).
	Transport, Target string
	Channels, Pieces  []string // empty: every one
	Tools             []ToolReport
	// Err says why the server could not be started, reached or listed;
	// nil when it answered.
	Err error
}

// ToolReport is one tool a server lists.
type ToolReport struct {
	Name     string // the model's name for it; "" when disabled
	Remote   string // the server's
	Disabled bool   // left out by enabled_tools or disabled_tools
	ReadOnly bool   // readOnlyHint: true
}

// Inspect starts or reaches every configured server at once (stdio
// servers in a temporary directory, each within its startup timeout),
// lists its tools, disabled ones included, and closes it again. The
// tools found are cached as a job would cache them.
func (m *Manager) Inspect(ctx context.Context) []Report {
	dir, err := os.MkdirTemp("", "baton-mcp-")
	if err == nil {
		defer os.RemoveAll(dir)
	}
	s := &Session{m: m, scope: Scope{Dir: dir, Logger: m.log}, conns: map[string]*conn{}, servers: m.servers}
	defer s.Close()
	reports := make([]Report, len(m.servers))
	var wg sync.WaitGroup
	for i, srv := range m.servers {
		r := Report{Server: srv.cfg.Name, Transport: "http", Target: srv.cfg.URL, Channels: srv.cfg.Channels, Pieces: srv.cfg.Pieces}
		if srv.cfg.Command != "" {
			r.Transport, r.Target = "stdio", srv.cfg.Command
		}
		reports[i] = r
		if err != nil {
			reports[i].Err = fmt.Errorf("a working directory for the server: %w", err)
			continue
		}
		wg.Go(func() {
			listed, err := s.listAll(ctx, srv)
			if err != nil {
				reports[i].Err = err
				return
			}
			srv.remember(listed)
			adapted := map[string]toolDef{}
			for _, d := range adaptTools(srv.cfg.Name, listed, srv.allowed) {
				adapted[d.remote] = d
			}
			for _, t := range listed {
				if t == nil {
					continue
				}
				d, ok := adapted[t.Name]
				reports[i].Tools = append(reports[i].Tools, ToolReport{
					Name: d.name, Remote: t.Name, Disabled: !ok,
					ReadOnly: t.Annotations != nil && t.Annotations.ReadOnlyHint,
				})
			}
		})
	}
	wg.Wait()
	return reports
}

// listAll connects to srv and lists every tool it has.
func (s *Session) listAll(ctx context.Context, srv *server) ([]*sdk.Tool, error) {
	c, err := s.conn(ctx, srv)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, srv.cfg.StartupTimeout)
	defer cancel()
	var listed []*sdk.Tool
	for t, err := range c.cs.Tools(lctx, nil) {
		if err != nil {
			c.dead.Store(true)
			return nil, c.explain(fmt.Errorf("tools/list: %w", err))
		}
		listed = append(listed, t)
	}
	return listed, nil
}
