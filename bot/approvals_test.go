package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core/policy"
)

func TestLoadConfigApprovals(t *testing.T) {
	path := writeConfig(t, `
approvals:
  timeout: 30m
  approvers: [slack:U1, slack-group:S2, discord-role:3]
  rules:
    - tool: Bash
      match: '(^|\s)git push'
      channels: [slack:C123, discord:99]
      action: ask
    - tool: Write
      match: ^secrets/
      action: deny
    - tool: mcp__github__*
      action: allow
`)
	got, err := LoadConfig(path, mapEnv(nil))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want := ApprovalsConfig{
		Timeout:   30 * time.Minute,
		Approvers: []string{"slack:U1", "slack-group:S2", "discord-role:3"},
		Rules: []ApprovalRule{
			{Tool: "Bash", Match: `(^|\s)git push`, Channels: []string{"slack:C123", "discord:99"}, Action: "ask"},
			{Tool: "Write", Match: `^secrets/`, Action: "deny"},
			{Tool: "mcp__github__*", Action: "allow"},
		},
	}
	if diff := cmp.Diff(want, got.Approvals); diff != "" {
		t.Errorf("approvals (-want +got):\n%s", diff)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// TestLoadConfigApprovalErrors: every mistake in the approvals section
// stops Baton with exit 2 and a message naming the file, the line and the
// key to change.
func TestLoadConfigApprovalErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []string // substrings of the error after the file name
	}{
		{"unknown action", "approvals:\n  rules:\n    - tool: Bash\n      action: maybe\n",
			[]string{`:4: approvals.rules[0].action: must be one of allow | ask | deny, got "maybe"`}},
		{"missing action", "approvals:\n  rules:\n    - tool: Bash\n",
			[]string{`:3: approvals.rules[0].action: is required: allow | ask | deny`}},
		{"bad glob", "approvals:\n  rules:\n    - tool: 'mcp__[github'\n      action: ask\n",
			[]string{`:3: approvals.rules[0].tool: "mcp__[github" is not a glob (path.Match syntax): syntax error in pattern`}},
		{"regexp that does not compile", "approvals:\n  rules:\n    - tool: Bash\n      action: deny\n    - tool: Bash\n      match: '(git push'\n      action: ask\n",
			[]string{":6: approvals.rules[1].match: error parsing regexp: missing closing ): `(git push`"}},
		{"missing tool", "approvals:\n  rules:\n    - tool: Bash\n      action: ask\n    - match: rm\n      action: deny\n",
			[]string{":5: approvals.rules[1].tool: is required"}},
		{"unknown key in a rule", "approvals:\n  rules:\n    - tool: Bash\n      mtach: rm\n      action: deny\n",
			[]string{":4: approvals.rules[0].mtach: unknown key (approvals.rules[0] has: action, channels, match, tool)"}},
		{"channel without platform", "approvals:\n  rules:\n    - tool: Write\n      channels:\n        - slack:C1\n        - C123\n      action: ask\n",
			[]string{`:6: approvals.rules[0].channels[1]: "C123" must be written as <platform>:<id> with platform one of slack, discord`}},
		{"channel of a group kind", "approvals:\n  rules:\n    - tool: Write\n      channels: [slack-group:S1]\n      action: ask\n",
			[]string{`:4: approvals.rules[0].channels[0]: "slack-group:S1"`}},
		{"approver without platform", "approvals:\n  approvers:\n    - slack:U1\n    - U123\n",
			[]string{`:4: approvals.approvers[1]: "U123" must be written as <platform>:<id> with platform one of slack, slack-group, discord, discord-role`}},
		{"approver of an unknown platform", "approvals:\n  approvers: [teams:1]\n",
			[]string{`:2: approvals.approvers[0]: "teams:1"`}},
		{"unknown key in the section", "approvals:\n  timeout: 1h\n  rule: []\n",
			[]string{":3: approvals.rule: unknown key (approvals has: approvers, rules, timeout)"}},
		{"rules not a list", "approvals:\n  rules: Bash\n",
			[]string{`:2: approvals.rules: want a list, got "Bash"`}},
		{"channels not a list", "approvals:\n  rules:\n    - tool: Bash\n      channels: slack:C1\n      action: ask\n",
			[]string{`:4: approvals.rules[0].channels: want a list, got "slack:C1"`}},
		{"timeout not a duration", "approvals:\n  timeout: 60\n",
			[]string{`:2: approvals.timeout: want a duration such as 30s, got "60"`}},
		{"every problem at once", "approvals:\n  approvers: [U1]\n  rules:\n    - tool: Bash\n      match: '['\n      action: nope\n",
			[]string{":2: approvals.approvers[0]: ", ":5: approvals.rules[0].match: error parsing regexp", ":6: approvals.rules[0].action: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.content)
			_, err := LoadConfig(path, mapEnv(nil))
			if err == nil {
				t.Fatalf("LoadConfig accepted:\n%s", tt.content)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("error %v (%T) is not a *ConfigError", err, err)
			}
			if code := ExitCode(err); code != exitUsage {
				t.Errorf("exit code %d, want %d", code, exitUsage)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), path+w) {
					t.Errorf("error %q does not contain %q", err, path+w)
				}
			}
		})
	}
	t.Run("baton refuses to start", func(t *testing.T) {
		path := writeConfig(t, "approvals:\n  rules:\n    - tool: Bash\n      match: '(git push'\n      action: ask\n")
		code, _, stderr := runMain(t, map[string]string{"BATON_DATA_DIR": t.TempDir()}, "migrate", "--config", path)
		want := path + ":4: approvals.rules[0].match: error parsing regexp: missing closing ): `(git push`"
		if code != exitUsage || !strings.Contains(stderr, want) {
			t.Errorf("baton migrate: exit %d, stderr %q; want exit %d naming %q", code, stderr, exitUsage, want)
		}
	})
}

func TestLoadConfigApprovalsTimeoutEnv(t *testing.T) {
	path := writeConfig(t, "approvals:\n  timeout: 2h\n")
	tests := []struct {
		env  string
		want time.Duration
	}{
		{"15m", 15 * time.Minute},
		{"", 2 * time.Hour}, // empty: the file's
	}
	for _, tt := range tests {
		got, err := LoadConfig(path, mapEnv(map[string]string{"BATON_APPROVALS_TIMEOUT": tt.env}))
		if err != nil {
			t.Fatalf("LoadConfig: %v", err)
		}
		if got.Approvals.Timeout != tt.want {
			t.Errorf("BATON_APPROVALS_TIMEOUT=%q: approvals.timeout = %s, want %s", tt.env, got.Approvals.Timeout, tt.want)
		}
	}

	_, err := LoadConfig(path, mapEnv(map[string]string{"BATON_APPROVALS_TIMEOUT": "soon"}))
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Key != "approvals.timeout" || !strings.Contains(err.Error(), `BATON_APPROVALS_TIMEOUT: want a duration such as 30s, got "soon"`) {
		t.Errorf("BATON_APPROVALS_TIMEOUT=soon: %v, want a *ConfigError for approvals.timeout naming the variable", err)
	}

	cfg, err := LoadConfig(path, mapEnv(map[string]string{"BATON_APPROVALS_TIMEOUT": "0s"}))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "approvals.timeout: must be a positive duration") {
		t.Errorf("Validate with BATON_APPROVALS_TIMEOUT=0s = %v, want approvals.timeout refused", err)
	}
}

// TestValidateApprovals: a configuration built without a file is checked
// as a file's is, each problem naming its key.
func TestValidateApprovals(t *testing.T) {
	tests := []struct {
		name   string
		change func(*ApprovalsConfig)
		keys   []string
	}{
		{"timeout zero", func(a *ApprovalsConfig) { a.Timeout = 0 }, []string{"approvals.timeout"}},
		{"timeout negative", func(a *ApprovalsConfig) { a.Timeout = -time.Minute }, []string{"approvals.timeout"}},
		{"approver", func(a *ApprovalsConfig) { a.Approvers = []string{"slack:U1", "slack:"} }, []string{"approvals.approvers[1]"}},
		{"rule", func(a *ApprovalsConfig) {
			a.Rules = []ApprovalRule{{Tool: "Bash", Action: "ask"}, {Tool: "[", Match: "(", Channels: []string{"C1"}, Action: "never"}}
		}, []string{"approvals.rules[1].tool", "approvals.rules[1].match", "approvals.rules[1].channels[0]", "approvals.rules[1].action"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.change(&cfg.Approvals)
			err := cfg.Validate()
			if err == nil {
				t.Fatal("Validate accepted the change")
			}
			var keys []string
			for _, line := range strings.Split(err.Error(), "\n") {
				key, _, _ := strings.Cut(line, ": ")
				keys = append(keys, key)
			}
			if diff := cmp.Diff(tt.keys, keys); diff != "" {
				t.Errorf("keys named by %q (-want +got):\n%s", err, diff)
			}
		})
	}
}

// TestSystemApprovals: the system hands the engine the configured policy
// over the store, and the conversation service the approvers.
func TestSystemApprovals(t *testing.T) {
	bash := func(command string) policy.Request {
		args, err := json.Marshal(map[string]string{"command": command})
		if err != nil {
			t.Fatal(err)
		}
		return policy.Request{Kind: policy.Builtin, Tool: "Bash", Subject: policy.Subject("Bash", string(args)), Channel: "slack:C1"}
	}
	newGate := func(t *testing.T, a ApprovalsConfig) *policy.Policy {
		t.Helper()
		cfg := DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Tools.Bash.Sandbox = "none"
		cfg.Approvals = a
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		sys, err := newSystem(context.Background(), cfg, slog.New(slog.DiscardHandler), systemOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sys.Close() })
		if sys.gate == nil {
			t.Fatal("the system has no approvals policy")
		}
		return sys.gate
	}
	decide := func(t *testing.T, gate *policy.Policy, q policy.Request) policy.Decision {
		t.Helper()
		d, err := gate.Decide(context.Background(), q)
		if err != nil {
			t.Fatalf("Decide(%+v): %v", q, err)
		}
		return d
	}

	t.Run("configured rules", func(t *testing.T) {
		a := DefaultConfig().Approvals
		a.Rules = []ApprovalRule{
			{Tool: "Bash", Match: `^rm -rf /`, Action: "deny"},
			{Tool: "Bash", Match: `(^|\s)git push`, Action: "ask"},
		}
		gate := newGate(t, a)
		tests := []struct {
			command string
			want    policy.Decision
		}{
			{"git push origin main", policy.Decision{Action: policy.Ask, Rule: "approvals.rules[1]"}},
			{"cd repo && git push", policy.Decision{Action: policy.Ask, Rule: "approvals.rules[1]"}},
			{"rm -rf / --no-preserve-root", policy.Decision{Action: policy.Deny, Rule: "approvals.rules[0]"}},
			{"git status", policy.Decision{Action: policy.Allow, Rule: "default"}},
		}
		for _, tt := range tests {
			if diff := cmp.Diff(tt.want, decide(t, gate, bash(tt.command))); diff != "" {
				t.Errorf("%q (-want +got):\n%s", tt.command, diff)
			}
		}
	})
	t.Run("no approvals section", func(t *testing.T) {
		gate := newGate(t, DefaultConfig().Approvals)
		want := policy.Decision{Action: policy.Allow, Rule: "default"}
		if diff := cmp.Diff(want, decide(t, gate, bash("git push origin main"))); diff != "" {
			t.Errorf("without rules (-want +got):\n%s", diff)
		}
	})
	t.Run("approvers", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Access.Admins = []string{"slack:UADMIN"}
		cfg.Approvals.Approvers = []string{"slack:U1", "discord-role:7"}
		got := chatAccess(cfg)
		if diff := cmp.Diff([]string{"slack:U1", "discord-role:7"}, got.Approvers); diff != "" {
			t.Errorf("chat.Access.Approvers (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"slack:UADMIN"}, got.Admins); diff != "" {
			t.Errorf("chat.Access.Admins (-want +got):\n%s", diff)
		}
	})
}

func TestApprovalsDefaults(t *testing.T) {
	a := DefaultConfig().Approvals
	if a.Timeout != time.Hour || len(a.Rules) != 0 || len(a.Approvers) != 0 {
		t.Errorf("default approvals = %+v, want a 1h timeout, no approvers and no rules", a)
	}
}
