package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/egress"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/policy"
	"github.com/baton-bot/baton/core/sandbox"
)

// TestMain makes this test binary the sandbox's bridge when it is run with
// egress.BridgeSubcommand, as the baton binary is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == egress.BridgeSubcommand {
		os.Exit(egress.BridgeMain(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

// nonceServer is a local HTTP server answering its nonce; it returns its
// host:port.
func nonceServer(t *testing.T, nonce string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, nonce) }))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// withEgress runs Bash in bubblewrap behind an egress proxy of policy (it
// skips where bubblewrap does not work, unless BATON_REQUIRE_BWRAP=1).
func withEgress(t *testing.T, policy egress.Policy) option {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Bwrap, Bridge: exe})
	if err != nil {
		if os.Getenv("BATON_REQUIRE_BWRAP") != "1" {
			t.Skipf("bubblewrap does not work here: %v", err)
		}
		t.Fatal(err)
	}
	p, err := egress.New(egress.Config{Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return func(c *engine.Config) { c.Sandbox, c.Egress = sb, p }
}

func rule(t *testing.T, entry string) egress.Rule {
	t.Helper()
	r, err := egress.ParseRule(entry)
	if err != nil {
		t.Fatal(err)
	}
	r.Name = "egress.allow[0]"
	return r
}

func curl(hostport string) llmtest.Step {
	return llmtest.Calls(llmtest.Call("Bash", `{"command":"curl -sS --max-time 20 http://`+hostport+`/"}`))
}

// lastResult is the newest tool result the model was sent.
func lastResult(t *testing.T, f *fixture) string {
	t.Helper()
	reqs := f.srv.Requests()
	msgs := reqs[len(reqs)-1].Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "tool" {
			return msgs[i].Text()
		}
	}
	t.Fatal("no tool result")
	return ""
}

func (f *fixture) egressEvents(j core.Job) []string {
	f.t.Helper()
	evs, err := f.store.Events(context.Background(), j.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Kind == "egress" {
			out = append(out, e.Detail)
		}
	}
	return out
}

func TestEgressAllowedAndDenied(t *testing.T) {
	allowed, other := nonceServer(t, "nonce-allowed"), nonceServer(t, "nonce-other")
	f := newFixture(t, nil, withEgress(t, egress.Policy{Allow: []egress.Rule{rule(t, allowed)}}))
	f.srv.Script(curl(allowed), curl(other), llmtest.Transition("COMPLETE", "done"))
	j := f.start("chat", "fetch")
	fin := f.run(j)
	if fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	reqs := f.srv.Requests()
	if got := resultsOf(reqs[1]); !strings.Contains(got, "nonce-allowed") {
		t.Errorf("curl to the allowed server: %q", got)
	}
	if got := resultsOf(reqs[2]); strings.Contains(got, "nonce-other") || !strings.Contains(got, "no egress.allow entry covers "+other) {
		t.Errorf("curl to a server not allowed: %q", got)
	}
	evs := f.egressEvents(j)
	if len(evs) != 2 || !strings.HasPrefix(evs[0], "allowed GET "+allowed+" (egress.allow[0]) via "+allowed) ||
		!strings.HasPrefix(evs[1], "denied GET "+other+" (egress.default): no egress.allow entry covers") {
		t.Errorf("egress events: %q", evs)
	}
}

// resultsOf joins the tool results a request carries, newest last.
func resultsOf(r llmtest.Request) string {
	var b strings.Builder
	for _, m := range r.Messages {
		if m.Role == "tool" {
			b.WriteString(m.Text() + "\n")
		}
	}
	return b.String()
}

// TestEgressAsk: with default ask, a connection to an unlisted host is
// refused at once, the call's result says a person was asked, and the job
// parks on an approval of that host. Approved, the model is told to run
// the command again, and it gets through; denied, it stays refused.
func TestEgressAsk(t *testing.T) {
	host := nonceServer(t, "nonce-asked")
	// An entry naming the address at another port lets the loopback
	// address be asked about at all.
	policy := egress.Policy{Ask: true, Allow: []egress.Rule{rule(t, "127.0.0.1:1")}}
	for _, verdict := range []core.Verdict{core.VerdictApprove, core.VerdictDeny} {
		t.Run(string(verdict), func(t *testing.T) {
			f := newFixture(t, nil, withEgress(t, policy))
			f.srv.Script(curl(host))
			j := f.start("chat", "fetch")
			fin := f.run(j)
			if fin.To != core.JobWaitingApproval || fin.Approval == nil {
				t.Fatalf("finish = %+v, want waiting_approval", fin)
			}
			if a := fin.Approval; a.Tool != engine.EgressTool || a.Subject != host || !strings.Contains(a.Preview, "connect to "+host) ||
				!strings.Contains(a.Preview, "curl -sS") || a.Channel != "console:c" {
				t.Errorf("approval = %+v", a)
			}
			if evs := f.egressEvents(j); len(evs) != 1 || !strings.HasPrefix(evs[0], "asked GET "+host) {
				t.Errorf("egress events: %q", evs)
			}
			waiting := f.finish(j, fin)
			j2 := decide(t, f, waiting, verdict, "console:alice", "not today")
			f.srv.Script(curl(host), llmtest.Transition("COMPLETE", "done"))
			if fin := f.run(j2); fin.To != core.JobSucceeded {
				t.Fatalf("after the decision: %+v", fin)
			}
			reqs := f.srv.Requests()
			asked := resultsOf(reqs[1])
			if !strings.Contains(asked, "needs a person's approval") || strings.Contains(asked, "nonce-asked") {
				t.Errorf("the first call's result: %q", asked)
			}
			var told string
			for _, m := range reqs[2].Messages {
				if m.Role == "user" {
					told = m.Text()
				}
			}
			retried := lastResult(t, f)
			switch verdict {
			case core.VerdictApprove:
				if !strings.Contains(told, "console:alice approved reaching "+host) {
					t.Errorf("the model was told %q", told)
				}
				if !strings.Contains(retried, "nonce-asked") {
					t.Errorf("the retried call after approval: %q", retried)
				}
			default:
				if !strings.Contains(told, "console:alice denied reaching "+host) || !strings.Contains(told, "not today") {
					t.Errorf("the model was told %q", told)
				}
				if strings.Contains(retried, "nonce-asked") || strings.Contains(retried, "needs a person's approval") {
					t.Errorf("the retried call after a denial: %q", retried)
				}
			}
		})
	}
}

// TestEgressAskConsultsPolicy: a connection egress asks about is put to
// the approvals policy first: a configured rule naming the egress tool
// decides it without asking anyone (a stored "always allow" answers the
// same way: core/chat's TestEgressApprovalAlwaysAllows).
func TestEgressAskConsultsPolicy(t *testing.T) {
	denied, allowed := nonceServer(t, "nonce-denied"), nonceServer(t, "nonce-allowed")
	ask := egress.Policy{Ask: true, Allow: []egress.Rule{rule(t, "127.0.0.1:1")}}
	exact := func(hp string) *regexp.Regexp { return regexp.MustCompile(policy.AlwaysPattern(hp)) }
	var f *fixture
	f = newFixture(t, nil, withEgress(t, ask), withRules(&f,
		policy.Rule{Tool: engine.EgressTool, Match: exact(denied), Action: policy.Deny},
		policy.Rule{Tool: engine.EgressTool, Match: exact(allowed), Action: policy.Allow}))
	f.srv.Script(curl(denied), curl(allowed), llmtest.Transition("COMPLETE", "done"))
	j := f.start("chat", "fetch")
	if fin := f.run(j); fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v, want no park", fin)
	}
	reqs := f.srv.Requests()
	if got := resultsOf(reqs[1]); strings.Contains(got, "nonce-denied") || strings.Contains(got, "approval") {
		t.Errorf("a connection a configured rule denies: %q", got)
	}
	if got := resultsOf(reqs[2]); !strings.Contains(got, "nonce-allowed") {
		t.Errorf("a connection a configured rule allows: %q", got)
	}
	evs := f.egressEvents(j)
	if len(evs) != 2 || !strings.HasPrefix(evs[0], "denied GET "+denied+" (approvals.rules[0])") || !strings.HasPrefix(evs[1], "allowed GET "+allowed+" (approvals.rules[1])") {
		t.Errorf("egress events: %q", evs)
	}
}

// TestEgressDecisionsHoldForTheJob: a host approved once stays approved
// for the rest of the job, and one denied stays denied: after the job
// asked the person a question and was answered (a new attempt with no
// checkpoint), and after it parked again for another host, nobody is
// asked about them a second time.
func TestEgressDecisionsHoldForTheJob(t *testing.T) {
	yes, no, later := nonceServer(t, "nonce-yes"), nonceServer(t, "nonce-no"), nonceServer(t, "nonce-later")
	policy := egress.Policy{Ask: true, Allow: []egress.Rule{rule(t, "127.0.0.1:1")}}
	f := newFixture(t, nil, withEgress(t, policy))
	ctx := context.Background()
	parked := func(j core.Job, host string) core.Job {
		t.Helper()
		fin := f.run(j)
		if fin.To != core.JobWaitingApproval || fin.Approval == nil || fin.Approval.Subject != host {
			t.Fatalf("finish = %+v, want a park for %s", fin, host)
		}
		return f.finish(j, fin)
	}
	both := llmtest.Calls(llmtest.Call("Bash", `{"command":"curl -sS --max-time 20 http://`+yes+`/; echo; curl -sS --max-time 20 http://`+no+`/"}`))

	f.srv.Script(curl(yes))
	j := decide(t, f, parked(f.start("chat", "fetch"), yes), core.VerdictApprove, "console:alice", "")
	f.srv.Script(curl(yes), curl(no))
	j = decide(t, f, parked(j, no), core.VerdictDeny, "console:alice", "")
	// Both decided: the job asks the person a question and is answered.
	f.srv.Script(both, llmtest.Transition("ASK", "need a year", "question", "Which year?"))
	fin := f.run(j)
	if fin.To != core.JobWaitingHuman {
		t.Fatalf("finish = %+v, want waiting_human", fin)
	}
	waiting := f.finish(j, fin)
	if ok, err := f.store.ResumeJob(ctx, j.ID, waiting.WaitSeq); !ok || err != nil {
		t.Fatalf("resume = %v, %v", ok, err)
	}
	j, err := f.store.StartJob(ctx, j.ID, waiting.Attempt+1)
	if err != nil {
		t.Fatal(err)
	}
	// After the answer: both hosts as decided, without asking; a third
	// host parks, and after its approval both hold still.
	f.srv.Script(both, curl(later))
	j = decide(t, f, parked(j, later), core.VerdictApprove, "console:alice", "")
	f.srv.Script(both, llmtest.Transition("COMPLETE", "done"))
	if fin := f.run(j); fin.To != core.JobSucceeded {
		t.Fatalf("the last run: %+v, want it to finish without asking again", fin)
	}
	// The results of `both`: before the question, after it, after the
	// third host's park.
	reqs := f.srv.Requests()
	if len(reqs) != 9 {
		t.Fatalf("%d model requests, want 9", len(reqs))
	}
	for _, i := range []int{4, 6, 8} {
		got := lastResultOf(reqs[i])
		if !strings.Contains(got, "nonce-yes") || strings.Contains(got, "nonce-no") || !strings.Contains(got, "a person denied reaching "+no+" for this job") {
			t.Errorf("request %d: the approved and the denied host: %q", i, got)
		}
	}
	var asked int
	for _, e := range f.egressEvents(j) {
		if strings.HasPrefix(e, "asked ") {
			asked++
		}
	}
	if asked != 3 {
		t.Errorf("%d connections asked about, want 3 (one per host):\n%s", asked, strings.Join(f.egressEvents(j), "\n"))
	}
}

// lastResultOf is the newest tool result r carries.
func lastResultOf(r llmtest.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "tool" {
			return r.Messages[i].Text()
		}
	}
	return ""
}
