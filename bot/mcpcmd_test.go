package main

import (
	"os"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core/mcp/mcptest"
)

// TestMCPList: baton mcp list starts each server, lists its tools with
// what a call meets, and says what failed (exit 1).
func TestMCPList(t *testing.T) {
	exe, args := mcptest.Command(t, mcptest.Options{})
	quoted := func(a []string) string { return "['" + strings.Join(a, "', '") + "']" }
	path := writeConfig(t, `log:
  level: warn
approvals:
  rules:
    - tool: mcp__good__echo
      action: deny
mcp:
  servers:
    good:
      command: `+exe+`
      args: `+quoted(args)+`
      disabled_tools: [crash]
      channels: [slack:C1]
      env:
        TOKEN: ${MCP_LIST_TOKEN}
    gone:
      command: /nonexistent/mcp-server
`)
	code, stdout, stderr := runMain(t, map[string]string{"MCP_LIST_TOKEN": "tok-list-secret"}, "mcp", "list", "--config", path)
	if code != 1 {
		t.Errorf("exit %d, want 1 (a server failed)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"good (stdio: " + exe + "; channels: slack:C1; pieces: all)",
		"mcp__good__write", "needs approval",
		"mcp__good__slow", "allowed",
		"mcp__good__echo", "denied (approvals.rules[0])",
		"crash", "disabled",
		"gone (stdio: /nonexistent/mcp-server; channels: all; pieces: all)\n  failed: start /nonexistent/mcp-server:",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "1 of 2 servers failed") || strings.Contains(stdout+stderr, "tok-list-secret") {
		t.Errorf("stderr:\n%s", stderr)
	}
	if _, err := os.Stat(mcptest.WritesFile); err == nil {
		t.Error("a tool ran")
	}

	code, stdout, _ = runMain(t, nil, "mcp", "list", "--config", writeConfig(t, "log:\n  level: warn\n"))
	if code != 0 || !strings.Contains(stdout, "no MCP servers are configured") {
		t.Errorf("without servers: exit %d, %s", code, stdout)
	}
	if code, _, stderr := runMain(t, nil, "mcp", "show"); code != 2 || !strings.Contains(stderr, `unknown subcommand "show"`) {
		t.Errorf("mcp show: exit %d, %s", code, stderr)
	}
}
