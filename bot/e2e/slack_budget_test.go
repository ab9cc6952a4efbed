package e2e_test

// Budgets on the fake Slack: the scripted model reports large usage, the
// engine parks the job in waiting_human with the question before the
// request that would pass a budget, and a `continue` in the thread from
// those who may decide resumes it at that request.

import (
	"context"
	"strings"
	"testing"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
)

// budgetPrices make the scripted model's 10,000 prompt and 1,000
// completion tokens cost $0.045.
var budgetPrices = map[string]engine.Price{"m": {Input: 3, Output: 15}}

func newSlackBudgetWorld(t *testing.T, b engine.Budgets) *slackWorld {
	t.Helper()
	w := newSlackWorldWith(t, stackOptions{Prices: budgetPrices, Budgets: b, Access: chat.Access{Admins: []string{"slack:" + slackApprovalAdmin}}})
	w.slack.SetUser(slackApprovalRequester, "alice")
	w.slack.SetUser(slackApprovalAdmin, "root")
	w.slack.SetUser(slackApprovalStranger, "mallory")
	return w
}

// reply sends text as user in the thread under root.
func (w *slackWorld) reply(eventID, user, text, ts, root string) {
	w.t.Helper()
	w.send(slackfake.MessageEvent(eventID, user, text, ts, root), "")
}

// jobBudgetPark starts a job in a thread under root whose third request
// would pass the job budget of $0.10, and waits for its question.
func (w *slackWorld) jobBudgetPark(root string) {
	w.t.Helper()
	w.sys.LLM.Script(
		llmtest.Call("Read", `{"path":"input/a.txt"}`).WithUsage(10000, 1000),
		llmtest.Call("Read", `{"path":"input/b.txt"}`).WithUsage(10000, 1000),
		llmtest.Call("Read", `{"path":"input/c.txt"}`).WithUsage(10000, 1000),
		llmtest.Transition("COMPLETE", "all three read").WithUsage(10000, 1000),
	)
	w.send(slackfake.MentionEvent("Ev"+root, slackApprovalRequester, "<@UBATON> read the files", root, ""), "")
	w.waitPost("C1", root, "This job has used $0.09 of its $0.10 budget. Reply `continue` to allow $0.10 more")
	w.waitJob(root, core.JobWaitingHuman)
	if n := len(w.sys.LLM.Requests()); n != 2 {
		w.t.Fatalf("%d model requests before the question, want 2", n)
	}
}

// TestSlackJobBudgetContinue: the job parks with the question at the
// request that would pass its $0.10; a stranger's `continue` and a
// malformed `continue abc` are refused to their authors alone, changing
// nothing; the requester's `continue` resumes the job at that request (the
// third follows the two made, none made again) and it completes.
func TestSlackJobBudgetContinue(t *testing.T) {
	w := newSlackBudgetWorld(t, engine.Budgets{Default: engine.Limits{engine.ScopeJob: {Cost: 0.10}}})
	const root = "1700000100.000100"
	w.jobBudgetPark(root)

	w.reply("EvStranger", slackApprovalStranger, "continue", "1700000100.000200", root)
	w.slackApprovalEphemeral(slackApprovalStranger, root, "can let it continue; nothing changed")
	w.reply("EvBad", slackApprovalRequester, "continue abc", "1700000100.000300", root)
	w.slackApprovalEphemeral(slackApprovalRequester, root, "with a positive number")
	if j := w.jobs(root)[0]; j.State != core.JobWaitingHuman || len(w.sys.LLM.Requests()) != 2 {
		t.Fatalf("after the refusals: job %s, %d requests; want still waiting after 2", j.State, len(w.sys.LLM.Requests()))
	}

	w.reply("EvGo", slackApprovalRequester, "continue", "1700000100.000400", root)
	w.waitPost("C1", root, "all three read")
	w.waitJob(root, core.JobSucceeded)
	reqs := w.sys.LLM.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests in all, want 4", len(reqs))
	}
	if got, want := len(reqs[2].Messages), len(reqs[1].Messages)+2; got != want {
		t.Errorf("the resumed request holds %d messages, want %d (the second's, its answer and result: nothing redone)", got, want)
	}
	sum, err := w.sys.Store.SumUsage(context.Background(), core.UsageFilter{JobID: w.jobs(root)[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Requests != 4 || sum.Tokens() != 44000 {
		t.Errorf("recorded usage = %+v, want the 4 requests", sum)
	}
}

// TestSlackJobBudgetAbort: `!abort` ends a job waiting at its budget, and
// no further request is made.
func TestSlackJobBudgetAbort(t *testing.T) {
	w := newSlackBudgetWorld(t, engine.Budgets{Default: engine.Limits{engine.ScopeJob: {Cost: 0.10}}})
	const root = "1700000200.000100"
	w.jobBudgetPark(root)
	w.reply("EvAbort", slackApprovalRequester, "!abort", "1700000200.000200", root)
	w.waitJob(root, core.JobAborted)
	if n := len(w.sys.LLM.Requests()); n != 2 {
		t.Errorf("%d requests, want the 2 before the question", n)
	}
}

// TestSlackChannelDailyBudget: once channel C1 spent its $0.08 of the day,
// its next job waits with the message instead of starting, and starts
// after an admin's `continue`; a job in channel C2 meanwhile runs as usual.
func TestSlackChannelDailyBudget(t *testing.T) {
	w := newSlackBudgetWorld(t, engine.Budgets{Default: engine.Limits{engine.ScopeChannelDaily: {Cost: 0.08}}})
	w.sys.LLM.Script(
		llmtest.Transition("COMPLETE", "first done").WithUsage(30000, 0), // $0.09
		llmtest.Transition("COMPLETE", "other channel done").WithUsage(100, 0),
		llmtest.Transition("COMPLETE", "second done").WithUsage(100, 0),
	)
	const first, second, other = "1700000300.000100", "1700000300.000200", "1700000300.000300"
	w.send(slackfake.MentionEvent("EvFirst", slackApprovalRequester, "<@UBATON> first", first, ""), "")
	w.waitJob(first, core.JobSucceeded)

	w.send(slackfake.MentionEvent("EvSecond", slackApprovalRequester, "<@UBATON> second", second, ""), "")
	w.waitPost("C1", second, "This channel has used $0.09 of its daily $0.08 budget today")
	w.waitJob(second, core.JobWaitingHuman)
	if n := len(w.sys.LLM.Requests()); n != 1 {
		t.Fatalf("%d requests, want the first job's only: the second waits before its first", n)
	}

	w.send(slackfake.Callback("EvOther", map[string]any{"type": "app_mention", "user": slackApprovalRequester,
		"text": "<@UBATON> elsewhere", "ts": other, "channel": "C2", "event_ts": other}), "")
	w.waitPost("C2", other, "other channel done")

	w.reply("EvAdmin", slackApprovalAdmin, "continue", "1700000300.000400", second)
	w.waitPost("C1", second, "second done")
	w.waitJob(second, core.JobSucceeded)
	w.reply("EvUsage", slackApprovalRequester, "!usage today", "1700000300.000500", second)
	w.slackApprovalEphemeral(slackApprovalRequester, second, "This channel: $0.09, 2 model requests, 30100 tokens")
	w.slackApprovalEphemeral(slackApprovalRequester, second, "You (all channels): $0.09, 3 model requests, 30200 tokens")
	w.slackApprovalEphemeral(slackApprovalRequester, second, "#1 $0.09")
	for _, p := range w.posts("C2", other) {
		if strings.Contains(p, "budget") {
			t.Errorf("the other channel was told of the budget: %q", p)
		}
	}
}
