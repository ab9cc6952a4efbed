package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/workspace"
)

// Compaction keeps a movement going when its context fills up, beyond the
// design note (whose ladder only warns, asks for a wrap-up and forces the
// transition). Two steps, cheapest first, both before the ladder:
//
//   - Masking, from Compaction.Mask: tool results older than the last
//     KeepResults are replaced by a one-line stub naming the call, its size
//     and the file under logs/ that keeps the full output. It waits until
//     KeepResults results can be masked at once, so the request's prefix
//     changes seldom and the provider's prompt cache keeps working.
//   - Compaction, from Compaction.Compact, at most MaxPerMovement times: a
//     request without tools asks the model for a handoff summary of the
//     movement so far, in fixed sections; the movement then continues from
//     its system prompt, its first user prompt, the people's messages that
//     arrived since, the summary and the last KeepPairs tool calls with
//     their results. When that does not bring usage under Target, the
//     ladder's wrap-up prompt follows at once instead of another round.

// msgKind tells masking and compaction what a message of a movement is.
type msgKind uint8

const (
	kindOther  msgKind = iota // prompts, the model's messages, Baton's notes
	kindHuman                 // a person's message that arrived during the movement
	kindResult                // a tool result
)

// msgMeta describes the message at the same index of movement.msgs.
type msgMeta struct {
	kind   msgKind
	masked bool
	seq    int // tool results: their number in the movement, naming their log file
}

// maskMinTokens is the smallest tool result worth masking: below it the
// stub saves next to nothing.
const maskMinTokens = 200

// mask replaces old tool results with stubs when the window is filling up.
func (m *movement) mask(ctx context.Context) {
	pr, e := m.pr, m.pr.e
	c := e.cfg.Compaction
	ratio := m.meter.ratio()
	if ratio < c.Mask {
		return
	}
	var results []int
	for i, md := range m.meta {
		if md.kind == kindResult {
			results = append(results, i)
		}
	}
	if len(results) <= c.KeepResults {
		return
	}
	var batch []int
	for _, i := range results[:len(results)-c.KeepResults] {
		if !m.meta[i].masked && m.meter.counts[i] >= maskMinTokens {
			batch = append(batch, i)
		}
	}
	// A batch at a time keeps the prefix stable; near compaction anything
	// that helps is masked.
	if len(batch) == 0 || (len(batch) < c.KeepResults && ratio < c.Compact) {
		return
	}
	calls := map[string]llm.ToolCall{}
	for _, msg := range m.msgs {
		for _, call := range msg.ToolCalls {
			calls[call.ID] = call
		}
	}
	before, masked := m.meter.used(), 0
	for _, i := range batch {
		if m.maskOne(i, calls[m.msgs[i].ToolCallID]) {
			masked++
		}
	}
	if masked == 0 {
		return
	}
	after := m.meter.used()
	if e.cfg.Meter != nil {
		e.cfg.Meter.ContextLevel("masked")
	}
	_ = pr.event(ctx, "context_masked", m.mv.Name, fmt.Sprintf("%d tool results masked: %s → %s of %d tokens",
		masked, pct(before, m.meter.window), pct(after, m.meter.window), m.meter.window))
}

// maskOne saves tool result i under logs/context/ and replaces it with a
// stub; it reports false (and leaves the result) when the file cannot be
// written, as the stub would point nowhere.
func (m *movement) maskOne(i int, call llm.ToolCall) bool {
	pr, e := m.pr, m.pr.e
	msg := m.msgs[i]
	rel := path.Join(workspace.Logs, "context", fmt.Sprintf("job%d-%02d-r%03d.txt", pr.job.ID, pr.job.MovementCount+1, m.meta[i].seq))
	if err := pr.ws.WriteLog(rel, []byte(msg.Content)); err != nil {
		pr.log.Warn("masking a tool result", "err", err)
		return false
	}
	name := call.Name
	if name == "" {
		name = msg.Name
	}
	stub := llm.Message{Role: llm.RoleTool, ToolCallID: msg.ToolCallID, Name: msg.Name, Content: e.text.fill("masked", map[string]string{
		"tool": name, "args": clipRunes(call.Arguments, 200), "tokens": strconv.Itoa(m.meter.scale(m.meter.counts[i])),
		"bytes": strconv.Itoa(len(msg.Content)), "path": rel,
	})}
	m.msgs[i] = stub
	m.meter.replaced(i, stub)
	m.meta[i].masked = true
	return true
}

// compact summarises the movement and continues it from the summary. It
// returns an error only for what ends the job's attempt (the context
// ended, the token budget spent); a summary that cannot be had stops
// compaction for the movement and leaves the ladder to act.
func (m *movement) compact(ctx context.Context) error {
	pr, e := m.pr, m.pr.e
	c := e.cfg.Compaction
	m.compactions++
	n := m.compactions
	before := m.meter.used()
	transcript := pr.writeLog(m.mv.Name, fmt.Sprintf("job%d-%02d-%s-part%d.jsonl", pr.job.ID, pr.job.MovementCount+1, m.mv.Name, n), m.msgs)
	summary, dropped, err := m.summarise(ctx)
	if err != nil {
		var fe *failure
		if ctx.Err() != nil || errors.As(err, &fe) {
			return err
		}
		m.compactOff = true
		_ = pr.event(ctx, "context_compaction_failed", m.mv.Name, plainError(err))
		return nil
	}

	var b rebuilt
	b.keep(m, 0)
	b.keep(m, 1)
	for i := 2; i < len(m.msgs); i++ {
		if m.meta[i].kind == kindHuman {
			b.keep(m, i)
		}
	}
	compacted := llm.Message{Role: llm.RoleUser, Content: e.text.fill("compacted", map[string]string{
		"n": strconv.Itoa(n), "path": transcript, "summary": summary,
	})}
	b.add(compacted, msgMeta{kind: kindOther})
	m.record = append(m.record, compacted)
	m.lastPairs(&b, c.KeepPairs)
	m.msgs, m.meta = b.msgs, b.meta
	m.meter.restart(b.msgs, b.counts)
	after := m.meter.used()

	pr.mu.Lock()
	pr.compactions = n
	pr.mu.Unlock()
	if e.cfg.Meter != nil {
		e.cfg.Meter.ContextLevel("compacted")
	}
	detail := fmt.Sprintf("compaction %d of at most %d: %s → %s of %d tokens; transcript %s", n, c.MaxPerMovement,
		pct(before, m.meter.window), pct(after, m.meter.window), m.meter.window, transcript)
	if dropped > 0 {
		detail += fmt.Sprintf("; the summary left out the %d oldest events", dropped)
	}
	_ = pr.event(ctx, "context_compacted", m.mv.Name, detail)
	pr.observe(ctx)
	if m.meter.ratio() > c.Target {
		// Another round would summarise the same large results again:
		// ask for the wrap-up instead.
		m.compactOff = true
		for l := levelWarn; l <= levelPrompt; l++ {
			if !m.meter.fired[l] {
				m.meter.fired[l] = true
				m.reached(ctx, l, m.meter.ratio())
			}
		}
	}
	return nil
}

// rebuilt is a movement's conversation as compaction rebuilds it, with
// the meter's counts of the messages kept as they were (-1: count anew).
type rebuilt struct {
	msgs   []llm.Message
	meta   []msgMeta
	counts []int
}

// keep appends message i of m unchanged.
func (b *rebuilt) keep(m *movement, i int) {
	b.msgs, b.meta, b.counts = append(b.msgs, m.msgs[i]), append(b.meta, m.meta[i]), append(b.counts, m.meter.counts[i])
}

// add appends a new or changed message.
func (b *rebuilt) add(msg llm.Message, md msgMeta) {
	b.msgs, b.meta, b.counts = append(b.msgs, msg), append(b.meta, md), append(b.counts, -1)
}

// lastPairs appends to b the last k tool results with the calls that made
// them: each assistant message cut to the calls kept, followed by their
// results. A result whose call cannot be found is left out, never sent
// alone.
func (m *movement) lastPairs(b *rebuilt, k int) {
	keep := map[int][]int{} // assistant index → result indices, oldest first
	var order []int         // assistant indices, newest first
	found := 0
	for i := len(m.msgs) - 1; i >= 2 && found < k; i-- {
		if m.meta[i].kind != kindResult {
			continue
		}
		a := m.callerOf(i)
		if a < 0 {
			continue
		}
		if _, ok := keep[a]; !ok {
			order = append(order, a)
		}
		keep[a] = append([]int{i}, keep[a]...)
		found++
	}
	for j := len(order) - 1; j >= 0; j-- {
		a := order[j]
		if len(keep[a]) == len(m.msgs[a].ToolCalls) {
			b.keep(m, a)
		} else {
			ids := map[string]bool{}
			for _, r := range keep[a] {
				ids[m.msgs[r].ToolCallID] = true
			}
			am := m.msgs[a]
			am.ToolCalls = nil
			for _, call := range m.msgs[a].ToolCalls {
				if ids[call.ID] {
					am.ToolCalls = append(am.ToolCalls, call)
				}
			}
			b.add(am, m.meta[a])
		}
		for _, r := range keep[a] {
			b.keep(m, r)
		}
	}
}

// callerOf returns the index of the assistant message whose call tool
// result i answers, or -1.
func (m *movement) callerOf(i int) int {
	id := m.msgs[i].ToolCallID
	for a := i - 1; a >= 0; a-- {
		if m.msgs[a].Role != llm.RoleAssistant {
			continue
		}
		for _, call := range m.msgs[a].ToolCalls {
			if call.ID == id {
				return a
			}
		}
	}
	return -1
}

// summaryTries bounds the summary requests of one compaction.
const summaryTries = 6

// summarise asks the model for the handoff summary over a flattened copy
// of the movement. The system prompt and the first user prompt are always
// in it; when the copy does not fit the window (by the meter's estimate,
// or by the server's refusal), the oldest events are left out and the
// request retried. It returns the summary and how many events were left
// out.
func (m *movement) summarise(ctx context.Context) (string, int, error) {
	pr, e := m.pr, m.pr.e
	units := m.units()
	skip := 0
	budget := m.meter.window - e.cfg.MaxOutputTokens - m.meter.window/20
	for try := 1; ; try++ {
		dropped := 0
		for _, u := range units[:skip] {
			dropped += len(u)
		}
		system, err := execute(e.text.compact, map[string]any{"Piece": pr.piece.Name, "Movement": m.mv.Name, "Next": m.next, "Dropped": dropped})
		if err != nil {
			return "", 0, err
		}
		est := m.meter.counter.Count(system) + m.meter.counts[0] + m.meter.counts[1]
		for _, u := range units[skip:] {
			for _, i := range u {
				est += m.meter.counts[i]
			}
		}
		if m.meter.scale(est) > budget && skip < len(units) {
			skip += max(1, (len(units)-skip)/4)
			continue
		}
		req := llm.Request{Model: m.model(), MaxTokens: e.cfg.MaxOutputTokens, Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: system},
			{Role: llm.RoleUser, Content: m.flatten(units[skip:]) + "\n\n" + e.text.msg("transcript_request")},
		}}
		m.pr.step(ctx, Step{Kind: StepThinking})
		start := time.Now()
		resp, err := m.complete(ctx, req, core.Attr{Key: "baton.compaction", Value: true})
		if e.cfg.Meter != nil {
			e.cfg.Meter.LLMCall(req.Model, time.Since(start), resp.Usage, err)
		}
		if err != nil {
			if llm.IsContextOverflow(err) && skip < len(units) && try < summaryTries {
				skip += max(1, (len(units)-skip)/4)
				continue
			}
			return "", 0, err
		}
		if err := pr.addUsage(ctx, m.mv.Name, resp.Usage, m.meter.scale(est)); err != nil {
			return "", 0, err
		}
		summary := strings.TrimSpace(resp.Message.Content)
		if summary == "" {
			return "", 0, errors.New("the model returned an empty summary")
		}
		return summary, dropped, nil
	}
}

// units groups the movement's messages after the first two into events
// that are left out together: a model message with the results of its
// calls, or a message on its own.
func (m *movement) units() [][]int {
	var out [][]int
	for i := 2; i < len(m.msgs); i++ {
		if m.meta[i].kind == kindResult && len(out) > 0 {
			out[len(out)-1] = append(out[len(out)-1], i)
			continue
		}
		out = append(out, []int{i})
	}
	return out
}

// flatten renders the first two messages and units as plain text for the
// summary request.
func (m *movement) flatten(units [][]int) string {
	var b strings.Builder
	write := func(i int) {
		msg := m.msgs[i]
		head := msg.Role
		if msg.Role == llm.RoleTool {
			head = m.pr.e.text.fill("transcript_result", map[string]string{"name": msg.Name})
		}
		b.WriteString("### " + head + "\n")
		if msg.Content != "" {
			b.WriteString(msg.Content + "\n")
		}
		for _, p := range msg.Parts {
			if p.Type == llm.PartImage {
				fmt.Fprintf(&b, "[image %s, %d bytes]\n", p.ImageMIME, len(p.ImageData))
			} else {
				b.WriteString(p.Text + "\n")
			}
		}
		for _, call := range msg.ToolCalls {
			b.WriteString("→ " + m.pr.e.text.fill("transcript_call", map[string]string{"name": call.Name, "args": call.Arguments}) + "\n")
		}
		b.WriteString("\n")
	}
	write(0)
	write(1)
	for _, u := range units {
		for _, i := range u {
			write(i)
		}
	}
	return strings.TrimSpace(b.String())
}

// pct formats used/window as a whole percentage.
func pct(used, window int) string {
	return strconv.Itoa(int(float64(used)/float64(window)*100)) + "%"
}
