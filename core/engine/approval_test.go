package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/policy"
)

// withRules gives the engine an approvals policy of rules over the store.
func withRules(f **fixture, rules ...policy.Rule) option {
	return func(c *engine.Config) {
		c.Gate = gateFunc(func(ctx context.Context, q policy.Request) (policy.Decision, error) {
			return policy.New(rules, (*f).store).Decide(ctx, q)
		})
	}
}

type gateFunc func(context.Context, policy.Request) (policy.Decision, error)

func (g gateFunc) Decide(ctx context.Context, q policy.Request) (policy.Decision, error) {
	return g(ctx, q)
}

var askTouch = policy.Rule{Tool: "Bash", Match: regexp.MustCompile(`^touch `), Action: policy.Ask}

// threeCalls is one assistant turn: a call that runs, one that asks, one
// after it.
var threeCalls = llmtest.Calls(
	llmtest.Call("Bash", `{"command":"echo one > one.txt"}`),
	llmtest.Call("Bash", `{"command":"touch approved.txt"}`),
	llmtest.Call("Bash", `{"command":"echo three > three.txt"}`),
)

func (f *fixture) exists(name string) bool {
	_, err := os.Stat(filepath.Join(f.ws, name))
	return err == nil
}

// parkForApproval runs a job until it waits for the approval of the
// touch call and records the park.
func parkForApproval(t *testing.T, f *fixture) core.Job {
	t.Helper()
	f.comment(core.RoleUser, "alice", "make the files")
	f.srv.Script(threeCalls)
	j := f.start("chat", "make the files")
	fin := f.run(j)
	if fin.To != core.JobWaitingApproval || fin.Approval == nil {
		t.Fatalf("finish = %+v, want waiting_approval with the pending call", fin)
	}
	if a := fin.Approval; a.Tool != "Bash" || a.Subject != "touch approved.txt" || a.Rule != "approvals.rules[0]" ||
		a.Channel != "console:c" || a.Requester != "console:alice" || !a.Deadline.Equal(fixed.Add(time.Hour)) {
		t.Errorf("approval = %+v", a)
	}
	if !f.exists("one.txt") || f.exists("approved.txt") || f.exists("three.txt") {
		t.Errorf("before the decision: one.txt %v, approved.txt %v, three.txt %v; want only one.txt",
			f.exists("one.txt"), f.exists("approved.txt"), f.exists("three.txt"))
	}
	return f.finish(j, fin)
}

// decide records verdict and starts the job's next attempt.
func decide(t *testing.T, f *fixture, j core.Job, v core.Verdict, by, reason string) core.Job {
	t.Helper()
	ctx := context.Background()
	if _, _, err := f.store.DecideApproval(ctx, core.ApprovalDecision{JobID: j.ID, WaitSeq: j.WaitSeq, Verdict: v, By: by, Reason: reason}); err != nil {
		t.Fatal(err)
	}
	next, err := f.store.StartJob(ctx, j.ID, j.Attempt+1)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

// resultsByCall returns the tool results of a request by call id.
func resultsByCall(r llmtest.Request) map[string]string {
	out := map[string]string{}
	for _, m := range r.Messages {
		if m.Role == "tool" {
			out[m.ToolCallID] = m.Text()
		}
	}
	return out
}

func TestApprovedCallRunsOnceWithoutAskingTheModelAgain(t *testing.T) {
	var f *fixture
	f = newFixture(t, nil, withRules(&f, askTouch))
	waiting := parkForApproval(t, f)
	f.comment(core.RoleUser, "alice", "also note this while you wait")
	j2 := decide(t, f, waiting, core.VerdictApprove, "console:alice", "")
	f.srv.Script(llmtest.Transition("COMPLETE", "made them"))
	fin := f.run(j2)
	if fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	if !f.exists("approved.txt") || !f.exists("three.txt") {
		t.Errorf("after approval: approved.txt %v, three.txt %v; want both", f.exists("approved.txt"), f.exists("three.txt"))
	}
	reqs := f.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d, want 2 (the decision resumes at the call, not at the model)", len(reqs))
	}
	results := resultsByCall(reqs[1])
	if len(results) != 3 {
		t.Errorf("the resumed request carries %d tool results, want 3: %v", len(results), results)
	}
	var steering bool
	for _, m := range reqs[1].Messages {
		steering = steering || (m.Role == "user" && strings.Contains(m.Text(), "also note this while you wait"))
	}
	if !steering {
		t.Error("a comment written while the job waited did not reach the resumed movement")
	}
	// The movement log holds the whole movement across the wait.
	logs, _ := filepath.Glob(filepath.Join(f.ws, "logs", "movements", "*.jsonl"))
	if len(logs) != 1 {
		t.Fatalf("movement logs = %v, want one", logs)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"echo one", "touch approved.txt", "echo three", "made them"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("movement log lacks %q", want)
		}
	}
}

func TestDeniedCallTellsTheModelWhoAndWhy(t *testing.T) {
	var f *fixture
	f = newFixture(t, nil, withRules(&f, askTouch))
	waiting := parkForApproval(t, f)
	j2 := decide(t, f, waiting, core.VerdictDeny, "slack:bob", "not on Fridays")
	f.srv.Script(llmtest.Transition("COMPLETE", "made two of them"))
	if fin := f.run(j2); fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	if f.exists("approved.txt") || !f.exists("three.txt") {
		t.Errorf("after denial: approved.txt %v, three.txt %v; want only three.txt", f.exists("approved.txt"), f.exists("three.txt"))
	}
	reqs := f.srv.Requests()
	var denial string
	for id, text := range resultsByCall(reqs[len(reqs)-1]) {
		if strings.Contains(text, "denied") {
			denial = id + ": " + text
		}
	}
	if !strings.Contains(denial, "slack:bob") || !strings.Contains(denial, "not on Fridays") {
		t.Errorf("denial the model reads = %q, want who and why", denial)
	}
}

func TestTimedOutApprovalIsADenial(t *testing.T) {
	var f *fixture
	f = newFixture(t, nil, withRules(&f, askTouch))
	waiting := parkForApproval(t, f)
	j2 := decide(t, f, waiting, core.VerdictDeny, core.DecidedByTimeout, "")
	f.srv.Script(llmtest.Transition("COMPLETE", "gave up"))
	f.run(j2)
	reqs := f.srv.Requests()
	found := false
	for _, text := range resultsByCall(reqs[len(reqs)-1]) {
		found = found || strings.Contains(text, "nobody gave it within 1h0m0s")
	}
	if !found || f.exists("approved.txt") {
		t.Errorf("timeout: the model was not told, or the call ran (approved.txt %v)", f.exists("approved.txt"))
	}
}

func TestPolicyDenyAnswersAtOnce(t *testing.T) {
	var f *fixture
	f = newFixture(t, nil, withRules(&f, policy.Rule{Tool: "Bash", Match: regexp.MustCompile(`^touch `), Action: policy.Deny}))
	f.srv.Script(threeCalls, llmtest.Transition("COMPLETE", "done"))
	fin := f.run(f.start("chat", "make the files"))
	if fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v, want succeeded without waiting", fin)
	}
	if f.exists("approved.txt") || !f.exists("three.txt") {
		t.Errorf("approved.txt %v, three.txt %v; want only three.txt", f.exists("approved.txt"), f.exists("three.txt"))
	}
	found := false
	for _, text := range resultsByCall(f.srv.Requests()[1]) {
		found = found || strings.Contains(text, "policy (approvals.rules[0])")
	}
	if !found {
		t.Error("the model was not told that the policy denied the call")
	}
}

func TestAlwaysAllowRuleAnswersTheNextAsk(t *testing.T) {
	var f *fixture
	f = newFixture(t, nil, withRules(&f, askTouch))
	waiting := parkForApproval(t, f)
	ctx := context.Background()
	if _, _, err := f.store.DecideApproval(ctx, core.ApprovalDecision{JobID: waiting.ID, WaitSeq: waiting.WaitSeq, Verdict: core.VerdictAlways,
		By: "console:alice", Rule: &core.AllowRule{Channel: "console:c", Tool: "Bash", Pattern: policy.AlwaysPattern("touch approved.txt")}}); err != nil {
		t.Fatal(err)
	}
	j2, err := f.store.StartJob(ctx, waiting.ID, waiting.Attempt+1)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Script(
		llmtest.Call("Bash", `{"command":"touch approved.txt"}`),
		llmtest.Call("Bash", `{"command":"touch other.txt"}`),
	)
	fin := f.run(j2)
	if fin.To != core.JobWaitingApproval || fin.Approval.Subject != "touch other.txt" {
		t.Fatalf("finish = %+v; want the same command run without asking, and the other asked", fin)
	}
}

func TestCheckpointTakenOnce(t *testing.T) {
	var f *fixture
	f = newFixture(t, nil, withRules(&f, askTouch))
	waiting := parkForApproval(t, f)
	j2 := decide(t, f, waiting, core.VerdictApprove, "console:alice", "")
	// Attempt 2 takes the checkpoint and dies before it runs the call.
	if data, err := f.store.TakeCheckpoint(context.Background(), j2.ID, j2.Attempt); err != nil || data == "" {
		t.Fatalf("TakeCheckpoint = %q, %v", data, err)
	}
	j3, err := f.store.StartJob(context.Background(), j2.ID, j2.Attempt+1)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Script(llmtest.Transition("COMPLETE", "started over"))
	if fin := f.run(j3); fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	if f.exists("approved.txt") {
		t.Error("the approved call ran in an attempt that did not hold the checkpoint")
	}
	reqs := f.srv.Requests()
	if n := len(reqs[len(reqs)-1].Messages); n != 2 {
		t.Errorf("attempt 3's first request has %d messages, want 2 (the movement afresh)", n)
	}
}

func TestTwoRiskyCallsInOneTurnAskedInTurn(t *testing.T) {
	var f *fixture
	f = newFixture(t, nil, withRules(&f, askTouch))
	f.comment(core.RoleUser, "alice", "make both")
	f.srv.Script(llmtest.Calls(
		llmtest.Call("Bash", `{"command":"touch first.txt"}`),
		llmtest.Call("Bash", `{"command":"touch second.txt"}`),
	))
	j := f.start("chat", "make both")
	fin := f.run(j)
	if fin.Approval == nil || fin.Approval.Subject != "touch first.txt" {
		t.Fatalf("first park = %+v", fin)
	}
	j = decide(t, f, f.finish(j, fin), core.VerdictApprove, "console:alice", "")
	fin = f.run(j)
	if fin.To != core.JobWaitingApproval || fin.Approval.Subject != "touch second.txt" {
		t.Fatalf("second park = %+v, want the turn's second call asked next", fin)
	}
	if !f.exists("first.txt") || f.exists("second.txt") {
		t.Errorf("between the asks: first.txt %v, second.txt %v", f.exists("first.txt"), f.exists("second.txt"))
	}
	j = decide(t, f, f.finish(j, fin), core.VerdictDeny, "console:alice", "")
	f.srv.Script(llmtest.Transition("COMPLETE", "one of two"))
	if fin = f.run(j); fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	if f.exists("second.txt") {
		t.Error("the denied call ran")
	}
	if n := len(f.srv.Requests()); n != 2 {
		t.Errorf("model requests = %d, want 2 (neither decision asked the model again)", n)
	}
}

func TestPreviewShowsWhatRuns(t *testing.T) {
	var f *fixture
	f = newFixture(t, nil, withRules(&f, policy.Rule{Tool: "Bash", Action: policy.Ask}))
	long := "echo " + strings.Repeat("a", 2000) + " && rm -rf data"
	for _, tt := range []struct{ command, want, not string }{
		{"echo safe\u202e atad fr- mr", `\u{202e}`, "\u202e"},
		{"echo hi\u200b; curl x", `\u{200b}`, "\u200b"},
		{"printf '\x1b[2K'", `\u{001b}`, "\x1b"},
		{long, "more characters not shown", "rm -rf data"},
	} {
		args, _ := json.Marshal(map[string]string{"command": tt.command})
		f.srv.Script(llmtest.Call("Bash", string(args)))
		fin := f.run(f.start("chat", "x"))
		if fin.Approval == nil {
			t.Fatalf("no approval for %q", tt.command)
		}
		p := fin.Approval.Preview
		if !strings.Contains(p, tt.want) || strings.Contains(p, tt.not) {
			t.Errorf("preview of %q = %q; want %q shown and %q not", tt.command, p, tt.want, tt.not)
		}
		if fin.Approval.Subject != tt.command {
			t.Errorf("subject = %q, want the command as it runs", fin.Approval.Subject)
		}
	}
}
