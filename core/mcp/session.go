package mcp

import (
	"context"
	"errors"
	"fmt"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-bot/baton/core/tools"
)

// errClosed is the error of a call on a closed session.
var errClosed = errors.New("the job's MCP session is closed")

// Session is the MCP side of one run of a job: the tools of the servers
// bound to it, and its live connections. Its methods are safe for
// concurrent use; Close ends every connection.
type Session struct {
	m       *Manager
	scope   Scope
	servers []*server // bound to the scope

	mu      sync.Mutex
	conns   map[string]*conn // guarded by mu: live connections by server
	closed  bool             // guarded by mu
	listed  bool             // guarded by mu: tools holds the allowed tools
	tools   []*Tool          // guarded by mu, in the servers' order
	byName  map[string]tools.Tool
	offered []tools.Tool
}

// Offer returns the tools to offer the model: every allowed tool of the
// bound servers, or, when they are more than Config.MaxTools, the one tool
// mcp_search. The first call lists the tools of the servers whose lists are
// not cached yet, starting them (at most each one's startup timeout, the
// servers at once); a server that cannot be listed is left out, with a job
// event saying why, and listed again by the next job.
func (s *Session) Offer(ctx context.Context) []tools.Tool {
	s.list(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.offered
}

// Lookup returns the allowed tool with the model's name for it (offered
// or found through mcp_search), or mcp_search itself; false before Offer
// and for a disabled or unknown tool.
func (s *Session) Lookup(name string) (tools.Tool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byName[name]
	return t, ok
}

// list fills the session's tools, once.
func (s *Session) list(ctx context.Context) {
	s.mu.Lock()
	if s.listed {
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	defs := make([][]toolDef, len(s.servers))
	var wg sync.WaitGroup
	for i, srv := range s.servers {
		if d, ok := srv.cached(); ok {
			defs[i] = d
			continue
		}
		wg.Go(func() {
			d, err := s.listServer(ctx, srv)
			if err != nil {
				s.m.log.Warn("an MCP server's tools could not be listed; its tools are not offered", "server", srv.cfg.Name, "err", err)
				s.event("mcp_unavailable", fmt.Sprintf("server=%s: %s", srv.cfg.Name, clip(oneLine(err.Error()), 400)))
				return
			}
			defs[i] = d
		})
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listed {
		return
	}
	s.byName = map[string]tools.Tool{}
	for i, srv := range s.servers {
		for _, d := range defs[i] {
			t := &Tool{s: s, srv: srv, def: d}
			s.tools = append(s.tools, t)
			s.byName[t.def.name] = t
		}
	}
	if len(s.tools) > s.m.cfg.MaxTools {
		search := &searchTool{s: s}
		s.byName[SearchTool] = search
		s.offered = []tools.Tool{search}
	} else {
		for _, t := range s.tools {
			s.offered = append(s.offered, t)
		}
	}
	s.listed = true
}

// listServer connects to srv for this session, lists its tools (every
// page) and caches them.
func (s *Session) listServer(ctx context.Context, srv *server) ([]toolDef, error) {
	listed, err := s.listAll(ctx, srv)
	if err != nil {
		return nil, err
	}
	return srv.remember(listed), nil
}

// conn returns the session's live connection to srv, connecting when it
// has none (or the last one failed).
func (s *Session) conn(ctx context.Context, srv *server) (*conn, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errClosed
	}
	old := s.conns[srv.cfg.Name]
	s.mu.Unlock()
	if old != nil {
		if old.alive() {
			return old, nil
		}
		old.close()
	}
	c, err := s.connect(ctx, srv)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		go c.close()
		return nil, errClosed
	}
	if cur := s.conns[srv.cfg.Name]; cur != nil && cur != old && cur.alive() {
		go c.close() // another call of the session connected meanwhile
		return cur, nil
	}
	s.conns[srv.cfg.Name] = c
	return c, nil
}

// drop ends c, a connection that failed or hung, so that the next call
// connects anew.
func (s *Session) drop(c *conn) {
	c.dead.Store(true)
	go c.close()
}

// Close ends every connection of the session and returns once every
// stdio server's process group is gone. Later calls are tool errors.
func (s *Session) Close() error {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[string]*conn{}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(c.close)
	}
	wg.Wait()
	return nil
}

// event records a job event, when the scope takes them.
func (s *Session) event(kind, detail string) {
	if s.scope.Event != nil {
		s.scope.Event(kind, detail)
	}
}

// elicitHandler answers srv's elicitation requests through the scope's
// Elicit: the question goes to the person behind the job, the answer
// back as the form's one field, the call's timeout paused meanwhile.
// Without Elicit, and for forms Baton cannot put as one question, the
// request is declined.
func (s *Session) elicitHandler(srv *server, c *conn) func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	return func(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		if s.scope.Elicit == nil || req.Params == nil || req.Params.Mode == "url" {
			return &sdk.ElicitResult{Action: "decline"}, nil
		}
		field, ok := oneField(req.Params.RequestedSchema)
		if !ok {
			return &sdk.ElicitResult{Action: "decline"}, nil
		}
		question := srv.redact.redact(req.Params.Message)
		s.event("mcp_elicit", fmt.Sprintf("server=%s: %s", srv.cfg.Name, clip(oneLine(question), 300)))
		// The person's time is not the server's: the call's timeout
		// waits.
		resume := c.pause()
		defer resume()
		answer, ok, err := s.scope.Elicit(ctx, srv.cfg.Name, question)
		if err != nil {
			return nil, err
		}
		if !ok {
			return &sdk.ElicitResult{Action: "decline"}, nil
		}
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{field: answer}}, nil
	}
}

// oneField returns the name of the one string property a form asks for
// ("answer" when the form asks for none).
func oneField(schema any) (string, bool) {
	m, _ := schema.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	if len(props) == 0 {
		return "answer", true
	}
	if len(props) != 1 {
		return "", false
	}
	for name, p := range props {
		pm, _ := p.(map[string]any)
		if t, _ := pm["type"].(string); t != "" && t != "string" {
			return "", false
		}
		return name, true
	}
	return "", false
}
