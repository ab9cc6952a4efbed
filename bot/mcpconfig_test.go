package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMCPConfigLoads: a server's ${VAR}s come from Baton's environment at
// load, and the values they brought in are its Secrets.
func TestMCPConfigLoads(t *testing.T) {
	path := writeConfig(t, `mcp:
  max_tools: 12
  servers:
    github:
      command: github-mcp-server
      args: [stdio]
      env:
        GITHUB_PERSONAL_ACCESS_TOKEN: ${GH_TOKEN}
        MODE: plain
      disabled_tools: [delete_repository]
      channels: [slack:C1]
      pieces: [chat]
    tracker:
      url: https://mcp.example.com/mcp
      headers:
        Authorization: Bearer ${TRACKER_TOKEN}
      call_timeout: 30s
`)
	cfg, err := LoadConfig(path, mapEnv(map[string]string{"GH_TOKEN": "ghp_secret123", "TRACKER_TOKEN": "trk_secret456"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	want := MCPConfig{MaxTools: 12, Servers: map[string]MCPServer{
		"github": {
			Command: "github-mcp-server", Args: []string{"stdio"},
			Env:           map[string]Secret{"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret123", "MODE": "plain"},
			DisabledTools: []string{"delete_repository"}, Channels: []string{"slack:C1"}, Pieces: []string{"chat"},
			Secrets: []Secret{"ghp_secret123"},
		},
		"tracker": {
			URL: "https://mcp.example.com/mcp", Headers: map[string]Secret{"Authorization": "Bearer trk_secret456"},
			CallTimeout: 30 * time.Second, Secrets: []Secret{"trk_secret456"},
		},
	}}
	if diff := cmp.Diff(want, cfg.MCP); diff != "" {
		t.Errorf("mcp (-want +got):\n%s", diff)
	}
	out, err := renderConfig(cfg, nil, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"ghp_secret123", "trk_secret456"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("baton config shows %s:\n%s", secret, out)
		}
	}
	// The printout is a configuration: the servers decode back, their
	// secrets redacted.
	back := DefaultConfig()
	if err := decodeConfig(out, "printed", &back, nil); err != nil {
		t.Fatalf("the printout does not decode: %v\n%s", err, out)
	}
	if got := back.MCP.Servers["tracker"]; got.URL != "https://mcp.example.com/mcp" || got.CallTimeout != 30*time.Second || got.Headers["Authorization"] != redacted {
		t.Errorf("tracker printed back as %+v\n%s", got, out)
	}
}

// TestMCPConfigRefused: what cannot be a server stops Baton, naming the
// key to change.
func TestMCPConfigRefused(t *testing.T) {
	tests := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"unset variable", "mcp:\n  servers:\n    gh:\n      command: x\n      env:\n        TOKEN: ${GH_TOKEN}\n", nil,
			"mcp.servers.gh.env.TOKEN: refers to ${GH_TOKEN}, which is not set"},
		{"unset variable in a header", "mcp:\n  servers:\n    t:\n      url: https://x/mcp\n      headers:\n        Authorization: Bearer ${T}\n", nil,
			"mcp.servers.t.headers.Authorization: refers to ${T}"},
		{"unknown key", "mcp:\n  servers:\n    gh:\n      comand: x\n", nil, ":4: mcp.servers.gh.comand: unknown key (mcp.servers.gh has: args, call_timeout"},
		{"command and url", "mcp:\n  servers:\n    gh:\n      command: x\n      url: https://x/mcp\n", nil, ":3: mcp.servers.gh: has both command"},
		{"neither", "mcp:\n  servers:\n    gh:\n      channels: [slack:C1]\n", nil, "mcp.servers.gh: needs command"},
		{"bad name", "mcp:\n  servers:\n    Git.Hub:\n      command: x\n", nil, "must match ^[a-z0-9_-]+$"},
		{"bad url", "mcp:\n  servers:\n    t:\n      url: ftp://x\n", nil, "mcp.servers.t.url: must be an http:// or https:// URL"},
		{"bad url after expansion", "mcp:\n  servers:\n    t:\n      url: ${U}\n", map[string]string{"U": "nope"}, "mcp.servers.t.url: must be an http"},
		{"bad channel", "mcp:\n  servers:\n    t:\n      command: x\n      channels: [C1]\n", nil, "mcp.servers.t.channels[0]:"},
		{"negative timeout", "mcp:\n  servers:\n    t:\n      command: x\n      call_timeout: -1s\n", nil, "mcp.servers.t.call_timeout: must not be negative"},
		{"bad duration", "mcp:\n  servers:\n    t:\n      command: x\n      call_timeout: soon\n", nil, "mcp.servers.t.call_timeout: want a duration such as 30s"},
		{"max_tools", "mcp:\n  max_tools: 0\n", nil, "mcp.max_tools: must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadConfig(writeConfig(t, tt.yaml), mapEnv(tt.env))
			if err == nil {
				err = cfg.Validate()
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want a ConfigError containing %q", err, tt.want)
			}
		})
	}
}

// TestMCPConfigExit: an unset ${VAR} stops baton with exit 2, naming the
// key and the variable, never a value.
func TestMCPConfigExit(t *testing.T) {
	path := writeConfig(t, "mcp:\n  servers:\n    gh:\n      command: x\n      env:\n        TOKEN: ${GH_TOKEN}\n        OTHER: ${SET_ONE}\n")
	code, _, stderr := runMain(t, map[string]string{"SET_ONE": "s3cr3t-value"}, "serve", "--config", path)
	if code != 2 || !strings.Contains(stderr, "mcp.servers.gh.env.TOKEN: refers to ${GH_TOKEN}") || strings.Contains(stderr, "s3cr3t-value") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}
