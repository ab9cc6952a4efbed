package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/baton-bot/baton/core"
	"strconv"
	"strings"
	"time"

	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/piece"
	"github.com/baton-bot/baton/core/policy"
	"github.com/baton-bot/baton/core/tools"
	"github.com/baton-bot/baton/core/workspace"
)

// textOnlyLimit is how many text-only replies in a row end a movement as a
// transition to its default next step.
const textOnlyLimit = 3

// invalidLimit is how many invalid transition calls in a row force the
// movement to its default next step.
const invalidLimit = 3

// movement is one agent loop: its messages never leave it.
type movement struct {
	pr    *pieceRun
	mv    *piece.Movement
	next  []string // allowed next steps for this job
	tools map[string]tools.Tool
	defs  []llm.ToolDef
	// loaded are the external tools loaded during the movement
	// (tools.Result.Load), in order, for its checkpoint.
	loaded []string
	msgs   []llm.Message
	meta   []msgMeta // parallel to msgs
	meter  *meter
	// record is every message of the movement in order, as it was first
	// added: masking and compaction change msgs, never record. It is what
	// the movement log holds.
	record []llm.Message

	results     int  // tool results so far, numbering them
	compactions int  // compactions so far
	compactOff  bool // compaction gave up for this movement
	called      bool // the model has answered a request of this movement
	truncTold   bool // a truncated prompt was recorded in this movement

	iter     int        // the model's requests so far
	textOnly int        // text-only replies in a row
	invalid  int        // invalid calls in a row
	lastText string     // the model's last text
	images   []llm.Part // images of the current turn's results, sent after them

	lastCall string // the last tool call's callKey, for the repeat guard
	repeats  int    // identical calls in a row, lastCall's included
}

// runMovement runs mv from its system and user prompts until a transition,
// chosen or forced. prompts renders them; shrink > 0 asks for them with the
// enriched instruction's parts cut shorter (see fit).
func (pr *pieceRun) runMovement(ctx context.Context, mv *piece.Movement, prompts func(shrink int) (system, user string, err error)) (outcome, error) {
	ctx, span := pr.movementSpan(ctx, mv.Name)
	defer span.End()
	m := pr.newMovement(ctx, mv)
	system, user, err := prompts(0)
	if err != nil {
		return outcome{}, err
	}
	m.start(system, user)
	// A closure, so that the log gets the messages as they stand when
	// the movement ends, not the two prompts of its start.
	defer func() { pr.writeMovementLog(mv.Name, m.record) }()
	if err := m.fit(ctx, prompts); err != nil {
		return outcome{}, err
	}
	return m.loop(ctx)
}

// newMovement returns mv ready to run: its tools (the piece's, then the
// run's external tools), their definitions and its meter.
func (pr *pieceRun) newMovement(ctx context.Context, mv *piece.Movement) *movement {
	m := &movement{pr: pr, mv: mv, tools: map[string]tools.Tool{}}
	for _, n := range mv.Next {
		// A subtask's job cannot wait for subtasks of its own.
		if n == piece.WaitSubtasks && pr.job.ParentJobID != 0 {
			continue
		}
		m.next = append(m.next, n)
	}
	for _, name := range mv.Tools {
		t, ok := pr.e.toolbox.Lookup(name)
		if !ok {
			continue // validated with the piece; a tool disabled at start (Bash without sandbox) is left out
		}
		if a, ok := t.(interface{ Available() (bool, string) }); ok {
			if ok, _ := a.Available(); !ok {
				continue
			}
		}
		m.tools[name] = t
		m.defs = append(m.defs, llm.ToolDef{Name: t.Name(), Description: t.Description(pr.e.text.cat), Parameters: t.Schema(pr.e.text.cat)})
	}
	if pr.ext != nil {
		for _, t := range pr.ext.Offer(ctx) {
			if _, dup := m.tools[t.Name()]; dup || t.Name() == transitionTool {
				continue
			}
			m.tools[t.Name()] = t
			m.defs = append(m.defs, llm.ToolDef{Name: t.Name(), Description: t.Description(pr.e.text.cat), Parameters: t.Schema(pr.e.text.cat)})
		}
	}
	m.defs = append(m.defs, transitionDef(pr.e.text.cat, m.next))
	m.meter = newMeter(pr.e.cfg.ContextWindow, pr.e.tokens, pr.e.defs.count(m.defs))
	m.meter.corr = pr.e.corr.forModel(m.model())
	m.meter.factor = m.meter.corr.current()
	return m
}

// start sets the movement's conversation to its system and first user
// prompt.
func (m *movement) start(system, user string) {
	m.msgs, m.meta, m.record = m.msgs[:0], m.meta[:0], m.record[:0]
	m.meter.restart(nil, nil)
	m.add(llm.Message{Role: llm.RoleSystem, Content: system})
	m.add(llm.Message{Role: llm.RoleUser, Content: user})
}

// fit makes sure the movement's first request fits the window, with room
// for the reply, before the model is called. With compaction on, a first
// request at or over the compaction threshold — where there is nothing to
// summarise yet — is rebuilt with the enriched instruction's parts cut
// shorter, their caps halved up to maxShrink times, until it is under the
// compaction target. A request that still cannot fit fails the job with a
// reason naming its size and the window: sending it would only fail, and
// forcing a transition without a model call would pass off no work as an
// outcome.
func (m *movement) fit(ctx context.Context, prompts func(int) (string, string, error)) error {
	pr, e := m.pr, m.pr.e
	window, reply := m.meter.window, e.cfg.MaxOutputTokens
	fits := func() bool { return m.meter.used()+reply <= window }
	shrunk := 0
	if c := e.cfg.Compaction; c.Enabled && (m.meter.ratio() >= c.Compact || !fits()) {
		before := m.meter.used()
		for shrunk < maxShrink && (m.meter.ratio() > c.Target || !fits()) {
			shrunk++
			system, user, err := prompts(shrunk)
			if err != nil {
				return err
			}
			m.start(system, user)
		}
		if e.cfg.Meter != nil {
			e.cfg.Meter.ContextLevel("shrunk")
		}
		_ = pr.event(ctx, "context_shrunk", m.mv.Name, fmt.Sprintf("first request with the enriched instruction's caps cut to 1/%d: %s → %s of %d tokens",
			1<<shrunk, pct(before, window), pct(m.meter.used(), window), window))
	}
	if fits() {
		return nil
	}
	key := "request_too_large"
	if shrunk > 0 {
		key = "request_too_large_shrunk"
	}
	return &failure{reason: e.text.fill(key, map[string]string{
		"movement": m.mv.Name, "need": groupDigits(m.meter.used()), "reply": groupDigits(reply), "window": groupDigits(window),
	})}
}

// add appends msg to the movement's conversation.
func (m *movement) add(msg llm.Message) {
	md := msgMeta{kind: kindOther}
	if msg.Role == llm.RoleTool {
		m.results++
		md = msgMeta{kind: kindResult, seq: m.results}
	}
	m.addMeta(msg, md)
}

func (m *movement) addMeta(msg llm.Message, md msgMeta) {
	m.msgs = append(m.msgs, msg)
	m.meta = append(m.meta, md)
	m.meter.appended(msg)
	m.record = append(m.record, msg)
}

// model returns the model the movement's requests name.
func (m *movement) model() string {
	if m.pr.state.Model != "" {
		return m.pr.state.Model
	}
	if m.mv.Model != "" {
		return m.mv.Model
	}
	return m.pr.e.cfg.Model
}

func (m *movement) loop(ctx context.Context) (outcome, error) {
	pr, e := m.pr, m.pr.e
	model := m.model()
	for {
		m.iter++
		if m.iter > m.mv.MaxIterations {
			return m.forced(m.lastText, e.text.fill("forced_iterations", map[string]string{"n": strconv.Itoa(m.mv.MaxIterations)})), nil
		}
		for _, msg := range pr.steering(ctx) {
			m.addMeta(msg, msgMeta{kind: kindHuman})
		}
		out, stop, err := m.checkContext(ctx, m.lastText)
		if err != nil {
			return outcome{}, err
		}
		if stop {
			return out, nil
		}
		if out, stop, err := m.overDuration(ctx); err != nil || stop {
			return out, err
		}
		if hit, err := pr.overBudget(ctx, model, m.meter.used()); err != nil {
			return outcome{}, err
		} else if hit != nil {
			return m.parkForBudget(ctx, hit)
		}
		pr.mu.Lock()
		pr.iteration = m.iter
		pr.mu.Unlock()
		m.meter.sending()
		pr.step(ctx, Step{Kind: StepThinking})
		start := time.Now()
		req := llm.Request{Model: model, Messages: m.msgs, Tools: m.defs, MaxTokens: e.cfg.MaxOutputTokens, ToolChoice: llm.ToolChoiceAuto}
		req.OnText, req.OnRestart = pr.textHooks(ctx)
		resp, err := m.complete(ctx, req)
		if e.cfg.Meter != nil {
			e.cfg.Meter.LLMCall(model, time.Since(start), resp.Usage, err)
		}
		if err != nil {
			if ctx.Err() != nil {
				return outcome{}, ctx.Err()
			}
			return outcome{}, &failure{reason: e.text.modelFailure(err)}
		}
		m.called = true
		if err := pr.addUsage(ctx, m.mv.Name, model, resp.Usage, m.meter.used()); err != nil {
			return outcome{}, err
		}
		// cutNote, when not empty, tells the model that the answer hit the
		// token limit while writing its last call: that call is neither run
		// (its arguments are cut short) nor kept in the conversation, and
		// the note asks the model to go on; it follows the other calls'
		// results.
		cutNote := ""
		if cut, ok := cutCall(resp); ok {
			resp.Message.ToolCalls = resp.Message.ToolCalls[:len(resp.Message.ToolCalls)-1]
			cutNote = e.text.fill("tool_call_cut", map[string]string{"name": cut.Name})
			_ = pr.event(ctx, "tool_call_cut", m.mv.Name, cut.Name+" "+clipRunes(cut.Arguments, 200))
		}
		if cutNote == "" || resp.Message.Content != "" || len(resp.Message.ToolCalls) > 0 {
			m.add(resp.Message) // (an answer that was only the cut call leaves nothing to keep)
		}
		if m.meter.responded(resp.Usage) {
			m.truncated(ctx, resp.Usage.PromptTokens)
		}
		if e.cfg.Meter != nil && resp.Usage.Reported {
			e.cfg.Meter.TokenEstimate(model, m.meter.sent, resp.Usage.PromptTokens, m.meter.factor)
		}
		m.textCalls(ctx, resp)

		calls := resp.Message.ToolCalls
		if text := strings.TrimSpace(resp.Message.Content); text != "" {
			m.lastText = text
		}
		if len(calls) == 0 && cutNote != "" {
			m.add(llm.Message{Role: llm.RoleUser, Content: cutNote})
			continue
		}
		if len(calls) == 0 {
			m.textOnly++
			if m.textOnly >= textOnlyLimit {
				return m.forced(m.lastText, e.text.fill("forced_text_only", map[string]string{"n": strconv.Itoa(m.textOnly)})), nil
			}
			switch {
			case resp.UnreadCall:
				m.add(llm.Message{Role: llm.RoleUser, Content: e.text.fill("tool_call_unreadable", map[string]string{"tools": m.toolList()})})
			case m.textOnly >= e.cfg.ReminderAfter:
				m.add(llm.Message{Role: llm.RoleUser, Content: e.text.msg("reminder")})
			}
			continue
		}
		m.textOnly = 0
		if out, done, err := m.runCalls(ctx, calls); err != nil || done {
			return out, err
		}
		if cutNote != "" {
			m.add(llm.Message{Role: llm.RoleUser, Content: cutNote})
		}
	}
}

// cutCall returns the last tool call of an answer that stopped at the
// token limit (finish_reason "length") while writing it: its arguments
// are not a whole JSON value.
func cutCall(resp llm.Response) (llm.ToolCall, bool) {
	calls := resp.Message.ToolCalls
	if resp.FinishReason != "length" || len(calls) == 0 {
		return llm.ToolCall{}, false
	}
	last := calls[len(calls)-1]
	if args := strings.TrimSpace(last.Arguments); args != "" && json.Valid([]byte(args)) {
		return llm.ToolCall{}, false
	}
	return last, true
}

// runCalls runs the tool calls of one assistant turn in order (or what is
// left of them after a call that waited for a person). done reports an
// outcome that ends the movement: a transition, chosen or forced by
// invalid calls, or a park at a call that waits for an approval.
func (m *movement) runCalls(ctx context.Context, calls []llm.ToolCall) (out outcome, done bool, err error) {
	pr, e := m.pr, m.pr.e
	pr.egressTurn()
	for i, call := range calls {
		if call.Name == transitionTool {
			out, problem := pr.parseTransition(call.Arguments, m.next)
			if problem == "" {
				m.add(llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Name: call.Name, Content: "ok"})
				for _, rest := range calls[i+1:] {
					m.add(llm.Message{Role: llm.RoleTool, ToolCallID: rest.ID, Name: rest.Name, Content: e.text.msg("tool_not_run")})
				}
				return out, true, nil
			}
			m.invalid++
			_ = pr.event(ctx, "transition_refused", m.mv.Name, problem)
			m.add(llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Name: call.Name, Content: problem})
			continue
		}
		repeats := 0
		if n := e.cfg.Guards.RepeatCalls; n > 0 {
			if repeats = m.repeated(call); repeats >= n+2 {
				pr.tripped(ctx, GuardRepeat, m.mv.Name, fmt.Sprintf("%s %s, %d times in a row", call.Name, clipRunes(call.Arguments, 300), repeats))
				out, err := m.parkForGuard(ctx, GuardRepeat, pr.repeatQuestion(call, repeats), calls[i:])
				return out, err == nil, err
			}
		}
		m.load(call.Name)
		if _, known := m.tools[call.Name]; known {
			switch d := m.gate(ctx, call); d.Action {
			case policy.Deny:
				_ = pr.event(ctx, "tool_denied", m.mv.Name, call.Name+" "+clipRunes(call.Arguments, 300)+" ("+d.Rule+")")
				m.add(llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Name: call.Name,
					Content: e.text.fill("policy_denied", map[string]string{"tool": call.Name, "rule": d.Rule})})
				continue
			case policy.Ask:
				out, err := m.parkAt(ctx, call, calls[i+1:], d)
				return out, err == nil, err
			}
		}
		res, valid, err := m.tracedCall(ctx, call)
		if err != nil {
			return outcome{}, false, err
		}
		if valid {
			m.invalid = 0
		}
		if n := e.cfg.Guards.RepeatCalls; n > 0 && repeats >= n {
			pr.tripped(ctx, GuardRepeat+"_warned", m.mv.Name, fmt.Sprintf("%s, %d times in a row", call.Name, repeats))
			res.Text = strings.TrimSpace(res.Text + "\n\n" + e.text.fill("guard_repeat_warning", map[string]string{"tool": call.Name, "n": strconv.Itoa(repeats)}))
		}
		m.addResult(call, res)
	}
	if len(m.images) > 0 {
		// Images travel in a user message: most providers refuse them
		// in tool results.
		m.add(llm.Message{Role: llm.RoleUser, Parts: append([]llm.Part{{Type: llm.PartText, Text: e.text.msg("image_message")}}, m.images...)})
		m.images = nil
	}
	if out, parked, err := m.parkForEgress(ctx); parked || err != nil {
		return out, parked, err
	}
	if m.invalid >= invalidLimit {
		return m.forced(m.lastText, e.text.fill("forced_invalid", map[string]string{"n": strconv.Itoa(m.invalid)})), true, nil
	}
	return outcome{}, false, nil
}

// addResult adds the result of call to the conversation; its images wait
// for the end of the turn (runCalls).
func (m *movement) addResult(call llm.ToolCall, res tools.Result) {
	text := res.Text
	for _, img := range res.Images {
		m.images = append(m.images, llm.Part{Type: llm.PartImage, ImageMIME: img.MIME, ImageData: img.Data})
	}
	if len(res.Images) > 0 {
		about := argPath(call.Arguments)
		if about == "" {
			about = call.Name
		}
		text = strings.TrimSpace(text + "\n" + m.pr.e.text.fill("image_attached", map[string]string{"path": about}))
	}
	m.add(llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Name: call.Name, Content: text})
}

// checkContext runs the context manager before a request. With compaction
// on, masking and compaction go first and lower the ratio, so that the
// note's ladder — warn, the wrap-up prompt, the forced transition — is
// reached only when they could not help; with compaction off the ladder is
// the note's, exactly. The forced transition waits until the model has
// answered once in the movement (fit has made sure the first request
// fits): a movement is never ended before its model was asked. stop
// reports the forced outcome when the window is too full to go on; err
// ends the attempt (the context ended, the token budget spent while
// summarising).
func (m *movement) checkContext(ctx context.Context, lastText string) (out outcome, stop bool, err error) {
	e := m.pr.e
	if c := e.cfg.Compaction; c.Enabled && m.called {
		m.mask(ctx)
		if !m.compactOff && m.compactions < c.MaxPerMovement && m.meter.ratio() >= c.Compact {
			// The summary is a model request like any: one that would
			// pass a budget parks the job before it is sent, and the
			// compaction runs once the budget is raised.
			if hit, err := m.pr.overBudget(ctx, m.model(), m.meter.used()); err != nil {
				return outcome{}, false, err
			} else if hit != nil {
				out, err := m.parkForBudget(ctx, hit)
				return out, err == nil, err
			}
			if err := m.compact(ctx); err != nil {
				return outcome{}, false, err
			}
		}
	}
	ratio := m.meter.ratio()
	top := levelExhausted
	if !m.called {
		top = levelPrompt
	}
	for _, l := range m.meter.check(e.cfg.Levels, top) {
		m.reached(ctx, l, ratio)
	}
	if m.called && m.meter.fired[levelForce] {
		return m.forced(lastText, e.text.fill("forced_context", map[string]string{"pct": strconv.Itoa(int(ratio * 100))})), true, nil
	}
	return outcome{}, false, nil
}

// reached acts on a rung of the ladder the movement has just reached: a
// job event, and for the prompt rung the wrap-up message.
func (m *movement) reached(ctx context.Context, l level, ratio float64) {
	pr, e := m.pr, m.pr.e
	pr.mu.Lock()
	pr.level = l
	pr.mu.Unlock()
	if e.cfg.Meter != nil {
		e.cfg.Meter.ContextLevel(l.String())
	}
	_ = pr.event(ctx, "context_"+l.String(), m.mv.Name, fmt.Sprintf("context %d%% full (%d of %d tokens)", int(ratio*100), m.meter.used(), m.meter.window))
	if l == levelPrompt {
		m.add(llm.Message{Role: llm.RoleUser, Content: e.text.msg("wrap_up")})
	}
}

// forced returns the mechanical transition to the movement's default next
// step (ABORT when it has none): not a judgement that the work is done.
func (m *movement) forced(lastText, reason string) outcome {
	next := m.mv.ForcedNext()
	out := outcome{Next: next, Summary: forcedSummary(lastText, reason), Forced: reason}
	switch next {
	case piece.Ask:
		out.Question = out.Summary
	case piece.WaitSubtasks:
		out.Next = piece.Abort
		out.Summary = forcedSummary(lastText, reason+"; "+m.pr.e.text.msg("abort_forced_subtasks"))
	}
	return out
}

// callTool runs one tool call and returns its result; valid reports whether
// the call named a tool of this movement with well-formed arguments.
func (m *movement) callTool(ctx context.Context, call llm.ToolCall) (tools.Result, bool, error) {
	pr, e := m.pr, m.pr.e
	t, ok := m.tools[call.Name]
	if !ok {
		return tools.Result{IsError: true, Text: e.text.fill("unknown_tool", map[string]string{"name": strconv.Quote(call.Name), "tools": m.toolList()})}, false, nil
	}
	if err := pr.toolsReady(); err != nil {
		return tools.Result{}, false, fmt.Errorf("workspace of task %d: %w", pr.task.ID, err)
	}
	args := json.RawMessage(call.Arguments)
	if strings.TrimSpace(call.Arguments) == "" {
		args = json.RawMessage("{}")
	}
	var probe map[string]any
	if err := json.Unmarshal(args, &probe); err != nil {
		return tools.Result{IsError: true, Text: e.text.fill("bad_arguments", map[string]string{"err": err.Error()})}, false, nil
	}
	env := &tools.Env{
		WS: pr.ws,
		// The ladder counts the model's tokens (the tokenizer's, corrected);
		// the tool counts with the tokenizer.
		TokenizerBudget: tools.Budget(m.meter.window, m.meter.used(), e.cfg.MaxOutputTokens, e.cfg.ToolResultMaxTokens, m.meter.factor),
		Network:         m.mv.Network,
		Egress:          pr.egressTools(ctx),
		Tokens:          e.tokens,
		Logger:          pr.log,
		Texts:           e.text.cat,
	}
	effect := tools.EffectOf(t)
	limits := workspace.Call{Deletes: effect == tools.RunsCommands}
	if effect == tools.WritesFile {
		limits.Path = argPath(call.Arguments)
	}
	var res tools.Result
	var took time.Duration
	refused := false
	if effect != tools.ReadsOnly {
		res, refused = m.admit(ctx, call.Name, limits)
	}
	if !refused {
		pr.step(ctx, Step{Kind: StepTool, Tool: call.Name, Subject: policy.Subject(call.Name, call.Arguments)})
		title := ToolTitle(call.Name, call.Arguments)
		pr.progress(ctx, core.ProgressEvent{Kind: core.ProgressToolStarted, CallID: call.ID, Title: title})
		start, asked := time.Now(), len(pr.egressAsked())
		res = tools.Safe(ctx, t, env, args)
		pr.progress(ctx, core.ProgressEvent{Kind: core.ProgressToolFinished, CallID: call.ID, Title: title, Failed: res.IsError})
		took = time.Since(start)
		if e.cfg.Meter != nil {
			label := call.Name
			if l, ok := t.(interface{ MeterLabel() string }); ok {
				label = l.MeterLabel() // one label for an unbounded family (mcp)
			}
			e.cfg.Meter.ToolCall(label, time.Since(start), res.IsError)
		}
		for _, name := range res.Load {
			m.load(name)
		}
		if note := pr.egressNote(pr.egressAsked()[asked:]); note != "" {
			res.Text = strings.TrimSpace(res.Text + "\n\n" + note)
		}
	}
	if err := context.Cause(ctx); err != nil && ctx.Err() != nil {
		return res, true, err
	}
	if effect != tools.ReadsOnly && !refused && !res.IsError {
		pr.state.Changes++ // the workspace may have changed (the movement-cycles guard)
	}
	if effect != tools.ReadsOnly && !refused {
		if note := m.measured(ctx, limits); note != "" {
			res.Text = strings.TrimSpace(res.Text + "\n\n" + note)
		}
	}
	// The event tells the call, how long it took and the head of its
	// result: "NAME ARGS in 12ms → ok: HEAD" (or "→ error: TEXT").
	detail := call.Name + " " + clipRunes(call.Arguments, 300)
	if took > 0 {
		detail += " in " + took.Round(time.Millisecond).String()
	}
	if res.IsError {
		detail += " → error: " + clipRunes(res.Text, 300)
	} else if !refused {
		detail += " → ok: " + clipRunes(strings.TrimSpace(res.Text), 160)
	}
	_ = pr.event(ctx, "tool", m.mv.Name, detail)
	return res, true, nil
}

// load adds the run's external tool name to the movement's tools and
// definitions from its next request on, when the movement does not have
// it yet and the run may call it (a tool mcp_search found, or one the
// model names directly). An unknown name is left alone: its call gets the
// unknown-tool error.
func (m *movement) load(name string) {
	if _, ok := m.tools[name]; ok || m.pr.ext == nil || name == transitionTool {
		return
	}
	t, ok := m.pr.ext.Lookup(name)
	if !ok {
		return
	}
	cat := m.pr.e.text.cat
	def := llm.ToolDef{Name: t.Name(), Description: t.Description(cat), Parameters: t.Schema(cat)}
	m.tools[name] = t
	// Before transition, which stays last.
	m.defs = append(m.defs[:len(m.defs)-1], def, m.defs[len(m.defs)-1])
	m.loaded = append(m.loaded, name)
	m.meter.addDefs(m.pr.e.defs.count([]llm.ToolDef{def}))
}

// admit asks the workspace's quota whether a call that writes may run;
// refused, res is the tool error the model gets instead. A quota that
// cannot tell (the workspace unreadable, statfs failing) lets the call
// run and is logged.
func (m *movement) admit(ctx context.Context, tool string, call workspace.Call) (res tools.Result, refused bool) {
	pr, e := m.pr, m.pr.e
	err := pr.quota.Admit(ctx, call)
	if err == nil {
		return tools.Result{}, false
	}
	var le *workspace.LimitError
	if !errors.As(err, &le) {
		pr.log.Warn("workspace limits could not be checked; the call runs", "tool", tool, "err", err)
		return tools.Result{}, false
	}
	vars := map[string]string{"tool": tool, "used": humanSize(le.Used), "max": humanSize(le.Limit)}
	key := "quota_over_cap"
	switch {
	case errors.Is(le, workspace.ErrLowSpace):
		key = "quota_low_space"
	case le.Grew:
		key = "quota_grew"
	case le.Uncounted:
		key = "quota_uncounted"
		vars["entries"], vars["depth"] = strconv.Itoa(workspace.MaxEntries), strconv.Itoa(workspace.MaxDepth)
	}
	return tools.Result{IsError: true, Text: e.text.fill(key, vars)}, true
}

// measured counts the workspace after a call that wrote and returns the
// note the model gets with the result: over the cap now, or back under
// it; "" when neither.
func (m *movement) measured(ctx context.Context, call workspace.Call) string {
	pr, e := m.pr, m.pr.e
	st, err := pr.quota.Update(ctx, call)
	if err != nil {
		pr.log.Warn("workspace size could not be counted", "err", err)
		return ""
	}
	vars := map[string]string{"used": humanSize(st.Usage.Bytes), "max": humanSize(st.MaxBytes)}
	switch {
	case st.Grew:
		return e.text.fill("quota_note_grew", vars)
	case st.Over:
		return e.text.fill("quota_note_over", vars)
	case st.Back:
		return e.text.fill("quota_note_back", vars)
	}
	return ""
}

// argPath returns the "path" argument of a call, for notes.
func argPath(args string) string {
	var a struct {
		Path string `json:"path"`
	}
	_ = json.Unmarshal([]byte(args), &a)
	return a.Path
}

// clipRunes cuts s to n runes.
func clipRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return prefixRunes(s, n) + "…"
}

// plainError says what went wrong with the model without internals, in
// the llm package's English.
func plainError(err error) string {
	var le *llm.Error
	if errors.As(err, &le) {
		return le.Error()
	}
	var se *llm.StatusError
	if errors.As(err, &se) {
		return se.Error()
	}
	return err.Error()
}

// modelFailure is the one sentence a failed model call leaves as the job's
// reason, in the engine's locale: what happened and, where a person can fix
// it, the setting to change.
func (t *texts) modelFailure(err error) string {
	var le *llm.Error
	if !errors.As(err, &le) {
		return t.fill("model_failed", map[string]string{"error": plainError(err)})
	}
	v := map[string]string{"url": le.URL, "model": le.Model, "reason": le.Reason}
	switch le.Kind {
	case llm.KindNoKey:
		return t.fill("model_no_key", v)
	case llm.KindKeyRefused:
		return t.fill("model_key_refused", v)
	case llm.KindModelNotFound:
		switch {
		case !le.Listed:
			return t.fill("model_not_found", v)
		case len(le.Models) == 0:
			return t.fill("model_not_found_none", v)
		}
		v["models"] = strings.Join(le.Models, ", ")
		if le.MoreModels > 0 {
			v["models"] = t.fill("model_list_more", map[string]string{"models": v["models"], "n": strconv.Itoa(le.MoreModels)})
		}
		return t.fill("model_not_found_list", v)
	case llm.KindUnreachable:
		return t.fill("model_unreachable", v)
	case llm.KindNotAPI:
		return t.fill("model_not_api", v)
	case llm.KindUnavailable:
		v["retries"] = strconv.Itoa(le.Retries)
		return t.fill("model_unavailable", v)
	}
	return t.fill("model_failed", map[string]string{"error": le.Error()})
}

// toolList names the movement's tools, in the order they are offered.
func (m *movement) toolList() string {
	names := make([]string, 0, len(m.defs))
	for _, d := range m.defs {
		names = append(names, d.Name)
	}
	return strings.Join(names, ", ")
}

// textCalls records what the client did with tool calls the model wrote
// as text: read as calls, arguments repaired, or a text that looks like a
// call it could not read (the model is told the format: see loop).
func (m *movement) textCalls(ctx context.Context, resp llm.Response) {
	pr, e := m.pr, m.pr.e
	tm, _ := e.cfg.Meter.(TextCallMeter)
	record := func(kind, outcome string, n int, detail string) {
		_ = pr.event(ctx, kind, m.mv.Name, detail)
		if tm != nil {
			tm.TextCalls(m.model(), outcome, n)
		}
	}
	calls := resp.Message.ToolCalls
	if resp.TextCalls > 0 {
		names := make([]string, 0, len(calls))
		for _, c := range calls {
			names = append(names, c.Name)
		}
		record("tool_calls_from_text", "recovered", resp.TextCalls,
			fmt.Sprintf("%d tool calls read from the model's text: %s", resp.TextCalls, strings.Join(names, ", ")))
	}
	if resp.RepairedCalls > 0 {
		record("tool_arguments_repaired", "repaired", resp.RepairedCalls,
			fmt.Sprintf("%d tool calls had arguments that were not valid JSON, repaired", resp.RepairedCalls))
	}
	if resp.UnreadCall && len(calls) == 0 {
		record("tool_call_unreadable", "unreadable", 1,
			"the model wrote what looks like a tool call as text, which could not be read: "+clipRunes(resp.Message.Content, 300))
	}
}

// truncated tells that the server counted reported prompt tokens for a
// request the meter counted at far more: a job event, once per movement,
// and the first time in the run a notice in the thread (Notifier), both
// naming the server's context setting.
func (m *movement) truncated(ctx context.Context, reported int) {
	pr, e := m.pr, m.pr.e
	if m.truncTold {
		return
	}
	m.truncTold = true
	text := e.text.fill("prompt_truncated", map[string]string{
		"reported": groupDigits(reported), "sent": groupDigits(m.meter.scale(m.meter.sent)), "window": strconv.Itoa(m.meter.window),
	})
	_ = pr.event(ctx, "prompt_truncated", m.mv.Name, text)
	pr.mu.Lock()
	first := !pr.truncNoticed
	pr.truncNoticed = true
	pr.mu.Unlock()
	if n, ok := e.cfg.Observer.(Notifier); ok && first {
		if err := n.Notice(ctx, pr.task.ID, text); err != nil {
			pr.log.Warn("posting the truncation notice failed", "err", err)
		}
	}
}
