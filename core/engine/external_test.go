package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/catalog"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/policy"
	"github.com/baton-bot/baton/core/tools"
)

// fakeTool is an external tool: it answers with its name and the
// arguments, and may load others.
type fakeTool struct {
	name string
	kind policy.Kind
	load []string
	ran  *[]string
}

func (t fakeTool) Name() string                      { return t.name }
func (t fakeTool) Description(*catalog.Texts) string { return "the fake " + t.name }
func (t fakeTool) Schema(*catalog.Texts) json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{}}`)
}
func (t fakeTool) PolicyKind() policy.Kind { return t.kind }
func (t fakeTool) MeterLabel() string      { return "mcp" }
func (t fakeTool) Call(_ context.Context, _ *tools.Env, args json.RawMessage) tools.Result {
	*t.ran = append(*t.ran, t.name)
	return tools.Result{Text: t.name + " got " + string(args), Load: t.load}
}

// fakeExternals opens runs with the same tools and records the scopes.
type fakeExternals struct {
	mu      sync.Mutex
	scopes  []engine.ExternalScope
	offered []tools.Tool
	hidden  []tools.Tool
	closed  int
	ran     []string
}

func (f *fakeExternals) Open(_ context.Context, s engine.ExternalScope) engine.ExternalTools {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scopes = append(f.scopes, s)
	return (*fakeRun)(f)
}

type fakeRun fakeExternals

func (r *fakeRun) Offer(context.Context) []tools.Tool { return r.offered }
func (r *fakeRun) Lookup(name string) (tools.Tool, bool) {
	for _, t := range append(slices.Clone(r.offered), r.hidden...) {
		if t.Name() == name {
			return t, true
		}
	}
	return nil, false
}
func (r *fakeRun) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed++
	return nil
}

func newFakeExternals() *fakeExternals {
	f := &fakeExternals{}
	f.offered = []tools.Tool{
		fakeTool{name: "mcp__fake__read", kind: policy.ExternalRead, ran: &f.ran},
		fakeTool{name: "mcp__fake__write", kind: policy.External, ran: &f.ran},
		fakeTool{name: "mcp_search", kind: policy.ExternalRead, load: []string{"mcp__fake__hidden"}, ran: &f.ran},
	}
	f.hidden = []tools.Tool{fakeTool{name: "mcp__fake__hidden", kind: policy.ExternalRead, ran: &f.ran}}
	return f
}

// TestExternalTools: the run's external tools are offered in its
// movement, their results reach the next request, a tool loaded by a
// result is offered from then on, a read-only one runs and another is
// asked, and the run closes what it opened — also when it parks.
func TestExternalTools(t *testing.T) {
	ext := newFakeExternals()
	var f *fixture
	f = newFixture(t, nil, withRules(&f), func(c *engine.Config) { c.Externals = ext })
	f.srv.Script(
		llmtest.Call("mcp__fake__read", `{"q":"n0nce"}`),
		llmtest.Call("mcp_search", `{"query":"hidden"}`),
		llmtest.Call("mcp__fake__hidden", `{}`),
		llmtest.Call("mcp__fake__write", `{"x":1}`),
	)
	j := f.start("chat", "use the servers")
	fin := f.run(j)
	if fin.To != core.JobWaitingApproval || fin.Approval == nil || fin.Approval.Tool != "mcp__fake__write" || fin.Approval.Rule != "default" {
		t.Fatalf("finish = %+v, want a park for mcp__fake__write by default", fin)
	}
	reqs := f.srv.Requests()
	if got := reqs[0].ToolNames(); !slices.Contains(got, "mcp__fake__read") || slices.Contains(got, "mcp__fake__hidden") || got[len(got)-1] != "transition" {
		t.Errorf("first request's tools %v", got)
	}
	if last := reqs[1].Messages[len(reqs[1].Messages)-1]; !strings.Contains(last.Text(), "mcp__fake__read got {\"q\":\"n0nce\"}") {
		t.Errorf("the result does not reach the next request: %+v", last)
	}
	if got := reqs[2].ToolNames(); !slices.Contains(got, "mcp__fake__hidden") || got[len(got)-1] != "transition" {
		t.Errorf("after the search the tools are %v", got)
	}
	if !slices.Equal(ext.ran, []string{"mcp__fake__read", "mcp_search", "mcp__fake__hidden"}) {
		t.Errorf("ran %v", ext.ran)
	}
	if len(ext.scopes) != 1 || ext.closed != 1 || ext.scopes[0].Channel != "console:c" || ext.scopes[0].Piece != "chat" || ext.scopes[0].Dir != f.ws {
		t.Errorf("scopes %+v, closed %d", ext.scopes, ext.closed)
	}

	// Approved, the call runs once in a new run, whose movement offers
	// the loaded tool again.
	j = decide(t, f, f.finish(j, fin), core.VerdictApprove, "console:alice", "")
	f.srv.Script(llmtest.Transition("COMPLETE", "done"))
	if fin := f.run(j); fin.To != core.JobSucceeded {
		t.Fatalf("after approval: %+v", fin)
	}
	if !slices.Equal(ext.ran, []string{"mcp__fake__read", "mcp_search", "mcp__fake__hidden", "mcp__fake__write"}) {
		t.Errorf("ran %v", ext.ran)
	}
	reqs = f.srv.Requests()
	if got := reqs[len(reqs)-1].ToolNames(); !slices.Contains(got, "mcp__fake__hidden") {
		t.Errorf("the resumed movement lost the loaded tool: %v", got)
	}
	if ext.closed != 2 {
		t.Errorf("closed %d times, want 2", ext.closed)
	}
}
