package mcptest_test

import (
	"context"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-bot/baton/core/mcp/mcptest"
)

func TestMain(m *testing.M) { mcptest.Main(m) }

// connect opens a client session over t, closed at the test's end.
func connect(tb testing.TB, tr mcp.Transport) *mcp.ClientSession {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

func callText(tb testing.TB, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	tb.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		tb.Fatalf("call %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func toolNames(tb testing.TB, cs *mcp.ClientSession) []string {
	tb.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			tb.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// TestStdio: the test binary serves the tools over stdio, in its working
// directory, and echo is read-only while write is not.
func TestStdio(t *testing.T) {
	exe, args := mcptest.Command(t, mcptest.Options{Tools: 3, BadSchema: true})
	cmd := exec.Command(exe, args...)
	cmd.Dir = t.TempDir()
	cs := connect(t, &mcp.CommandTransport{Command: cmd})
	names := toolNames(t, cs)
	for _, want := range []string{"echo", "write", "slow", "crash", "fail", "image", "huge", "env_names", "elicit", "bad.schema/v1", "many_3"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools %v lack %s", names, want)
		}
	}
	if got, _ := callText(t, cs, "echo", map[string]any{"text": "n0nce"}); got != "echo: n0nce" {
		t.Errorf("echo = %q", got)
	}
	if got, _ := callText(t, cs, "write", map[string]any{"text": "x"}); !strings.Contains(got, cmd.Dir) {
		t.Errorf("write = %q, want it in %s", got, cmd.Dir)
	}
	if got, isErr := callText(t, cs, "echo", map[string]any{"text": 5}); !isErr || !strings.Contains(got, "validating") {
		t.Errorf("echo with a number = %q (error %t), want a validation error", got, isErr)
	}
	if _, isErr := callText(t, cs, "fail", nil); !isErr {
		t.Error("fail is not an error")
	}
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		ro := tool.Annotations != nil && tool.Annotations.ReadOnlyHint
		if (tool.Name == "write") == ro {
			t.Errorf("%s: readOnlyHint %t", tool.Name, ro)
		}
	}
}

// TestHTTP: the same tools over Streamable HTTP, behind a required header.
func TestHTTP(t *testing.T) {
	need := http.Header{"Authorization": {"Bearer t0ken"}}
	h := mcptest.StartHTTP(t, mcptest.Options{}, need)
	cs := connect(t, &mcp.StreamableClientTransport{Endpoint: h.URL, HTTPClient: &http.Client{Transport: headerRT(need)}})
	if got, _ := callText(t, cs, "echo", map[string]any{"text": "n0nce"}); got != "echo: n0nce" {
		t.Errorf("echo = %q", got)
	}
	callText(t, cs, "write", map[string]any{"text": "once"})
	if got := h.Writes(); !slices.Equal(got, []string{"once"}) {
		t.Errorf("writes = %v", got)
	}
	if hs := h.Headers(); len(hs) == 0 || hs[0].Get("Authorization") != "Bearer t0ken" {
		t.Errorf("headers = %v", hs)
	}
}

type headerRT http.Header

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range h {
		r.Header[k] = vs
	}
	return http.DefaultTransport.RoundTrip(r)
}
