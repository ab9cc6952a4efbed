// Package tools implements the tools an agent calls inside a task's
// workspace: Read, Write, Edit, Glob, Grep, Bash, ReadImage, ReadDocument and
// Checklist (SPEC §9).
//
// Every tool confines its paths with the workspace package and fits its
// result to the token budget the caller computes with Budget (SPEC §8). A
// tool never returns a Go error: failures, bad arguments and panics become
// a Result with IsError set, which the agent loop sends back to the model.
// Call tools through Safe so that a panic cannot crash a worker.
//
// What a tool says — its description, its parameters' descriptions, the
// notes on cut results and its errors — comes from the catalogue's tools
// section (core/catalog/*/tools.yaml) in the locale of the *catalog.Texts
// the caller passes (Description, Schema and Env.Texts; nil is English).
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/baton-bot/baton/core/catalog"
	"github.com/baton-bot/baton/core/egress"
	"github.com/baton-bot/baton/core/tokens"
	"github.com/baton-bot/baton/core/workspace"
)

// Tool is one capability offered to the model. Implementations are safe for
// concurrent use by different jobs; Call never returns a Go error (failures
// are Results with IsError) and should not panic (Safe recovers if it does).
type Tool interface {
	Name() string
	// Description tells the model what the tool does and when to use it,
	// in tx's locale (nil: English).
	Description(tx *catalog.Texts) string
	// Schema is the JSON Schema of the arguments object, its descriptions
	// in tx's locale (nil: English).
	Schema(tx *catalog.Texts) json.RawMessage
	Call(ctx context.Context, env *Env, args json.RawMessage) Result
}

// Env is what one call runs against. The caller builds it per call.
type Env struct {
	WS *workspace.Workspace
	// TokenizerBudget is the most tokens this result may take, counted
	// with Tokens — the offline tokenizer's units, not the model's: Budget
	// converts. Zero or less stands for MinBudget.
	TokenizerBudget int
	// Network lets Bash reach the network (the movement's network: true).
	Network bool
	// Egress, when set, is the job's way out through the egress proxy:
	// Bash gives each sandboxed command an endpoint of it (unless
	// Network gives the command the network itself).
	Egress Egress
	Tokens tokens.Counter
	Logger *slog.Logger
	// Texts words the results: notes and errors (nil: English).
	Texts *catalog.Texts
}

func (e *Env) budget() int {
	if e.TokenizerBudget <= 0 {
		return MinBudget
	}
	return e.TokenizerBudget
}

// texts returns the catalogue the results are worded in.
func (e *Env) texts() *catalog.Texts {
	if e == nil {
		return nil
	}
	return e.Texts
}

// say returns the tools text key filled with vars, in the call's locale.
func (e *Env) say(key string, vars ...string) string {
	return e.texts().Fill(key, vars...)
}

func (e *Env) counter() tokens.Counter {
	if e.Tokens == nil {
		return tokens.Default()
	}
	return e.Tokens
}

func (e *Env) logger() *slog.Logger {
	if e == nil || e.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Logger
}

// Egress opens endpoints of a job's egress session (*egress.Session).
type Egress interface {
	// Open returns a new endpoint for one command; close it once the
	// command has ended.
	Open(ctx context.Context) (egress.Endpoint, error)
}

// Image is an image part of a result.
type Image struct {
	MIME string // image/png, image/jpeg, image/gif or image/webp
	Data []byte
}

// Result is what goes back to the model.
type Result struct {
	Text    string
	Images  []Image
	IsError bool
	// Load names tools the caller offers the model from the next request
	// on, for the rest of the movement (mcp_search's picks); the caller
	// finds them through its own lookup, and ignores names it does not
	// know.
	Load []string
}

// textError is a failure worded in the catalogue: the text key filled
// with vars. Its Error is the English text, for logs; results say it in
// the call's locale (Env.fail).
type textError struct {
	key  string
	vars []string
}

func (e *textError) Error() string { return (*catalog.Texts)(nil).Fill(e.key, e.vars...) }

// fault returns the failure the catalogue's text key says, filled with
// vars (name, value, …).
func fault(key string, vars ...string) error { return &textError{key: key, vars: vars} }

// fail builds the error result of tool for err, about the path rel the
// call named ("" when none).
func (e *Env) fail(tool, rel string, err error) Result {
	return Result{Text: tool + ": " + e.explain(rel, err), IsError: true}
}

// explain words err in the call's locale: a textError as the catalogue
// says it, the workspace's refusals (outside, logs/ read-only, not a
// regular file, …), a missing file and the end of the call's context by
// their catalogue texts about rel; anything else (an I/O error) as Go
// words it.
func (e *Env) explain(rel string, err error) string {
	var te *textError
	p := quote(rel)
	switch {
	case errors.As(err, &te):
		return e.say(te.key, te.vars...)
	case errors.Is(err, context.Canceled):
		return e.say("tools.err.cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		return e.say("tools.err.deadline")
	case errors.Is(err, workspace.ErrOutside):
		clean := path.Clean(rel)
		switch {
		case path.IsAbs(rel):
			return e.say("tools.err.outside_absolute", "path", p)
		case clean == ".." || strings.HasPrefix(clean, "../"):
			return e.say("tools.err.outside_climbs", "path", p)
		}
		return e.say("tools.err.outside_link", "path", p)
	case errors.Is(err, workspace.ErrReadOnly):
		return e.say("tools.err.read_only", "path", p)
	case errors.Is(err, workspace.ErrNotRegular):
		return e.say("tools.err.not_regular", "path", p)
	case errors.Is(err, workspace.ErrIsDir):
		return e.say("tools.err.is_dir", "path", p)
	case errors.Is(err, fs.ErrNotExist):
		return e.say("tools.err.not_found", "path", p)
	case errors.Is(err, fs.ErrPermission):
		return e.say("tools.err.permission", "path", p)
	}
	return err.Error()
}

// quote shows a path the model named: as it is when it is plain, quoted
// when it holds spaces, quotes or control characters (or is empty).
func quote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == '"' || r == 0x7f }) {
		return s
	}
	return fmt.Sprintf("%q", s)
}

// param matches a $name placeholder of a schema template.
var param = regexp.MustCompile(`\$([a-z_]+)`)

// schema fills the JSON Schema template tmpl of tool (its Name in lower
// case: "read") with the descriptions of its parameters: each $name
// becomes the JSON string of the catalogue's "tools.<tool>.param.<name>".
func schema(tx *catalog.Texts, tool, tmpl string) json.RawMessage {
	return json.RawMessage(param.ReplaceAllStringFunc(tmpl, func(m string) string {
		b, _ := json.Marshal(tx.Text("tools." + tool + ".param." + m[1:]))
		return string(b)
	}))
}

// Token budget limits (SPEC §8), in the model's tokens.
const (
	// MinBudget is the floor of a tool result's budget, unless half of
	// the window's room is less.
	MinBudget = 2000
	// DefaultMaxResultTokens is context.tool_result_max_tokens's default.
	DefaultMaxResultTokens = 60000
)

// Budget returns how many tokenizer tokens (counted with Env.Tokens) one
// tool result may take, for Env.TokenizerBudget. Its other numbers are in
// the model's tokens, the context ladder's units: the window, the tokens
// the conversation holds now, the reply's reservation and the ceiling of
// one result (DefaultMaxResultTokens when <= 0); modelPerTokenizer is how
// many model tokens one tokenizer token makes (the correction learned from
// reported usage; 1 when <= 0). The budget is half of what is left once
// the conversation and the reply are reserved, at most maxResultModel, at
// least MinBudget — but never more than half of the window's room, so that
// one result cannot take more than half of what the ladder sees left. It is
// at least 1.
func Budget(windowModel, usedModel, maxOutputModel, maxResultModel int, modelPerTokenizer float64) (tokenizerTokens int) {
	if maxResultModel <= 0 {
		maxResultModel = DefaultMaxResultTokens
	}
	if modelPerTokenizer <= 0 {
		modelPerTokenizer = 1
	}
	available := windowModel - usedModel - maxOutputModel
	model := max(min(available/2, maxResultModel), MinBudget)
	model = min(model, (windowModel-usedModel)/2)
	return max(int(float64(model)/modelPerTokenizer), 1)
}

// Safe calls t and turns a panic into an error result; it also refuses a
// call without a workspace. Use it for every call the model asks for.
func Safe(ctx context.Context, t Tool, env *Env, args json.RawMessage) (res Result) {
	name := t.Name()
	defer func() {
		if p := recover(); p != nil {
			env.logger().Error("tool panicked", "tool", name, "panic", p, "stack", string(debug.Stack()))
			res = Result{Text: env.say("tools.err.internal", "tool", name), IsError: true}
		}
	}()
	if env == nil || env.WS == nil {
		return env.fail(name, "", fault("tools.err.no_workspace"))
	}
	if err := ctx.Err(); err != nil {
		return env.fail(name, "", err)
	}
	return t.Call(ctx, env, args)
}

// decode reads a tool's arguments strictly: unknown fields and trailing data
// are errors the model can correct.
func decode(args json.RawMessage, v any) error {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fault("tools.err.invalid_arguments", "err", err.Error())
	}
	if dec.More() {
		return fault("tools.err.trailing_data")
	}
	return nil
}

// Set is a registry of tools by name. A Set is immutable once built and safe
// for concurrent use.
type Set struct {
	byName map[string]Tool
	names  []string // in the order given
}

// NewSet builds a set; duplicate names are an error.
func NewSet(ts ...Tool) (*Set, error) {
	s := &Set{byName: make(map[string]Tool, len(ts))}
	for _, t := range ts {
		if _, dup := s.byName[t.Name()]; dup {
			return nil, fmt.Errorf("tool set: %s registered twice", t.Name())
		}
		s.byName[t.Name()] = t
		s.names = append(s.names, t.Name())
	}
	return s, nil
}

// Builtin returns the nine tools of SPEC §9, with bash as the Bash tool
// (left out when nil) and parser parsing for ReadDocument and ReadImage
// (nil: ReadDocument refuses every call and ReadImage checks headers only).
func Builtin(bash *Bash, parser Parser) *Set {
	ts := []Tool{Read{}, Write{}, Edit{}, Glob{}, Grep{}}
	if bash != nil {
		ts = append(ts, bash)
	}
	ts = append(ts, ReadImage{Parser: parser}, ReadDocument{Parser: parser}, Checklist{})
	s, err := NewSet(ts...)
	if err != nil {
		panic(err) // the names above are distinct
	}
	return s
}

// Lookup returns the tool with that name.
func (s *Set) Lookup(name string) (Tool, bool) {
	t, ok := s.byName[name]
	return t, ok
}

// Select returns the subset named (a movement's allow-list), in the order
// given. An unknown name is an error naming it and the known tools, so piece
// validation can report it.
func (s *Set) Select(names []string) (*Set, error) {
	var picked []Tool
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		t, ok := s.byName[n]
		if !ok {
			known := slices.Clone(s.names)
			sort.Strings(known)
			return nil, fmt.Errorf("unknown tool %q (known: %v)", n, known)
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		picked = append(picked, t)
	}
	return NewSet(picked...)
}

// Names lists the tools in registration order.
func (s *Set) Names() []string { return slices.Clone(s.names) }

// Tools lists the tools in registration order.
func (s *Set) Tools() []Tool {
	out := make([]Tool, len(s.names))
	for i, n := range s.names {
		out[i] = s.byName[n]
	}
	return out
}
