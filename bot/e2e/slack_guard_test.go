package e2e_test

import (
	"strings"
	"testing"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
)

// TestSlackRepeatGuard: the scripted model calls Read with the same
// arguments again and again: the 4th result tells the model it repeats
// itself, and the job parks before running the 6th, the call named in the
// thread; the requester's `continue` lets it go on from that call.
func TestSlackRepeatGuard(t *testing.T) {
	w := newSlackWorldWith(t, stackOptions{Guards: engine.Guards{RepeatCalls: 4}, Access: chat.Access{Admins: []string{"slack:" + slackApprovalAdmin}}})
	w.slack.SetUser(slackApprovalRequester, "alice")
	var steps []llmtest.Step
	for range 10 {
		steps = append(steps, llmtest.Call("Read", `{"path":"input/same.txt"}`))
	}
	w.sys.LLM.Script(append(steps, llmtest.Transition("COMPLETE", "gave up reading"))...)
	const root = "1700000400.000100"
	w.send(slackfake.MentionEvent("EvLoop", slackApprovalRequester, "<@UBATON> read it", root, ""), "")
	w.waitPost("C1", root, "The agent called Read with the same arguments 6 times in a row")
	w.waitJob(root, core.JobWaitingHuman)
	reqs := w.sys.LLM.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d requests before the park, want 6", len(reqs))
	}
	const warning = "called Read with the same arguments 4 times in a row"
	last := func(r llmtest.Request) string { return r.Messages[len(r.Messages)-1].Text() }
	if !strings.Contains(last(reqs[4]), warning) {
		t.Errorf("the 4th result does not warn the model:\n%s", last(reqs[4]))
	}
	if strings.Contains(last(reqs[3]), "same arguments") {
		t.Errorf("the 3rd result already warns:\n%s", last(reqs[3]))
	}
	if posts := w.posts("C1", root); !strings.Contains(strings.Join(posts, "\n"), `input/same.txt`) {
		t.Errorf("the thread does not name the repeated call: %q", posts)
	}

	w.reply("EvLoopGo", slackApprovalRequester, "continue", "1700000400.000200", root)
	w.waitPost("C1", root, "gave up reading")
	w.waitJob(root, core.JobSucceeded)
	if n := len(w.sys.LLM.Requests()); n != 11 {
		t.Errorf("%d requests in all, want 11 (the 6th call run on continue, not asked again)", n)
	}
}
