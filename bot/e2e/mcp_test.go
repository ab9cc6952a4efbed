package e2e_test

// MCP servers' tools over the whole stack: the test server of core/mcp
// (this test binary, over stdio, and in process over Streamable HTTP), the
// scripted model calling them, the chat and Slack worlds around.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/mcp"
	"github.com/baton-bot/baton/core/mcp/mcptest"
)

func TestMain(m *testing.M) { mcptest.Main(m) }

// mcpStdio is the test server over stdio as name, with o's bad inputs.
func mcpStdio(t testing.TB, name string, o mcptest.Options) mcp.ServerConfig {
	exe, args := mcptest.Command(t, o)
	return mcp.ServerConfig{Name: name, Command: exe, Args: args}
}

// newMCPChat is the chat world with the MCP servers.
func newMCPChat(t *testing.T, opts stackOptions) *chatWorld {
	t.Helper()
	sys := startStack(t, opts)
	return &chatWorld{t: t, srv: sys.LLM, store: sys.Store, svc: sys.Service}
}

func nonce(t testing.TB) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "n0nce-" + hex.EncodeToString(b)
}

// toolResults returns the contents of the tool messages of request n that
// answer a call of tool.
func toolResults(t testing.TB, srv *llmtest.Server, n int, tool string) []string {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) <= n {
		t.Fatalf("%d model requests, want a request %d", len(reqs), n)
	}
	names := map[string]string{}
	var out []string
	for _, m := range reqs[n].Messages {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Name
		}
		if m.Role == "tool" && names[m.ToolCallID] == tool {
			out = append(out, m.Content)
		}
	}
	return out
}

// jobEvents returns the task's latest job's events as "kind detail".
func (w *chatWorld) jobEvents() string {
	w.t.Helper()
	jobs, err := w.store.Jobs(context.Background(), core.JobFilter{TaskID: w.task().ID, Limit: 1})
	if err != nil || len(jobs) == 0 {
		w.t.Fatalf("jobs: %v %v", jobs, err)
	}
	evs, err := w.store.Events(context.Background(), jobs[0].ID)
	if err != nil {
		w.t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.Kind + " " + e.Detail + "\n")
	}
	return b.String()
}

// childProcesses returns the processes whose parent is this test
// process.
func childProcesses() []string {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	me := strconv.Itoa(os.Getpid())
	var out []string
	for _, p := range stats {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == me {
			out = append(out, s[:strings.LastIndexByte(s, ')')+1])
		}
	}
	return out
}

// TestMCPEchoNonce: the model calls mcp__echo__echo with a random nonce;
// the server's answer holding it reaches the model's next request, over
// stdio and over Streamable HTTP.
func TestMCPEchoNonce(t *testing.T) {
	h := mcptest.StartHTTP(t, mcptest.Options{}, nil)
	for _, tc := range []struct {
		name string
		srv  mcp.ServerConfig
	}{
		{"stdio", mcpStdio(t, "echo", mcptest.Options{})},
		{"http", mcp.ServerConfig{Name: "echo", URL: h.URL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newMCPChat(t, stackOptions{MCP: []mcp.ServerConfig{tc.srv}})
			n := nonce(t)
			w.srv.Script(llmtest.Call("mcp__echo__echo", `{"text":"`+n+`"}`), llmtest.Transition("COMPLETE", "echoed"))
			w.say("U1", "<@UBATON> echo something")
			w.waitJob(core.JobSucceeded)
			if got := toolResults(t, w.srv, 1, "mcp__echo__echo"); !slices.Equal(got, []string{"echo: " + n}) {
				t.Errorf("the next request carries %q, want the echo of %s", got, n)
			}
			if !slices.Contains(w.srv.Requests()[0].ToolNames(), "mcp__echo__echo") {
				t.Errorf("first request's tools: %v", w.srv.Requests()[0].ToolNames())
			}
			if ev := w.jobEvents(); !strings.Contains(ev, "mcp_call server=echo tool=echo") || !strings.Contains(ev, "outcome=ok") {
				t.Errorf("events:\n%s", ev)
			}
			if left := childProcesses(); len(left) > 0 {
				t.Errorf("processes left after the job: %v", left)
			}
		})
	}
}

// TestMCPUnboundAndDisabled: a server bound to another channel is not
// offered, nor a disabled tool; a call the model invents for one gets a
// tool error, and the server never sees it.
func TestMCPUnboundAndDisabled(t *testing.T) {
	h := mcptest.StartHTTP(t, mcptest.Options{}, nil)
	w := newMCPChat(t, stackOptions{MCP: []mcp.ServerConfig{
		{Name: "here", URL: h.URL, Channels: []string{"slack:C1"}, DisabledTools: []string{"write"}},
		{Name: "there", URL: h.URL, Channels: []string{"slack:C2"}},
		{Name: "research", URL: h.URL, Pieces: []string{"research"}},
	}})
	w.srv.Script(
		llmtest.Calls(llmtest.Call("mcp__here__write", `{"text":"disabled"}`), llmtest.Call("mcp__there__write", `{"text":"unbound"}`)),
		llmtest.Transition("COMPLETE", "done"),
	)
	w.say("U1", "<@UBATON> write")
	w.waitJob(core.JobSucceeded)
	tools := w.srv.Requests()[0].ToolNames()
	if !slices.Contains(tools, "mcp__here__echo") {
		t.Errorf("the bound server's echo is not offered: %v", tools)
	}
	for _, name := range tools {
		if name == "mcp__here__write" || strings.HasPrefix(name, "mcp__there__") || strings.HasPrefix(name, "mcp__research__") {
			t.Errorf("offered %s", name)
		}
	}
	for _, tool := range []string{"mcp__here__write", "mcp__there__write"} {
		got := toolResults(t, w.srv, 1, tool)
		if len(got) != 1 || !strings.Contains(got[0], "There is no tool named") {
			t.Errorf("%s got %q, want the unknown-tool error", tool, got)
		}
	}
	if got := h.Writes(); len(got) > 0 {
		t.Errorf("the server was called: %v", got)
	}
}

// TestMCPWriteWaitsForApproval: a tool without readOnlyHint waits for the
// approval buttons, as Bash does, and runs once after Approve; a
// read-only one runs without asking.
func TestMCPWriteWaitsForApproval(t *testing.T) {
	w := newSlackWorldWith(t, stackOptions{MCP: []mcp.ServerConfig{mcpStdio(t, "echo", mcptest.Options{})}})
	w.slack.SetUser(slackApprovalRequester, "alice")
	const root = "1700.500"
	w.sys.LLM.Script(
		llmtest.Call("mcp__echo__echo", `{"text":"first"}`),
		llmtest.Call("mcp__echo__write", `{"text":"once"}`),
		llmtest.Transition("COMPLETE", "written"),
	)
	w.send(slackfake.MentionEvent("Ev500", slackApprovalRequester, "<@UBATON> write it", root, ""), "")
	msg := w.slackApprovalMessage(root)
	w.waitJob(root, core.JobWaitingApproval)
	if !strings.Contains(msg.Text, "mcp__echo__write") {
		t.Errorf("the approval message does not name the tool: %q", msg.Text)
	}
	writes := filepath.Join(w.slackApprovalTask(root).Workspace, mcptest.WritesFile)
	if _, err := os.Stat(writes); err == nil {
		t.Fatal("the write ran before the approval")
	}
	if left := childProcesses(); len(left) > 0 {
		t.Errorf("processes left while the job waits: %v", left)
	}
	if status := w.slackApprovalClick(msg, "approve", slackApprovalRequester); status != http.StatusOK {
		t.Fatalf("approve: %d", status)
	}
	w.waitJob(root, core.JobSucceeded)
	data, err := os.ReadFile(writes)
	if err != nil || string(data) != "once\n" {
		t.Errorf("writes %q, %v; want one write", data, err)
	}
	if left := childProcesses(); len(left) > 0 {
		t.Errorf("processes left after the job: %v", left)
	}
}

// TestMCPCrashAndHang: a server that crashes mid-call and one that hangs
// past call_timeout give the model tool errors and the job goes on; no
// process is left after it.
func TestMCPCrashAndHang(t *testing.T) {
	sc := mcpStdio(t, "flaky", mcptest.Options{})
	sc.CallTimeout = 1500 * time.Millisecond // room for a busy machine; the hang is 120 s
	w := newMCPChat(t, stackOptions{MCP: []mcp.ServerConfig{sc}})
	w.srv.Script(
		llmtest.Call("mcp__flaky__crash", `{}`),
		llmtest.Call("mcp__flaky__slow", `{"seconds":120}`),
		llmtest.Call("mcp__flaky__echo", `{"text":"still here"}`),
		llmtest.Transition("COMPLETE", "survived"),
	)
	w.say("U1", "<@UBATON> try the flaky server")
	w.waitJob(core.JobSucceeded)
	if got := toolResults(t, w.srv, 1, "mcp__flaky__crash"); len(got) != 1 || !strings.Contains(got[0], "stopped during the call") {
		t.Errorf("crash: %q", got)
	}
	if got := toolResults(t, w.srv, 2, "mcp__flaky__slow"); len(got) != 1 || !strings.Contains(got[0], "did not answer slow within 1.5s") {
		t.Errorf("hang: %q", got)
	}
	if got := toolResults(t, w.srv, 3, "mcp__flaky__echo"); !slices.Equal(got, []string{"echo: still here"}) {
		t.Errorf("echo after both: %q", got)
	}
	if ev := w.jobEvents(); !strings.Contains(ev, "outcome=unavailable") || !strings.Contains(ev, "outcome=timeout") {
		t.Errorf("events:\n%s", ev)
	}
	if left := childProcesses(); len(left) > 0 {
		t.Errorf("processes left after the job: %v", left)
	}
}

// syncBuffer is a log sink for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMCPSecretsStayHidden: the secrets of a server's env and headers
// reach the server, and appear in no log, job event, model request or
// chat message — even when the server says them, or fails saying them.
func TestMCPSecretsStayHidden(t *testing.T) {
	envSecret, headerSecret := "env-"+nonce(t), "hdr-"+nonce(t)
	h := mcptest.StartHTTP(t, mcptest.Options{}, http.Header{"Authorization": {"Bearer " + headerSecret}})
	stdio := mcpStdio(t, "vault", mcptest.Options{RequireEnv: "VAULT_TOKEN"})
	stdio.Env, stdio.Secrets = map[string]string{"VAULT_TOKEN": envSecret}, []string{envSecret}
	// A server that fails at start, saying its secret on stderr (it
	// panics on the protocol version it is given).
	broken := mcpStdio(t, "broken", mcptest.Options{Protocol: envSecret})
	broken.Secrets = []string{envSecret}
	web := mcp.ServerConfig{Name: "web", URL: h.URL, Headers: map[string]string{"Authorization": "Bearer " + headerSecret}, Secrets: []string{headerSecret}}
	var logs syncBuffer
	w := newMCPChat(t, stackOptions{MCP: []mcp.ServerConfig{stdio, broken, web}, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	w.srv.Script(
		llmtest.Call("mcp__vault__getenv", `{"name":"VAULT_TOKEN"}`),
		llmtest.Call("mcp__web__echo", `{"text":"hello"}`),
		llmtest.Transition("COMPLETE", "done"),
	)
	w.say("U1", "<@UBATON> use the vault")
	w.waitJob(core.JobSucceeded)
	if got := toolResults(t, w.srv, 1, "mcp__vault__getenv"); !slices.Equal(got, []string{"VAULT_TOKEN=[redacted]"}) {
		t.Errorf("the server's own word of its secret reached the model as %q", got)
	}
	if got := toolResults(t, w.srv, 2, "mcp__web__echo"); !slices.Equal(got, []string{"echo: hello"}) {
		t.Errorf("the HTTP server did not answer with its header: %q", got)
	}
	var seen []string
	for _, r := range w.srv.Requests() {
		for _, m := range r.Messages {
			seen = append(seen, m.Text())
			for _, c := range m.ToolCalls {
				seen = append(seen, c.Arguments)
			}
		}
	}
	events := w.jobEvents()
	if !strings.Contains(events, "mcp_unavailable server=broken") || !strings.Contains(events, `unsupported protocol version "[redacted]"`) {
		t.Errorf("events lack the broken server:\n%s", events)
	}
	seen = append(seen, logs.String(), events)
	seen = append(seen, w.outbox()...)
	for _, s := range seen {
		for _, secret := range []string{envSecret, headerSecret} {
			if strings.Contains(s, secret) {
				t.Errorf("a secret is shown: %.400s", s)
			}
		}
	}
}

// TestMCPManyToolsSearch: with 100 tools, the model's first request
// carries mcp_search instead of their schemas; a tool it loads is
// offered from the next request on, and runs.
func TestMCPManyToolsSearch(t *testing.T) {
	w := newMCPChat(t, stackOptions{MCP: []mcp.ServerConfig{mcpStdio(t, "lots", mcptest.Options{Tools: 100})}})
	w.srv.Script(
		llmtest.Call("mcp_search", `{"query":"tool number 42","names":["mcp__lots__many_42"]}`),
		llmtest.Call("mcp__lots__many_42", `{}`),
		llmtest.Transition("COMPLETE", "found it"),
	)
	w.say("U1", "<@UBATON> use tool 42")
	w.waitJob(core.JobSucceeded)
	reqs := w.srv.Requests()
	first := reqs[0].ToolNames()
	if !slices.Contains(first, mcp.SearchTool) {
		t.Errorf("first request's tools lack %s: %v", mcp.SearchTool, first)
	}
	for _, name := range first {
		if strings.HasPrefix(name, "mcp__") {
			t.Errorf("the first request offers %s", name)
		}
	}
	if !slices.Contains(reqs[1].ToolNames(), "mcp__lots__many_42") {
		t.Errorf("the loaded tool is not offered next: %v", reqs[1].ToolNames())
	}
	if got := toolResults(t, w.srv, 2, "mcp__lots__many_42"); !slices.Equal(got, []string{"many_42 answered"}) {
		t.Errorf("many_42: %q", got)
	}
}

// TestMCPBadInput: a server printing garbage and one that never finishes
// its handshake are left out while the job goes on with the others; a
// schema OpenAI would refuse is offered adapted; arguments that fail the
// server's schema get its validation error; a huge result is cut.
func TestMCPBadInput(t *testing.T) {
	silent := mcpStdio(t, "silent", mcptest.Options{NoHandshake: true})
	silent.StartupTimeout = 300 * time.Millisecond
	w := newMCPChat(t, stackOptions{MCP: []mcp.ServerConfig{
		mcpStdio(t, "garbage", mcptest.Options{Garbage: true}), silent, mcpStdio(t, "odd", mcptest.Options{BadSchema: true}),
	}})
	bad := mcp.ToolName("odd", "bad.schema/v1")
	w.srv.Script(
		llmtest.Call("mcp__odd__echo", `{"text":42}`),
		llmtest.Call(bad, `{"tags":["x"]}`),
		llmtest.Transition("COMPLETE", "done"),
	)
	w.say("U1", "<@UBATON> try the odd servers")
	w.waitJob(core.JobSucceeded)
	reqs := w.srv.Requests()
	for _, name := range reqs[0].ToolNames() {
		if strings.HasPrefix(name, "mcp__garbage__") || strings.HasPrefix(name, "mcp__silent__") {
			t.Errorf("offered %s of a server that did not start", name)
		}
	}
	var schema string
	for _, tool := range reqs[0].Tools {
		if tool.Name == bad {
			schema = string(tool.Parameters)
		}
	}
	if schema == "" || strings.Contains(schema, "anyOf") || strings.Contains(schema, "$schema") || !strings.Contains(schema, `"items"`) {
		t.Errorf("the odd schema is offered as %s", schema)
	}
	if got := toolResults(t, w.srv, 1, "mcp__odd__echo"); len(got) != 1 || !strings.Contains(got[0], "validating") {
		t.Errorf("arguments the server refuses: %q", got)
	}
	if got := toolResults(t, w.srv, 2, bad); !slices.Equal(got, []string{"bad schema, good call"}) {
		t.Errorf("the adapted tool: %q", got)
	}
	ev := w.jobEvents()
	for _, want := range []string{"mcp_unavailable server=garbage", "mcp_unavailable server=silent"} {
		if !strings.Contains(ev, want) {
			t.Errorf("events lack %s:\n%s", want, ev)
		}
	}
	if left := childProcesses(); len(left) > 0 {
		t.Errorf("processes left after the job: %v", left)
	}
}

// TestMCPElicitation: a server's question in the middle of a call is put
// in the thread; the reply answers it, reaches the model as the tool's
// result and is not handed to the agent a second time. Over stdio (the
// newest protocol) and HTTP (a stateful server of 2025-11-25).
func TestMCPElicitation(t *testing.T) {
	h := mcptest.StartHTTP(t, mcptest.Options{}, nil)
	for _, tc := range []struct {
		name string
		srv  mcp.ServerConfig
	}{
		{"stdio", mcpStdio(t, "ask", mcptest.Options{})},
		{"http", mcp.ServerConfig{Name: "ask", URL: h.URL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A short call timeout: the wait for the person does not count.
			tc.srv.CallTimeout = 2 * time.Second
			w := newMCPChat(t, stackOptions{MCP: []mcp.ServerConfig{tc.srv}})
			w.srv.Script(llmtest.Call("mcp__ask__elicit", `{"question":"Which colour?"}`), llmtest.Transition("COMPLETE", "asked"))
			w.say("U1", "<@UBATON> ask me")
			eventually(t, "the server's question in the thread", func() bool {
				for _, m := range w.outbox() {
					if strings.Contains(m, "The tool server `ask` asks: Which colour?") {
						return true
					}
				}
				return false
			})
			time.Sleep(2500 * time.Millisecond) // past the call timeout: the wait is not the call's
			w.say("U1", "teal-"+tc.name)
			w.waitJob(core.JobSucceeded)
			if got := toolResults(t, w.srv, 1, "mcp__ask__elicit"); !slices.Equal(got, []string{"the user answered: teal-" + tc.name}) {
				t.Errorf("the answer reached the model as %q", got)
			}
			for _, m := range w.srv.Requests()[1].Messages {
				if m.Role == "user" && strings.Contains(m.Text(), "teal-") {
					t.Errorf("the answer was handed to the agent again: %q", m.Text())
				}
			}
		})
	}
}
