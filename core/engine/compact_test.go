package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/tokens"
)

// compactionOn turns compaction on with its default thresholds.
func compactionOn(c *engine.Config) { c.Compaction.Enabled = true }

// oneStep is a piece of one movement that reads files.
const oneStep = `
name: one-step
movements:
  - name: only
    persona: You are a test.
    instruction: Read the reports.
    tools: [Read]
    next: [COMPLETE]
    max_iterations: 30
`

// inputFile writes input/name with about n tokens of numbered lines and
// returns its path in the workspace.
func (f *fixture) inputFile(name string, n int) string {
	f.t.Helper()
	var b strings.Builder
	for i := 0; tokens.Default().Count(b.String()) < n; i++ {
		for range 20 {
			fmt.Fprintf(&b, "%s line %05d: alpha beta gamma delta epsilon zeta eta theta iota kappa\n", name, i)
			i++
		}
	}
	rel := "input/" + name
	if err := os.WriteFile(filepath.Join(f.ws, rel), []byte(b.String()), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return rel
}

// read is a scripted Read call of rel.
func read(rel string) llmtest.Step { return llmtest.Call("Read", fmt.Sprintf(`{"path":%q}`, rel)) }

// contextEvents returns the kinds of the job's context events in order.
func (f *fixture) contextEvents(jobID int64) []string {
	f.t.Helper()
	evs, err := f.store.Events(context.Background(), jobID)
	if err != nil {
		f.t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		if strings.HasPrefix(e.Kind, "context_") {
			kinds = append(kinds, e.Kind)
		}
	}
	return kinds
}

// isSummaryRequest tells the compaction's summary requests (no tools)
// from the movement's.
func isSummaryRequest(r llmtest.Request) bool { return len(r.Tools) == 0 }

// checkPairs fails when a tool message of r does not directly follow the
// assistant message that made its call (with the call's other results).
func checkPairs(t *testing.T, label string, r llmtest.Request) {
	t.Helper()
	var open map[string]bool
	for i, m := range r.Messages {
		switch m.Role {
		case "assistant":
			open = map[string]bool{}
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case "tool":
			if !open[m.ToolCallID] {
				t.Errorf("%s: message %d answers call %q, which the assistant message before it did not make", label, i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		default:
			if len(open) > 0 {
				t.Errorf("%s: message %d (%s) comes before the results of calls %v", label, i, m.Role, open)
			}
			open = nil
		}
	}
}

// TestMaskingThenCompaction walks one movement up the window with
// scripted usage (window 100,000): masking fires at 62 % once five old
// results can go, the warning at 72 %, masking and then compaction at
// 81 %; the ladder's wrap-up and forced transition are never reached.
func TestMaskingThenCompaction(t *testing.T) {
	f := newFixture(t, map[string]string{"one-step": oneStep}, compactionOn)
	var files []string
	for i := range 14 {
		files = append(files, f.inputFile(fmt.Sprintf("r%02d.txt", i+1), 400))
	}
	var steps []llmtest.Step
	for i := range 10 {
		steps = append(steps, read(files[i]).WithUsage(10000+4000*i, 50)) // up to 46k
	}
	steps = append(steps,
		read(files[10]).WithUsage(62000, 50), // before request 12: masking
		read(files[11]).WithUsage(72000, 50), // before request 13: warn
		read(files[12]).WithUsage(81000, 50), // before request 14: mask, compact
		llmtest.Text("## Goal\nRead the reports.\n## State\nr01 to r13 read.").WithUsage(30000, 300), // the summary
		read(files[13]).WithUsage(9000, 50),
		llmtest.Transition("COMPLETE", "all read").WithUsage(12000, 50),
	)
	f.srv.Script(steps...)
	j := f.start("one-step", "read the reports")
	fin := f.run(j)
	if fin.To != core.JobSucceeded || fin.ResultSummary != "all read" {
		t.Fatalf("finish = %+v", fin)
	}
	want := []string{"context_masked", "context_warn", "context_masked", "context_compacted"}
	if diff := cmp.Diff(want, f.contextEvents(j.ID)); diff != "" {
		t.Errorf("context events (-want +got):\n%s", diff)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 16 {
		t.Fatalf("%d requests, want 16 (14 reads, a summary, the transition)", len(reqs))
	}
	for i, r := range reqs {
		checkPairs(t, fmt.Sprintf("request %d", i+1), r)
		if isSummaryRequest(r) != (i == 13) {
			t.Errorf("request %d: summary request = %v", i+1, isSummaryRequest(r))
		}
	}

	// Request 12 is the first with masks: results 1–6 (all but the last
	// five), each saved whole under logs/context/.
	masked := func(r llmtest.Request) []int {
		var out []int
		n := 0
		for _, m := range r.Messages {
			if m.Role == "tool" {
				n++
				if strings.HasPrefix(m.Text(), "[Output of Read") {
					out = append(out, n)
				}
			}
		}
		return out
	}
	if got := masked(reqs[10]); len(got) != 0 {
		t.Errorf("request 11 masks results %v, want none below 60 %%", got)
	}
	if diff := cmp.Diff([]int{1, 2, 3, 4, 5, 6}, masked(reqs[11])); diff != "" {
		t.Errorf("results masked in request 12 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 2, 3, 4, 5, 6}, masked(reqs[12])); diff != "" {
		t.Errorf("request 13 changed the masks (-want +got):\n%s", diff)
	}
	var stub string
	for _, m := range reqs[11].Messages {
		if m.Role == "tool" {
			stub = m.Text()
			break
		}
	}
	if !strings.Contains(stub, `{"path":"input/r01.txt"}`) || !strings.Contains(stub, "logs/context/job") {
		t.Errorf("stub = %q, want the call's arguments and the log path", stub)
	}
	path := stub[strings.Index(stub, "logs/context/"):]
	path = path[:strings.Index(path, ";")]
	full, err := os.ReadFile(filepath.Join(f.ws, path))
	if err != nil || !strings.Contains(string(full), "r01.txt line 00000") {
		t.Errorf("full output at %s: %v, %.60q", path, err, full)
	}

	// The summary request: no tools, the sections asked for, the movement
	// flattened with its first prompt.
	sum := reqs[13]
	if sys := sum.Messages[0].Text(); !strings.Contains(sys, "## Goal") || !strings.Contains(sys, "## Transition") {
		t.Errorf("summary system prompt lacks its sections:\n%s", sys)
	}
	if u := sum.Messages[1].Text(); !strings.Contains(u, "read the reports") || !strings.Contains(u, `→ call Read {"path":"input/r13.txt"}`) {
		t.Errorf("flattened movement lacks the request or the last call")
	}

	// The request after compaction: system, first user prompt, the summary
	// with the transcript's path, the last three calls with their results.
	after := reqs[14]
	var shape []string
	for _, m := range after.Messages {
		s := m.Role
		switch m.Role {
		case "assistant":
			for _, c := range m.ToolCalls {
				s += " " + c.Name + " " + c.Arguments
			}
		case "tool":
			s += " " + strings.SplitN(m.Text(), "\n", 2)[0]
		}
		shape = append(shape, s)
	}
	golden(t, "compacted_request_shape.txt", strings.Join(shape, "\n")+"\n")
	if after.Messages[0].Text() != reqs[0].Messages[0].Text() || after.Messages[1].Text() != reqs[0].Messages[1].Text() {
		t.Errorf("the system prompt or the first user prompt changed with compaction")
	}
	summary := after.Messages[2].Text()
	golden(t, "compacted_summary_en.txt", summary+"\n")
	transcript := summary[strings.Index(summary, "logs/movements/"):]
	transcript = transcript[:strings.Index(transcript, ".jsonl")+len(".jsonl")]
	if b, err := os.ReadFile(filepath.Join(f.ws, transcript)); err != nil || !strings.Contains(string(b), "input/r01.txt") {
		t.Errorf("transcript %s: %v", transcript, err)
	}
}

// TestCompactionAtMostTwice: a movement that fills up again after two
// compactions meets the ladder: wrap-up at 85 %, forced at 95 %.
func TestCompactionAtMostTwice(t *testing.T) {
	f := newFixture(t, map[string]string{"one-step": oneStep}, compactionOn)
	summary := llmtest.Text("## Goal\nx").WithUsage(5000, 100)
	f.srv.Script(
		read("input/a").WithUsage(85000, 50),
		summary,
		read("input/b").WithUsage(86000, 50),
		summary,
		read("input/c").WithUsage(87000, 50),
		read("input/d").WithUsage(96000, 50),
	)
	j := f.start("one-step", "x")
	fin := f.run(j)
	if fin.To != core.JobFailed || !strings.Contains(fin.Error, "96% full") {
		t.Fatalf("finish = %+v, want forced at 96%% (to ABORT: no default next)", fin)
	}
	want := []string{"context_compacted", "context_compacted", "context_warn", "context_prompt", "context_force_transition"}
	if diff := cmp.Diff(want, f.contextEvents(j.ID)); diff != "" {
		t.Errorf("context events (-want +got):\n%s", diff)
	}
	n := 0
	for _, r := range f.srv.Requests() {
		if isSummaryRequest(r) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d summary requests, want 2", n)
	}
}

// TestCompactionThatCannotHelp: when the last three results alone fill
// more than half the window, compaction hands over to the wrap-up prompt
// at once instead of summarising again and again.
func TestCompactionThatCannotHelp(t *testing.T) {
	f := newFixture(t, map[string]string{"one-step": oneStep}, compactionOn, func(c *engine.Config) { c.ToolResultMaxTokens = 100000 })
	small := f.inputFile("small.txt", 300)
	big := []string{f.inputFile("big1.txt", 28000), f.inputFile("big2.txt", 24000), f.inputFile("big3.txt", 20000)}
	// No usage is reported: the meter counts every request itself.
	f.srv.Script(
		read(small), read(big[0]), read(big[1]), read(big[2]),
		llmtest.Text("## Goal\nRead the reports."),
		llmtest.Transition("COMPLETE", "wrapped up"),
	)
	j := f.start("one-step", "x")
	fin := f.run(j)
	if fin.To != core.JobSucceeded || fin.ResultSummary != "wrapped up" {
		t.Fatalf("finish = %+v", fin)
	}
	want := []string{"context_compacted", "context_warn", "context_prompt"}
	if diff := cmp.Diff(want, f.contextEvents(j.ID)); diff != "" {
		t.Errorf("context events (-want +got):\n%s", diff)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 6 || !isSummaryRequest(reqs[4]) {
		t.Fatalf("%d requests, want 6 with the fifth a summary", len(reqs))
	}
	last := reqs[5]
	checkPairs(t, "request 6", last)
	if m := last.Messages[len(last.Messages)-1]; m.Role != "user" || !strings.Contains(m.Text(), "Wrap up your work now") {
		t.Errorf("last message = %s %.80q, want the wrap-up prompt", m.Role, m.Text())
	}
	tools := 0
	for _, m := range last.Messages {
		if m.Role == "tool" {
			tools++
		}
	}
	if tools != 3 {
		t.Errorf("%d tool results kept, want the last 3", tools)
	}
}

// TestSummaryOverflowRetried: a summary request the server refuses as too
// long (400 context_length_exceeded) is sent again without the oldest
// events.
func TestSummaryOverflowRetried(t *testing.T) {
	f := newFixture(t, map[string]string{"one-step": oneStep}, compactionOn)
	var steps []llmtest.Step
	for i := range 8 {
		steps = append(steps, read(f.inputFile(fmt.Sprintf("f%d.txt", i), 250)).WithUsage(20000, 50))
	}
	steps[7] = steps[7].WithUsage(82000, 50)
	steps = append(steps,
		llmtest.Status(400).WithBody(`{"error":{"message":"This model's maximum context length is 100000 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`),
		llmtest.Text("## Goal\nx").WithUsage(40000, 100),
		llmtest.Transition("COMPLETE", "done"),
	)
	f.srv.Script(steps...)
	j := f.start("one-step", "x")
	if fin := f.run(j); fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 11 || !isSummaryRequest(reqs[8]) || !isSummaryRequest(reqs[9]) {
		t.Fatalf("%d requests, want 11 with the 9th and 10th summaries", len(reqs))
	}
	calls := func(r llmtest.Request) int { return strings.Count(r.Messages[1].Text(), "→ call Read") }
	first, second := calls(reqs[8]), calls(reqs[9])
	if first != 8 || second >= first || second == 0 {
		t.Errorf("calls in the summary requests: %d then %d, want 8 then fewer", first, second)
	}
	if !strings.Contains(reqs[9].Messages[0].Text(), "events were left out") {
		t.Errorf("the retried summary request does not say events were left out")
	}
	if !strings.Contains(reqs[9].Messages[1].Text(), "x") {
		t.Errorf("the retried summary request lost the task")
	}
	if diff := cmp.Diff([]string{"context_masked", "context_compacted"}, f.contextEvents(j.ID)); diff != "" {
		t.Errorf("context events (-want +got):\n%s", diff)
	}
}

// TestCompactionOffIsTheNote: with compaction off the same script meets
// the note's ladder and nothing is masked or summarised.
func TestCompactionOffIsTheNote(t *testing.T) {
	f := newFixture(t, map[string]string{"one-step": oneStep})
	var steps []llmtest.Step
	for i := range 7 {
		steps = append(steps, read(f.inputFile(fmt.Sprintf("f%d.txt", i), 250)).WithUsage(62000+5500*i, 50))
	}
	f.srv.Script(steps...)
	j := f.start("one-step", "x")
	if fin := f.run(j); fin.To != core.JobFailed || !strings.Contains(fin.Error, "full") {
		t.Fatalf("finish = %+v, want forced", fin)
	}
	want := []string{"context_warn", "context_prompt", "context_force_transition"}
	if diff := cmp.Diff(want, f.contextEvents(j.ID)); diff != "" {
		t.Errorf("context events (-want +got):\n%s", diff)
	}
	for i, r := range f.srv.Requests() {
		if isSummaryRequest(r) {
			t.Errorf("request %d is a summary request", i+1)
		}
		for _, m := range r.Messages {
			if strings.HasPrefix(m.Text(), "[Output of") {
				t.Errorf("request %d has a masked result", i+1)
			}
		}
	}
}

// TestCompactionKeepsPeoplesMessages: a person's message that arrived
// during the movement survives compaction, between the first prompt and
// the summary.
func TestCompactionKeepsPeoplesMessages(t *testing.T) {
	f := newFixture(t, map[string]string{"one-step": oneStep}, compactionOn)
	f.srv.Script(read("input/a").WithUsage(10000, 50))
	n := 0
	f.srv.Handle(func(req llmtest.Request) llmtest.Step {
		n++
		switch n {
		case 1:
			f.comment(core.RoleUser, "bob", "please also check the cache settings")
			return read("input/b").WithUsage(85000, 50)
		case 2:
			return llmtest.Text("## Goal\nx")
		default:
			return llmtest.Transition("COMPLETE", "done")
		}
	})
	j := f.start("one-step", "x")
	if fin := f.run(j); fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 4 || !isSummaryRequest(reqs[2]) {
		t.Fatalf("%d requests, want 4 with the third a summary", len(reqs))
	}
	var roles []string
	for _, m := range reqs[3].Messages {
		roles = append(roles, m.Role)
	}
	want := []string{"system", "user", "user", "user", "assistant", "tool", "assistant", "tool"}
	if diff := cmp.Diff(want, roles); diff != "" {
		t.Fatalf("roles after compaction (-want +got):\n%s", diff)
	}
	if m := reqs[3].Messages[2].Text(); !strings.Contains(m, "bob") || !strings.Contains(m, "cache settings") {
		t.Errorf("third message = %q, want bob's message", m)
	}
	if !strings.Contains(reqs[3].Messages[3].Text(), "compacted") {
		t.Errorf("fourth message is not the summary")
	}
	checkPairs(t, "request 4", reqs[3])
}

// TestWorkspaceFoldersMadeForTools: a job that calls no tool leaves its
// workspace without input/ and output/; the first tool call makes them.
func TestWorkspaceFoldersMadeForTools(t *testing.T) {
	f := newFixture(t, map[string]string{"one-step": oneStep})
	for _, sub := range []string{"input", "output"} {
		if err := os.Remove(filepath.Join(f.ws, sub)); err != nil {
			t.Fatal(err)
		}
	}
	f.srv.Script(llmtest.Transition("COMPLETE", "nothing to read"))
	if fin := f.run(f.start("one-step", "x")); fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "output")); !os.IsNotExist(err) {
		t.Errorf("output/ after a job without tools: %v, want none", err)
	}
	f.srv.Script(read("input/none"), llmtest.Transition("COMPLETE", "read"))
	if fin := f.run(f.start("one-step", "y")); fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	for _, sub := range []string{"input", "output"} {
		if fi, err := os.Stat(filepath.Join(f.ws, sub)); err != nil || !fi.IsDir() {
			t.Errorf("%s/ after a tool call: %v", sub, err)
		}
	}
}
