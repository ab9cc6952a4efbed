package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/piece"
	"github.com/baton-bot/baton/core/policy"
)

// Approvals in the agent loop. Before a tool call runs, the gate decides:
// allow runs it, deny answers the model at once, ask parks the job in
// waiting_approval with the pending call and a checkpoint of the movement.
// The decision resumes the job at that call without asking the model
// again: approved, the call runs once; denied (or timed out), the model
// reads why, and the movement goes on.

// Caps of what people are shown of a pending call.
const (
	previewRunes = 1500
	previewLines = 30
)

// park is a movement stopped at a call that waits for a person.
type park struct {
	approval   core.Approval
	checkpoint string
	// question and waitKind, for a park in waiting_human (a budget, a
	// guard), are what the thread is asked and core.Job.WaitKind.
	question string
	waitKind string
}

// checkpoint is what a parked movement resumes from: its conversation and
// counters as they stood at the pending call, the pending call first in
// Calls and the rest of that assistant turn after it.
type checkpoint struct {
	Movement    string         `json:"movement"`
	Msgs        []llm.Message  `json:"msgs"`
	Meta        []metaJSON     `json:"meta"`
	Record      []llm.Message  `json:"record"`
	Results     int            `json:"results"`
	Compactions int            `json:"compactions"`
	CompactOff  bool           `json:"compact_off,omitempty"`
	Called      bool           `json:"called"`
	Iter        int            `json:"iter"`
	TextOnly    int            `json:"text_only,omitempty"`
	Invalid     int            `json:"invalid,omitempty"`
	LastText    string         `json:"last_text,omitempty"`
	Fired       []level        `json:"fired,omitempty"`
	Calls       []llm.ToolCall `json:"calls"`
	Images      []llm.Part     `json:"images,omitempty"`
	Seen        int64          `json:"seen"`
	// Loaded are the external tools the movement loaded (mcp_search), to
	// offer again when it resumes.
	Loaded []string `json:"loaded,omitempty"`
	// Egress is the host:port the movement parked for (egress.go), with
	// no pending call. What people decided on other hosts is the job's
	// approvals' (recallEgress).
	Egress string `json:"egress,omitempty"`
	// Budget is the limit the movement parked before passing (budget.go),
	// with no pending call: it resumes at the request it did not make.
	Budget *budgetHit `json:"budget,omitempty"`
	// Guard is the loop guard the movement parked for (guard.go); Calls
	// hold the repeated call first, when it was one.
	Guard *guardHit `json:"guard,omitempty"`
}

type metaJSON struct {
	Kind   msgKind `json:"k"`
	Masked bool    `json:"m,omitempty"`
	Seq    int     `json:"s,omitempty"`
}

// gate asks the engine's gate about call; without a gate every call runs.
// A gate that fails asks a person (denied by default would stop work the
// operator allowed; allowed would bypass the operator's rule).
func (m *movement) gate(ctx context.Context, call llm.ToolCall) policy.Decision {
	pr, e := m.pr, m.pr.e
	if e.cfg.Gate == nil {
		return policy.Decision{Action: policy.Allow}
	}
	kind := policy.Builtin
	if k, ok := m.tools[call.Name].(policy.Kinded); ok {
		kind = k.PolicyKind()
	}
	d, err := e.cfg.Gate.Decide(ctx, policy.Request{
		Kind: kind, Tool: call.Name, Subject: policy.Subject(call.Name, call.Arguments),
		Channel: pr.channel(ctx), Piece: pr.piece.Name, Requester: pr.task.OwnerUser,
	})
	if err != nil {
		pr.log.Warn("the approvals policy could not decide; asking", "tool", call.Name, "err", err)
		d.Action = policy.Ask
	}
	return d
}

// channel is the task's platform-qualified channel, as rules name it.
func channel(t core.Task) string {
	return string(t.Thread.Platform) + ":" + t.Thread.Channel
}

// channel is the platform-qualified channel the job's calls are judged in:
// its task's, or for a subtask the parent task's, so that a rule for a
// channel holds for the subtasks its requests split into. A parent that
// cannot be read leaves the subtask's own channel, which no rule names:
// rules for every channel still apply, the defaults too.
func (pr *pieceRun) channel(ctx context.Context) string {
	if pr.homeChannel != "" {
		return pr.homeChannel
	}
	pr.homeChannel = channel(pr.task)
	if pr.task.ParentTaskID != 0 {
		parent, err := pr.e.store.Task(ctx, pr.task.ParentTaskID)
		if err != nil {
			pr.log.Warn("the parent task of a subtask could not be read; its calls are judged in its own channel", "parent", pr.task.ParentTaskID, "err", err)
			return pr.homeChannel
		}
		pr.homeChannel = channel(parent)
	}
	return pr.homeChannel
}

// parkAt stops the movement at call, which waits for a person's decision;
// rest are the calls of the same turn after it.
func (m *movement) parkAt(ctx context.Context, call llm.ToolCall, rest []llm.ToolCall, d policy.Decision) (outcome, error) {
	pr, e := m.pr, m.pr.e
	cp := m.checkpointAt(append([]llm.ToolCall{call}, rest...))
	data, err := json.Marshal(cp)
	if err != nil {
		return outcome{}, fmt.Errorf("checkpoint of movement %s: %w", m.mv.Name, err)
	}
	subject := policy.Subject(call.Name, call.Arguments)
	now := e.cfg.Now()
	a := core.Approval{
		Tool: call.Name, Arguments: call.Arguments, CallID: call.ID, Subject: subject,
		Preview: preview(call.Name, call.Arguments, subject), Channel: pr.channel(ctx), Requester: pr.task.OwnerUser,
		Rule: d.Rule, CreatedAt: now, Deadline: now.Add(e.cfg.ApprovalTimeout),
	}
	return outcome{Next: waitApproval, park: &park{approval: a, checkpoint: string(data)}}, nil
}

// checkpointAt is the movement as it stands, to resume at calls.
func (m *movement) checkpointAt(calls []llm.ToolCall) checkpoint {
	cp := checkpoint{
		Movement: m.mv.Name, Msgs: m.msgs, Record: m.record, Results: m.results, Compactions: m.compactions,
		CompactOff: m.compactOff, Called: m.called, Iter: m.iter, TextOnly: m.textOnly, Invalid: m.invalid,
		LastText: m.lastText, Calls: calls, Images: m.images, Seen: m.pr.seen,
		Loaded: m.loaded,
	}
	for _, md := range m.meta {
		cp.Meta = append(cp.Meta, metaJSON{Kind: md.kind, Masked: md.masked, Seq: md.seq})
	}
	for l, fired := range m.meter.fired {
		if fired {
			cp.Fired = append(cp.Fired, level(l))
		}
	}
	return cp
}

// waitApproval is the outcome of a movement parked for an approval: not a
// step of the piece.
const waitApproval = "\x00approval"

// resumeMovement runs mv on from the checkpoint it parked at, with the
// decision taken on its pending call.
func (pr *pieceRun) resumeMovement(ctx context.Context, mv *piece.Movement, cp checkpoint, a core.Approval) (outcome, error) {
	m := pr.newMovement(ctx, mv)
	for _, name := range cp.Loaded {
		m.load(name)
	}
	m.msgs, m.record = cp.Msgs, cp.Record
	for _, md := range cp.Meta {
		m.meta = append(m.meta, msgMeta{kind: md.Kind, masked: md.Masked, seq: md.Seq})
	}
	if len(m.meta) != len(m.msgs) {
		return outcome{}, fmt.Errorf("checkpoint of movement %s: %d messages, %d notes", mv.Name, len(m.msgs), len(m.meta))
	}
	m.results, m.compactions, m.compactOff, m.called = cp.Results, cp.Compactions, cp.CompactOff, cp.Called
	m.iter, m.textOnly, m.invalid, m.lastText, m.images = cp.Iter, cp.TextOnly, cp.Invalid, cp.LastText, cp.Images
	counts := make([]int, len(m.msgs))
	for i := range counts {
		counts[i] = -1
	}
	m.meter.restart(m.msgs, counts)
	for _, l := range cp.Fired {
		if l >= 0 && int(l) < len(m.meter.fired) {
			m.meter.fired[l] = true
		}
	}
	// What people wrote while the job waited is news to the agent.
	pr.seen = cp.Seen
	defer func() { pr.writeMovementLog(mv.Name, m.record) }()
	if cp.Egress != "" {
		return pr.resumeEgress(ctx, m, cp.Egress, a)
	}
	if cp.Guard != nil {
		return pr.resumeGuard(ctx, m, cp.Guard, cp.Calls)
	}
	if cp.Budget != nil {
		pr.raiseBudget(ctx, cp.Budget)
		return m.loop(ctx)
	}
	if len(cp.Calls) == 0 {
		return outcome{}, errors.New("checkpoint without its pending call")
	}
	call := cp.Calls[0]
	if a.Approved() {
		res, _, err := m.callTool(ctx, call)
		if err != nil {
			return outcome{}, err
		}
		m.addResult(call, res)
	} else {
		m.add(llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Name: call.Name, Content: pr.denial(a)})
	}
	if out, done, err := m.runCalls(ctx, cp.Calls[1:]); err != nil || done {
		return out, err
	}
	return m.loop(ctx)
}

// denial is what the model reads of a call a person denied, or nobody
// decided in time.
func (pr *pieceRun) denial(a core.Approval) string {
	e := pr.e
	if a.DecidedBy == core.DecidedByTimeout {
		return e.text.fill("approval_timed_out", map[string]string{"tool": a.Tool, "timeout": e.cfg.ApprovalTimeout.String()})
	}
	vars := map[string]string{"tool": a.Tool, "who": a.DecidedBy, "reason": ""}
	if r := strings.TrimSpace(a.Reason); r != "" {
		vars["reason"] = e.text.fill("approval_reason", map[string]string{"reason": clipRunes(r, 300)})
	}
	return e.text.fill("approval_denied", vars)
}

// preview is what people are shown of a pending call before they decide:
// the command, or the path and the change as +/- lines, capped.
func preview(tool, args, subject string) string {
	var a struct {
		Content   string `json:"content"`
		OldString string `json:"old_string"`
		NewString string `json:"new_string"`
	}
	_ = json.Unmarshal([]byte(args), &a)
	var b strings.Builder
	switch tool {
	case "Bash":
		b.WriteString(subject)
	case "Write":
		b.WriteString(subject + "\n")
		lines(&b, "+", a.Content)
	case "Edit":
		b.WriteString(subject + "\n")
		lines(&b, "-", a.OldString)
		lines(&b, "+", a.NewString)
	default:
		b.WriteString(args)
	}
	shown := visible(strings.TrimRight(b.String(), "\n"))
	if n := utf8.RuneCountInString(shown); n > previewRunes {
		// Nobody approves what they were not shown without knowing it.
		return prefixRunes(shown, previewRunes) + fmt.Sprintf("\n… (%d more characters not shown)", n-previewRunes)
	}
	return shown
}

// visible writes the characters that could make a preview read otherwise
// than the call runs — control characters, bidirectional overrides,
// zero-width characters (Unicode's format class) — as escapes people see.
func visible(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == utf8.RuneError, unicode.IsControl(r), unicode.Is(unicode.Cf, r):
			fmt.Fprintf(&b, "\\u{%04x}", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// lines writes s as lines prefixed with mark, at most previewLines.
func lines(b *strings.Builder, mark, s string) {
	if s == "" {
		return
	}
	all := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range all {
		if i == previewLines {
			fmt.Fprintf(b, "%s … (%d more lines)\n", mark, len(all)-i)
			return
		}
		b.WriteString(mark + " " + l + "\n")
	}
}
