// Package policy is Baton's one decision point for the agent's risky acts:
// it answers allow, ask or deny for a Request (a built-in tool call, an MCP
// server's tool call; network access later, through the same rules).
//
// Rules are consulted in this order: the operator's configured rules (the
// first that matches wins), then the "always allow" rules people stored
// from approvals in the channel, then the defaults of the request's kind. A
// configured deny always stands; a configured ask is answered by a stored
// rule when one matches; nothing a piece, chat text or a workspace file
// says can loosen a configured rule.
package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/baton-bot/baton/core"
)

// Action is what the policy says of a request.
type Action string

// Actions.
const (
	Allow Action = "allow"
	Ask   Action = "ask"
	Deny  Action = "deny"
)

// ParseAction returns the action named s.
func ParseAction(s string) (Action, bool) {
	switch a := Action(s); a {
	case Allow, Ask, Deny:
		return a, true
	}
	return "", false
}

// Kind is what a request asks to do; it sets the default when no rule
// matches.
type Kind string

// Kinds of request.
const (
	// Builtin is a call of one of Baton's own tools: allowed by default.
	Builtin Kind = "builtin"
	// External is an act outside the workspace (a tool of an MCP server
	// not marked read-only, a connection to an unlisted host): asked by
	// default.
	External Kind = "external"
	// ExternalRead is a call outside the workspace that its server
	// declares read-only (an MCP tool with readOnlyHint: true): allowed by
	// default, as Baton's own tools are; a rule can still ask or deny.
	ExternalRead Kind = "external_read"
)

// Kinded is implemented by the tools whose calls are not of kind Builtin
// (an MCP server's tools); the caller asks the policy with the kind they
// report.
type Kinded interface {
	PolicyKind() Kind
}

// Request is one act the policy decides on.
type Request struct {
	Kind Kind
	Tool string
	// Subject is what rules match: the command for Bash, the path for
	// Read, Write and Edit, the JSON arguments otherwise (see Subject).
	Subject   string
	Channel   string // platform-qualified channel of the task
	Piece     string
	Requester string // platform-qualified id of the task's requester
}

// Decision is the policy's answer and the rule it came from, as people
// read it ("approvals.rules[2]", "always-allow rule 4", "default").
type Decision struct {
	Action Action
	Rule   string
}

// Rule is one configured rule.
type Rule struct {
	// Tool is a tool name or a glob of names (path.Match syntax:
	// "mcp__github__*").
	Tool string
	// Match, when set, must match the request's subject.
	Match *regexp.Regexp
	// Channels, when not empty, limit the rule to these platform-qualified
	// channels.
	Channels []string
	Action   Action
	// Name is how people are told of the rule; default "approvals.rules[i]".
	Name string
}

// Validate reports what is wrong with r, as a sentence that says what to
// change.
func (r Rule) Validate() error {
	if r.Tool == "" {
		return fmt.Errorf("tool is required: a tool name or a glob such as %q", "mcp__github__*")
	}
	if _, err := path.Match(r.Tool, ""); err != nil {
		return fmt.Errorf("tool %q is not a valid glob: %w", r.Tool, err)
	}
	if _, ok := ParseAction(string(r.Action)); !ok {
		return fmt.Errorf("action %q is not one of allow, ask, deny", r.Action)
	}
	return nil
}

func (r Rule) matches(q Request) bool {
	if ok, _ := path.Match(r.Tool, q.Tool); !ok {
		return false
	}
	if len(r.Channels) > 0 && !slices.Contains(r.Channels, q.Channel) {
		return false
	}
	return r.Match == nil || r.Match.MatchString(q.Subject)
}

// RuleStore holds the stored "always allow" rules (core.ApprovalStore).
type RuleStore interface {
	AllowRules(ctx context.Context, channel string) ([]core.AllowRule, error)
}

// Policy decides on requests. It is safe for concurrent use.
type Policy struct {
	rules  []Rule
	stored RuleStore // nil: no stored rules
}

// New returns the policy of rules, in order, over the stored rules of
// stored (nil: none). Every rule must have passed Validate.
func New(rules []Rule, stored RuleStore) *Policy {
	rules = slices.Clone(rules)
	for i := range rules {
		if rules[i].Name == "" {
			rules[i].Name = "approvals.rules[" + strconv.Itoa(i) + "]"
		}
	}
	return &Policy{rules: rules, stored: stored}
}

// Decide answers q. When the stored rules cannot be read, an act that
// would have been allowed only by them is asked, and the error is
// returned with that decision.
func (p *Policy) Decide(ctx context.Context, q Request) (Decision, error) {
	d := Decision{Action: Allow, Rule: "default"}
	if q.Kind == External {
		d.Action = Ask
	}
	for _, r := range p.rules {
		if r.matches(q) {
			d = Decision{Action: r.Action, Rule: r.Name}
			break
		}
	}
	if d.Action != Ask || p.stored == nil || q.Channel == "" {
		return d, nil
	}
	stored, err := p.stored.AllowRules(ctx, q.Channel)
	if err != nil {
		return d, fmt.Errorf("always-allow rules of %s: %w", q.Channel, err)
	}
	for _, r := range stored {
		if r.Tool != q.Tool {
			continue
		}
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			continue // written by AlwaysPattern; an unreadable one allows nothing
		}
		if re.MatchString(q.Subject) {
			return Decision{Action: Allow, Rule: "always-allow rule " + strconv.FormatInt(r.ID, 10)}, nil
		}
	}
	return d, nil
}

// AlwaysPattern is the stored pattern of an "always allow" given for
// subject: that exact command or path, nothing more.
func AlwaysPattern(subject string) string {
	return `^` + regexp.QuoteMeta(subject) + `$`
}

// Subject returns what rules match in a call of tool with JSON arguments
// args: the command for Bash, the path for Read, Write and Edit, the
// arguments themselves otherwise (and when the expected field is missing).
// A path is given cleaned, relative to the workspace.
func Subject(tool, args string) string {
	field := ""
	switch tool {
	case "Bash":
		field = "command"
	case "Read", "Write", "Edit":
		field = "path"
	default:
		return args
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		return args
	}
	var v string
	if err := json.Unmarshal(m[field], &v); err != nil {
		return args
	}
	if field == "path" && v != "" {
		// One spelling per file, so that "./x/../secret" meets the rules
		// written for "secret".
		v = strings.TrimPrefix(path.Clean("/"+v), "/")
	}
	return v
}
