package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-bot/baton/core/mcp/mcptest"
	"github.com/baton-bot/baton/core/policy"
	"github.com/baton-bot/baton/core/tokens"
	"github.com/baton-bot/baton/core/tools"
	"github.com/baton-bot/baton/core/workspace"
)

func TestMain(m *testing.M) { mcptest.Main(m) }

// stdio returns the config of the test server over stdio as name.
func stdio(t testing.TB, name string, o mcptest.Options) ServerConfig {
	exe, args := mcptest.Command(t, o)
	return ServerConfig{Name: name, Command: exe, Args: args}
}

// events records a session's job events.
type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) add(kind, detail string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, kind+" "+detail)
}

func (e *events) all() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.list, "\n")
}

// world is a manager, a session over a fresh workspace and its events.
type world struct {
	t   *testing.T
	m   *Manager
	s   *Session
	ws  *workspace.Workspace
	ev  *events
	env *tools.Env
}

func newWorld(t *testing.T, cfg Config, scope Scope) *world {
	t.Helper()
	ws, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	w := &world{t: t, m: New(cfg), ws: ws, ev: &events{}}
	scope.Dir, scope.Event = ws.Root(), w.ev.add
	w.s = w.m.Open(scope)
	t.Cleanup(func() { w.s.Close() })
	w.env = &tools.Env{WS: ws, TokenizerBudget: 4000, Tokens: tokens.Default()}
	return w
}

func (w *world) offered() []string {
	var names []string
	for _, t := range w.s.Offer(context.Background()) {
		names = append(names, t.Name())
	}
	return names
}

// call calls the offered or loadable tool name with args.
func (w *world) call(name, args string) tools.Result {
	w.t.Helper()
	w.s.Offer(context.Background())
	tool, ok := w.s.Lookup(name)
	if !ok {
		w.t.Fatalf("no tool %s (offered %v)", name, w.offered())
	}
	return tools.Safe(context.Background(), tool, w.env, json.RawMessage(args))
}

// children returns the processes whose parent is this test process.
func children(t testing.TB) []string {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []string
	me := strconv.Itoa(os.Getpid())
	for _, p := range stats {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so read after ')'.
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == me {
			out = append(out, strings.Fields(s)[0]+" "+s[strings.IndexByte(s, '(')+1:strings.LastIndexByte(s, ')')])
		}
	}
	return out
}

// noChildren fails unless every process this test started has gone
// (waited for: not even a zombie is left).
func noChildren(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := children(t)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStdioEchoAndWrite(t *testing.T) {
	w := newWorld(t, Config{Servers: []ServerConfig{stdio(t, "echo", mcptest.Options{})}}, Scope{Channel: "slack:C1", Piece: "chat"})
	offered := w.offered()
	for _, want := range []string{"mcp__echo__echo", "mcp__echo__write", "mcp__echo__slow"} {
		if !slices.Contains(offered, want) {
			t.Errorf("offered %v lack %s", offered, want)
		}
	}
	if r := w.call("mcp__echo__echo", `{"text":"n0nce-42"}`); r.IsError || r.Text != "echo: n0nce-42" {
		t.Errorf("echo = %+v", r)
	}
	r := w.call("mcp__echo__write", `{"text":"hello"}`)
	if r.IsError {
		t.Fatalf("write = %+v", r)
	}
	got, err := os.ReadFile(filepath.Join(w.ws.Root(), mcptest.WritesFile))
	if err != nil || string(got) != "hello\n" {
		t.Errorf("the server's working directory is not the workspace: %q, %v (result %q)", got, err, r.Text)
	}
	echo, _ := w.s.Lookup("mcp__echo__echo")
	write, _ := w.s.Lookup("mcp__echo__write")
	if k := echo.(policy.Kinded).PolicyKind(); k != policy.ExternalRead {
		t.Errorf("echo is %s, want %s", k, policy.ExternalRead)
	}
	if k := write.(policy.Kinded).PolicyKind(); k != policy.External {
		t.Errorf("write is %s, want %s", k, policy.External)
	}
	if r := w.call("mcp__echo__echo", `{"text":5}`); !r.IsError || !strings.Contains(r.Text, "validating") {
		t.Errorf("echo with a number = %+v, want the server's validation error", r)
	}
	if r := w.call("mcp__echo__fail", `{}`); !r.IsError || !strings.Contains(r.Text, "failed on purpose") {
		t.Errorf("fail = %+v", r)
	}
	if r := w.call("mcp__echo__image", `{}`); r.IsError || len(r.Images) != 1 || r.Images[0].MIME != "image/png" {
		t.Errorf("image = %+v", r)
	}
	if ev := w.ev.all(); !strings.Contains(ev, "mcp_call server=echo tool=echo took=") || !strings.Contains(ev, "outcome=ok") || !strings.Contains(ev, "outcome=tool_error") {
		t.Errorf("events:\n%s", ev)
	}
	w.s.Close()
	noChildren(t)
}

// TestToolListCached: a second job's session offers the tools listed by
// the first without starting the server; it starts it for a call.
func TestToolListCached(t *testing.T) {
	w := newWorld(t, Config{Servers: []ServerConfig{stdio(t, "echo", mcptest.Options{})}}, Scope{})
	if len(w.offered()) == 0 {
		t.Fatal("nothing offered")
	}
	w.s.Close()
	noChildren(t)
	s2 := w.m.Open(Scope{Dir: w.ws.Root()})
	defer s2.Close()
	if got := len(s2.Offer(context.Background())); got == 0 {
		t.Fatal("the second session offers nothing")
	}
	if len(children(t)) != 0 || len(s2.conns) != 0 {
		t.Errorf("the second session started the server to list its tools")
	}
	tool, _ := s2.Lookup("mcp__echo__echo")
	if r := tools.Safe(context.Background(), tool, w.env, json.RawMessage(`{"text":"x"}`)); r.Text != "echo: x" {
		t.Errorf("echo = %+v", r)
	}
}

func TestHTTPWithHeaders(t *testing.T) {
	h := mcptest.StartHTTP(t, mcptest.Options{}, http.Header{"Authorization": {"Bearer s3cret-token"}})
	w := newWorld(t, Config{Servers: []ServerConfig{{Name: "web", URL: h.URL, Headers: map[string]string{"Authorization": "Bearer s3cret-token"}, Secrets: []string{"s3cret-token"}}}}, Scope{})
	if r := w.call("mcp__web__echo", `{"text":"n0nce"}`); r.Text != "echo: n0nce" {
		t.Errorf("echo = %+v", r)
	}
	if r := w.call("mcp__web__echo", `{"text":"the token is s3cret-token"}`); r.Text != "echo: the token is [redacted]" {
		t.Errorf("a secret said back is not redacted: %q", r.Text)
	}
	w.call("mcp__web__write", `{"text":"once"}`)
	if got := h.Writes(); !slices.Equal(got, []string{"once"}) {
		t.Errorf("writes %v", got)
	}
	// Without the header the server refuses: its tools are not offered.
	w2 := newWorld(t, Config{Servers: []ServerConfig{{Name: "web", URL: h.URL, StartupTimeout: 5 * time.Second}}}, Scope{})
	if got := w2.offered(); len(got) != 0 {
		t.Errorf("offered %v by a server that refused", got)
	}
	if ev := w2.ev.all(); !strings.Contains(ev, "mcp_unavailable server=web") {
		t.Errorf("events: %s", ev)
	}
}

func TestBindingAndDisabled(t *testing.T) {
	exe, args := mcptest.Command(t, mcptest.Options{})
	cfg := Config{Servers: []ServerConfig{
		{Name: "here", Command: exe, Args: args, Channels: []string{"slack:C1"}, DisabledTools: []string{"write"}},
		{Name: "there", Command: exe, Args: args, Channels: []string{"slack:C2"}},
		{Name: "research", Command: exe, Args: args, Pieces: []string{"research"}},
		{Name: "few", Command: exe, Args: args, EnabledTools: []string{"echo"}},
	}}
	w := newWorld(t, cfg, Scope{Channel: "slack:C1", Piece: "chat"})
	offered := w.offered()
	for _, name := range offered {
		if strings.HasPrefix(name, "mcp__there__") || strings.HasPrefix(name, "mcp__research__") {
			t.Errorf("offered %s of a server not bound here", name)
		}
	}
	if slices.Contains(offered, "mcp__here__write") {
		t.Error("a disabled tool is offered")
	}
	if _, ok := w.s.Lookup("mcp__here__write"); ok {
		t.Error("a disabled tool can be looked up")
	}
	if !slices.Contains(offered, "mcp__here__echo") {
		t.Errorf("offered %v lack mcp__here__echo", offered)
	}
	var few []string
	for _, n := range offered {
		if strings.HasPrefix(n, "mcp__few__") {
			few = append(few, n)
		}
	}
	if !slices.Equal(few, []string{"mcp__few__echo"}) {
		t.Errorf("enabled_tools [echo] offers %v", few)
	}
	if got := w.m.Bound("slack:C2", "research"); !slices.Equal(got, []string{"there", "research", "few"}) {
		t.Errorf("Bound = %v", got)
	}
	var bound []string
	for _, b := range w.m.ForChannel("slack:C1") {
		bound = append(bound, b.Server+"/"+strings.Join(b.Pieces, ",")+"/"+strconv.Itoa(b.Tools))
	}
	// here lists 10 tools less write; research has not been listed (not
	// bound to chat).
	if !slices.Equal(bound, []string{"here//9", "research/research/0", "few//1"}) {
		t.Errorf("ForChannel = %v", bound)
	}
}

// TestCrashAndHang: a server that dies mid-call and one that does not
// answer within call_timeout give tool errors, the next call starts the
// server again, and nothing is left running.
func TestCrashAndHang(t *testing.T) {
	sc := stdio(t, "flaky", mcptest.Options{})
	sc.CallTimeout = 1500 * time.Millisecond // room for a busy machine; the hang is 120 s
	w := newWorld(t, Config{Servers: []ServerConfig{sc}}, Scope{})
	r := w.call("mcp__flaky__crash", `{}`)
	if !r.IsError || !strings.Contains(r.Text, "stopped during the call") {
		t.Errorf("crash = %+v", r)
	}
	if r := w.call("mcp__flaky__echo", `{"text":"again"}`); r.Text != "echo: again" {
		t.Errorf("echo after the crash = %+v", r)
	}
	start := time.Now()
	r = w.call("mcp__flaky__slow", `{"seconds":60}`)
	if !r.IsError || !strings.Contains(r.Text, "did not answer slow within 1.5s") {
		t.Errorf("slow = %+v", r)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the hung call took %s", took)
	}
	if ev := w.ev.all(); !strings.Contains(ev, "outcome=unavailable") || !strings.Contains(ev, "outcome=timeout") {
		t.Errorf("events:\n%s", ev)
	}
	if r := w.call("mcp__flaky__echo", `{"text":"after"}`); r.Text != "echo: after" {
		t.Errorf("echo after the hang = %+v", r)
	}
	w.s.Close()
	noChildren(t)
}

func TestBadServers(t *testing.T) {
	garbage := stdio(t, "garbage", mcptest.Options{Garbage: true})
	silent := stdio(t, "silent", mcptest.Options{NoHandshake: true})
	silent.StartupTimeout = 300 * time.Millisecond
	missing := ServerConfig{Name: "missing", Command: "/nonexistent/mcp-server"}
	needs := stdio(t, "needs", mcptest.Options{RequireEnv: "MCP_TOKEN"})
	w := newWorld(t, Config{Servers: []ServerConfig{garbage, silent, missing, needs, stdio(t, "good", mcptest.Options{})}}, Scope{})
	offered := w.offered()
	for _, n := range offered {
		if !strings.HasPrefix(n, "mcp__good__") {
			t.Errorf("offered %s of a server that did not start", n)
		}
	}
	if len(offered) == 0 {
		t.Error("the good server's tools are not offered")
	}
	ev := w.ev.all()
	for _, want := range []string{"mcp_unavailable server=garbage", "mcp_unavailable server=silent: no answer to the handshake within 300ms",
		"mcp_unavailable server=missing", "mcp_unavailable server=needs", "MCP_TOKEN is not set"} {
		if !strings.Contains(ev, want) {
			t.Errorf("events lack %q:\n%s", want, ev)
		}
	}
	w.s.Close()
	noChildren(t)
}

func TestHugeResult(t *testing.T) {
	w := newWorld(t, Config{Servers: []ServerConfig{stdio(t, "big", mcptest.Options{})}}, Scope{})
	r := w.call("mcp__big__huge", `{}`)
	if r.IsError || len(r.Text) > 64<<10 || !strings.Contains(r.Text, "bytes cut from the middle") || !strings.HasPrefix(r.Text, "line 00000000") {
		t.Fatalf("huge: error %t, %d bytes: %.300q", r.IsError, len(r.Text), r.Text)
	}
	if n := tokens.Default().Count(r.Text); n > w.env.TokenizerBudget {
		t.Errorf("the result counts %d tokens, over the budget of %d", n, w.env.TokenizerBudget)
	}
	i := strings.Index(r.Text, "logs/mcp/")
	kept := r.Text[i:]
	kept = kept[:strings.IndexAny(kept, ": ")]
	data, err := os.ReadFile(filepath.Join(w.ws.Root(), kept))
	if err != nil || len(data) != mcptest.HugeBytes {
		t.Errorf("kept %s: %d bytes, %v", kept, len(data), err)
	}
}

func TestBadSchemaAdapted(t *testing.T) {
	w := newWorld(t, Config{Servers: []ServerConfig{stdio(t, "odd", mcptest.Options{BadSchema: true})}}, Scope{})
	var bad tools.Tool
	for _, tool := range w.s.Offer(context.Background()) {
		if strings.HasPrefix(tool.Name(), "mcp__odd__bad_schema_v1_") {
			bad = tool
		}
	}
	if bad == nil {
		t.Fatalf("no adapted bad.schema/v1 in %v", w.offered())
	}
	var s map[string]any
	if err := json.Unmarshal(bad.Schema(nil), &s); err != nil {
		t.Fatal(err)
	}
	props := s["properties"].(map[string]any)
	if _, ok := s["anyOf"]; ok || s["$schema"] != nil || s["type"] != "object" {
		t.Errorf("top level not adapted: %v", s)
	}
	if tags := props["tags"].(map[string]any); tags["items"] == nil {
		t.Errorf("array without items: %v", tags)
	}
	if _, ok := props["any"].(map[string]any); !ok {
		t.Errorf("boolean subschema kept: %v", props["any"])
	}
	if r := w.call(bad.Name(), `{"tags":["a"]}`); r.IsError || r.Text != "bad schema, good call" {
		t.Errorf("call = %+v", r)
	}
}

func TestManyToolsSearch(t *testing.T) {
	w := newWorld(t, Config{MaxTools: 40, Servers: []ServerConfig{stdio(t, "lots", mcptest.Options{Tools: 100})}}, Scope{})
	if got := w.offered(); !slices.Equal(got, []string{SearchTool}) {
		t.Fatalf("offered %v, want only %s", got, SearchTool)
	}
	search, _ := w.s.Lookup(SearchTool)
	if d := search.Description(nil); !strings.Contains(d, "There are 110") || !strings.Contains(d, "lots") {
		t.Errorf("description: %s", d)
	}
	r := w.call(SearchTool, `{"query":"echo text"}`)
	if len(r.Load) == 0 || r.Load[0] != "mcp__lots__echo" {
		t.Errorf("search echo = %+v", r)
	}
	r = w.call(SearchTool, `{"names":["mcp__lots__many_42","nope"]}`)
	if !slices.Equal(r.Load, []string{"mcp__lots__many_42"}) || !strings.Contains(r.Text, "No MCP tool is named nope") {
		t.Errorf("search by names = %+v", r)
	}
	if r := w.call("mcp__lots__many_42", `{}`); r.Text != "many_42 answered" {
		t.Errorf("many_42 = %+v", r)
	}
	if r := w.call(SearchTool, `{}`); !r.IsError {
		t.Errorf("search without query = %+v", r)
	}
}

// TestEnvironment: a stdio server gets its declared variables and PATH,
// HOME and LANG, and nothing else of Baton's environment; what it says of
// its secrets is redacted.
func TestEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-baton-own-key")
	sc := stdio(t, "env", mcptest.Options{RequireEnv: "MCP_TOKEN"})
	sc.Env = map[string]string{"MCP_TOKEN": "tok-declared-123"}
	sc.Secrets = []string{"tok-declared-123"}
	w := newWorld(t, Config{Servers: []ServerConfig{sc}}, Scope{})
	r := w.call("mcp__env__env_names", `{}`)
	if got := strings.Fields(r.Text); !slices.Equal(got, []string{"HOME", "LANG", "MCP_TOKEN", "PATH"}) {
		t.Errorf("the server sees %v", got)
	}
	if r := w.call("mcp__env__echo", `{"text":"tok-declared-123"}`); strings.Contains(r.Text, "tok-declared") {
		t.Errorf("secret shown: %q", r.Text)
	}
}

// TestProtocolVersions: Baton works with a server of each protocol
// version the SDK knows, over stdio and HTTP.
func TestProtocolVersions(t *testing.T) {
	for _, v := range sdk.SupportedProtocolVersions() {
		t.Run(v, func(t *testing.T) {
			h := mcptest.StartHTTP(t, mcptest.Options{Protocol: v}, nil)
			w := newWorld(t, Config{Servers: []ServerConfig{stdio(t, "s", mcptest.Options{Protocol: v}), {Name: "h", URL: h.URL}}}, Scope{})
			for _, name := range []string{"mcp__s__echo", "mcp__h__echo"} {
				if w.offered(); !slices.Contains(w.offered(), name) {
					t.Fatalf("%s not offered; events: %s", name, w.ev.all())
				}
				if r := w.call(name, `{"text":"`+v+`"}`); r.Text != "echo: "+v {
					t.Errorf("%s = %+v", name, r)
				}
			}
		})
	}
}

func TestToolName(t *testing.T) {
	long := strings.Repeat("x", 80)
	tests := []struct{ server, tool string }{
		{"github", "create_issue"}, {"github", "repo.create"}, {"github", "repo_create"}, {"s", long}, {"s", long + "y"},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		got := ToolName(tt.server, tt.tool)
		if len(got) > MaxNameLen || clean(got) != got || !strings.HasPrefix(got, "mcp__"+tt.server+"__") {
			t.Errorf("ToolName(%s, %s) = %q", tt.server, tt.tool, got)
		}
		if got != ToolName(tt.server, tt.tool) {
			t.Errorf("ToolName(%s, %s) is not stable", tt.server, tt.tool)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%s and %s share the name %s", prev, tt.tool, got)
		}
		seen[got] = tt.tool
	}
	if got := ToolName("github", "create_issue"); got != "mcp__github__create_issue" {
		t.Errorf("a plain name is changed: %s", got)
	}
}

// TestProtocolError: a call the server answers with a JSON-RPC error (a
// tool it no longer has, say) is a tool error, and the connection stays.
func TestProtocolError(t *testing.T) {
	w := newWorld(t, Config{Servers: []ServerConfig{stdio(t, "s", mcptest.Options{})}}, Scope{})
	if r := w.call("mcp__s__echo", `{"text":"a"}`); r.Text != "echo: a" {
		t.Fatalf("echo = %+v", r)
	}
	c := w.s.conns["s"]
	gone := &Tool{s: w.s, srv: w.s.servers[0], def: toolDef{server: "s", remote: "vanished", name: "mcp__s__vanished"}}
	r := tools.Safe(context.Background(), gone, w.env, json.RawMessage(`{}`))
	if !r.IsError || !strings.Contains(r.Text, "refused the call of vanished") {
		t.Errorf("call of a tool the server lacks = %+v", r)
	}
	if !strings.Contains(w.ev.all(), "outcome=protocol_error") {
		t.Errorf("events:\n%s", w.ev.all())
	}
	w.call("mcp__s__echo", `{"text":"b"}`)
	if w.s.conns["s"] != c || !c.alive() {
		t.Error("the connection was dropped after a protocol error")
	}
}
