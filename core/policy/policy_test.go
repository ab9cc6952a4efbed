package policy

import (
	"context"
	"errors"
	"regexp"
	"testing"

	"github.com/baton-bot/baton/core"
)

type stored []core.AllowRule

func (s stored) AllowRules(_ context.Context, channel string) ([]core.AllowRule, error) {
	var out []core.AllowRule
	for _, r := range s {
		if r.Channel == channel {
			out = append(out, r)
		}
	}
	return out, nil
}

type brokenStore struct{}

func (brokenStore) AllowRules(context.Context, string) ([]core.AllowRule, error) {
	return nil, errors.New("disk I/O error")
}

func TestDecide(t *testing.T) {
	rules := []Rule{
		{Tool: "Bash", Match: regexp.MustCompile(`^rm -rf /`), Action: Deny},
		{Tool: "Bash", Match: regexp.MustCompile(`(^|\s)(git push|make deploy)`), Action: Ask},
		{Tool: "Write", Match: regexp.MustCompile(`^secrets/`), Action: Deny},
		{Tool: "Write", Channels: []string{"slack:CPROD"}, Action: Ask},
		{Tool: "mcp__github__*", Action: Ask},
	}
	st := stored{
		{ID: 4, Channel: "slack:C1", Tool: "Bash", Pattern: AlwaysPattern("make deploy")},
		{ID: 5, Channel: "slack:C1", Tool: "Bash", Pattern: AlwaysPattern("rm -rf /")},
	}
	p := New(rules, st)
	tests := []struct {
		name string
		q    Request
		want Decision
	}{
		{"no rule: a built-in tool runs", Request{Kind: Builtin, Tool: "Read", Subject: "a.txt", Channel: "slack:C1"}, Decision{Allow, "default"}},
		{"no rule: an external act is asked", Request{Kind: External, Tool: "mcp__jira__create", Channel: "slack:C1"}, Decision{Ask, "default"}},
		{"ask rule", Request{Kind: Builtin, Tool: "Bash", Subject: "git push origin main", Channel: "slack:C2"}, Decision{Ask, "approvals.rules[1]"}},
		{"ask answered by a stored rule", Request{Kind: Builtin, Tool: "Bash", Subject: "make deploy", Channel: "slack:C1"}, Decision{Allow, "always-allow rule 4"}},
		{"stored rule is exact", Request{Kind: Builtin, Tool: "Bash", Subject: "make deploy; curl evil", Channel: "slack:C1"}, Decision{Ask, "approvals.rules[1]"}},
		{"stored rule is per channel", Request{Kind: Builtin, Tool: "Bash", Subject: "make deploy", Channel: "slack:C2"}, Decision{Ask, "approvals.rules[1]"}},
		{"deny stands over a stored rule", Request{Kind: Builtin, Tool: "Bash", Subject: "rm -rf /", Channel: "slack:C1"}, Decision{Deny, "approvals.rules[0]"}},
		{"first match wins", Request{Kind: Builtin, Tool: "Write", Subject: "secrets/key", Channel: "slack:CPROD"}, Decision{Deny, "approvals.rules[2]"}},
		{"channel-limited rule", Request{Kind: Builtin, Tool: "Write", Subject: "a.txt", Channel: "slack:CPROD"}, Decision{Ask, "approvals.rules[3]"}},
		{"channel-limited rule elsewhere", Request{Kind: Builtin, Tool: "Write", Subject: "a.txt", Channel: "slack:C1"}, Decision{Allow, "default"}},
		{"glob", Request{Kind: External, Tool: "mcp__github__create_issue", Channel: "slack:C1"}, Decision{Ask, "approvals.rules[4]"}},
		{"no rule: a read-only external call runs", Request{Kind: ExternalRead, Tool: "mcp__jira__search", Channel: "slack:C1"}, Decision{Allow, "default"}},
		{"a rule asks a read-only external call", Request{Kind: ExternalRead, Tool: "mcp__github__search", Channel: "slack:C1"}, Decision{Ask, "approvals.rules[4]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Decide(context.Background(), tt.q)
			if err != nil || got != tt.want {
				t.Errorf("Decide = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestDecideStoreDownAsks(t *testing.T) {
	p := New([]Rule{{Tool: "Bash", Action: Ask}}, brokenStore{})
	got, err := p.Decide(context.Background(), Request{Kind: Builtin, Tool: "Bash", Subject: "ls", Channel: "slack:C1"})
	if err == nil || got.Action != Ask {
		t.Errorf("Decide = %+v, %v; want ask and the store's error", got, err)
	}
}

func TestSubject(t *testing.T) {
	tests := []struct{ tool, args, want string }{
		{"Bash", `{"command":"go test ./..."}`, "go test ./..."},
		{"Write", `{"path":"./notes/../secrets/key","content":"x"}`, "secrets/key"},
		{"Read", `{"path":"/etc/passwd"}`, "etc/passwd"},
		{"Edit", `{"path":"../../x"}`, "x"},
		{"Bash", `{"cmd":"ls"}`, `{"cmd":"ls"}`},
		{"Bash", `not json`, `not json`},
		{"mcp__github__create_issue", `{"title":"t"}`, `{"title":"t"}`},
	}
	for _, tt := range tests {
		if got := Subject(tt.tool, tt.args); got != tt.want {
			t.Errorf("Subject(%s, %s) = %q, want %q", tt.tool, tt.args, got, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, r := range []Rule{{Action: Ask}, {Tool: "[", Action: Ask}, {Tool: "Bash", Action: "maybe"}} {
		if err := r.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", r)
		}
	}
	if err := (Rule{Tool: "mcp__*", Action: Deny}).Validate(); err != nil {
		t.Errorf("Validate of a good rule: %v", err)
	}
}
