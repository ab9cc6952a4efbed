package e2e_test

// Approvals, Stop and the always-allow rules on the fake Slack: the whole
// system behind an HTTP-mode adapter, the clicks sent as Slack sends them
// (signed block_actions on /slack/interactions).

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/slack/slackfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/policy"
)

// Who is who in these tests: U1 asks, UADMIN is an admin, U9 a stranger
// (allowed to use Baton, not to decide for U1).
const (
	slackApprovalRequester = "U1"
	slackApprovalAdmin     = "UADMIN"
	slackApprovalStranger  = "U9"
)

// slackApprovalCommandText is the Bash command the model calls; the rule
// asks about it.
const slackApprovalCommandText = "touch approved.txt"

// newSlackApprovalWorld is the stack with the rule [Bash `^touch ` → ask]
// behind the Slack adapter.
func newSlackApprovalWorld(t *testing.T) *slackWorld {
	t.Helper()
	w := newSlackWorldWith(t, stackOptions{
		Rules:  []policy.Rule{{Tool: "Bash", Match: regexp.MustCompile(`^touch `), Action: policy.Ask}},
		Access: chat.Access{Admins: []string{"slack:" + slackApprovalAdmin}},
	})
	w.slack.SetUser(slackApprovalRequester, "alice")
	w.slack.SetUser(slackApprovalAdmin, "root")
	w.slack.SetUser(slackApprovalStranger, "mallory")
	return w
}

// slackApprovalAsk mentions the bot in a new thread under root as U1, the
// model scripted to call Bash `touch approved.txt` and then to complete
// with summary, and returns the approval message once it is posted.
func (w *slackWorld) slackApprovalAsk(root, eventID, summary string) slackfake.Call {
	w.t.Helper()
	w.sys.LLM.Script(
		llmtest.Call("Bash", `{"command":"`+slackApprovalCommandText+`"}`),
		llmtest.Transition("COMPLETE", summary),
	)
	w.send(slackfake.MentionEvent(eventID, slackApprovalRequester, "<@UBATON> touch the file", root, ""), "")
	msg := w.slackApprovalMessage(root)
	w.waitJob(root, core.JobWaitingApproval)
	return msg
}

// slackApprovalMessage waits for the message in root's thread that
// carries Approve, Deny and Always allow, and returns it.
func (w *slackWorld) slackApprovalMessage(root string) slackfake.Call {
	w.t.Helper()
	var msg slackfake.Call
	eventually(w.t, "the approval message with its buttons", func() bool {
		for _, c := range w.slack.Recorded("chat.postMessage") {
			if c.ThreadTS == root && slackApprovalIsAsk(c) {
				msg = c
				return true
			}
		}
		return false
	})
	return msg
}

// slackApprovalIsAsk reports a message with the three approval buttons.
func slackApprovalIsAsk(c slackfake.Call) bool {
	b := c.Buttons()
	return len(b) == 3 && strings.HasPrefix(b[0].Value, "approve:") && strings.HasPrefix(b[1].Value, "deny:") && strings.HasPrefix(b[2].Value, "always:")
}

// slackApprovalAsked reports whether an approval message was posted in
// root's thread.
func (w *slackWorld) slackApprovalAsked(root string) bool {
	for _, c := range w.slack.Recorded("chat.postMessage") {
		if c.ThreadTS == root && slackApprovalIsAsk(c) {
			return true
		}
	}
	return false
}

// slackApprovalButton returns the value of msg's button whose action
// starts with verb.
func (w *slackWorld) slackApprovalButton(msg slackfake.Call, verb string) string {
	w.t.Helper()
	for _, b := range msg.Buttons() {
		if strings.HasPrefix(b.Value, verb+":") {
			return b.Value
		}
	}
	w.t.Fatalf("message %s has no %s button: %+v", msg.Posted, verb, msg.Buttons())
	return ""
}

// slackApprovalClick clicks msg's button whose action starts with verb,
// as user, signed as Slack signs it, and returns the answer's status.
func (w *slackWorld) slackApprovalClick(msg slackfake.Call, verb, user string) int {
	w.t.Helper()
	r := slackfake.Interaction(w.t, w.base, slackfake.BlockActions(w.slackApprovalButton(msg, verb), user, msg.Channel, msg.Posted, msg.ThreadTS), time.Now())
	status, _ := slackDo(w.t, r)
	return status
}

// slackApprovalEphemeral waits for a reply to user alone, in root's
// thread, saying text.
func (w *slackWorld) slackApprovalEphemeral(user, root, text string) {
	w.t.Helper()
	eventually(w.t, "a reply to "+user+" alone saying "+text, func() bool {
		for _, c := range w.slack.Recorded("chat.postEphemeral") {
			if c.User == user && c.ThreadTS == root && strings.Contains(c.Text, text) {
				return true
			}
		}
		return false
	})
}

// slackApprovalEdit waits for an edit of msg saying text, and returns it.
func (w *slackWorld) slackApprovalEdit(msg slackfake.Call, text string) slackfake.Call {
	w.t.Helper()
	var edit slackfake.Call
	eventually(w.t, "the approval message edited to say "+text, func() bool {
		for _, c := range w.slack.Recorded("chat.update") {
			if c.TS == msg.Posted && strings.Contains(c.Text, text) {
				edit = c
				return true
			}
		}
		return false
	})
	return edit
}

// slackApprovalTask returns the task of root's thread.
func (w *slackWorld) slackApprovalTask(root string) core.Task {
	w.t.Helper()
	task, err := w.sys.Store.TaskByThread(context.Background(), slackThread(root))
	if err != nil {
		w.t.Fatalf("task of thread %s: %v", root, err)
	}
	return task
}

// slackApprovalFile reports whether approved.txt is in the workspace of
// root's task, and when it was last touched.
func (w *slackWorld) slackApprovalFile(root string) (bool, time.Time) {
	w.t.Helper()
	fi, err := os.Stat(filepath.Join(w.slackApprovalTask(root).Workspace, "approved.txt"))
	if err != nil {
		return false, time.Time{}
	}
	return true, fi.ModTime()
}

// slackApprovalResults returns the results of Bash calls that the model's
// request n (from 0) carried, each answering a Bash call of that request.
func (w *slackWorld) slackApprovalResults(n int) []string {
	w.t.Helper()
	reqs := w.sys.LLM.Requests()
	if len(reqs) <= n {
		w.t.Fatalf("%d model requests, want a request %d", len(reqs), n)
	}
	bash := map[string]bool{}
	var out []string
	for _, m := range reqs[n].Messages {
		for _, c := range m.ToolCalls {
			bash[c.ID] = c.Name == "Bash"
		}
		if m.Role == "tool" && bash[m.ToolCallID] {
			out = append(out, m.Content)
		}
	}
	return out
}

// slackApprovalCommand runs `/baton text` as user in channel C1 and
// returns the answer's text.
func (w *slackWorld) slackApprovalCommand(user, text string) string {
	w.t.Helper()
	form := url.Values{"team_id": {slackfake.Team}, "channel_id": {"C1"}, "channel_name": {"general"}, "user_id": {user},
		"user_name": {user}, "command": {"/baton"}, "text": {text}, "response_url": {""}}
	status, body := slackDo(w.t, slackfake.Sign(w.t, w.base, "/slack/commands", form.Encode(), time.Now(), "application/x-www-form-urlencoded"))
	var answer struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal([]byte(body), &answer); status != http.StatusOK || err != nil {
		w.t.Fatalf("/baton %s answered %d %s: %v", text, status, body, err)
	}
	return answer.Text
}

// slackApprovalWithin polls cond until it holds, failing t after within:
// only for what the product promises to do within a time (Stop).
func slackApprovalWithin(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An approval asked in the thread: a forged click and a stranger's change
// nothing; the requester's Approve runs the command once, the model reads
// its result, the message says who approved and loses its buttons; a click
// on the finished job's buttons is answered with a note.
func TestSlackApprovalApprove(t *testing.T) {
	w := newSlackApprovalWorld(t)
	const root = "1700000000.000100"
	msg := w.slackApprovalAsk(root, "Ev1", "Touched approved.txt.")
	if msg.Channel != "C1" || !strings.Contains(msg.Text, slackApprovalCommandText) || !strings.Contains(msg.Section(), slackApprovalCommandText) {
		t.Errorf("approval message %+v; want it in C1, showing the command", msg)
	}

	// Forged: signed with another secret.
	forged := slackfake.Interaction(t, w.base, slackfake.BlockActions(w.slackApprovalButton(msg, "approve"), slackApprovalRequester, "C1", msg.Posted, root), time.Now())
	forged.Header.Set("X-Slack-Signature", "v0="+strings.Repeat("0f", 32))
	if status, _ := slackDo(t, forged); status != http.StatusUnauthorized {
		t.Errorf("forged click answered %d, want 401", status)
	}
	// A stranger: refused, to them alone.
	if status := w.slackApprovalClick(msg, "approve", slackApprovalStranger); status != http.StatusOK {
		t.Fatalf("stranger's click answered %d", status)
	}
	w.slackApprovalEphemeral(slackApprovalStranger, root, "Only the person who started this task, an admin or an approver can decide")
	if ran, _ := w.slackApprovalFile(root); ran {
		t.Fatal("the command ran after a forged and a stranger's click")
	}
	if jobs := w.jobs(root); len(jobs) != 1 || jobs[0].State != core.JobWaitingApproval {
		t.Fatalf("jobs %+v; want one, still waiting for approval", jobs)
	}
	if n := len(w.sys.LLM.Requests()); n != 1 {
		t.Fatalf("%d model requests before the decision, want 1", n)
	}

	if status := w.slackApprovalClick(msg, "approve", slackApprovalRequester); status != http.StatusOK {
		t.Fatalf("requester's click answered %d", status)
	}
	w.waitJob(root, core.JobSucceeded)
	w.waitPost("C1", root, "Touched approved.txt.")
	ran, touched := w.slackApprovalFile(root)
	if !ran {
		t.Error("approved.txt is not in the workspace: the approved command did not run")
	}
	if n := len(w.sys.LLM.Requests()); n != 2 {
		t.Errorf("%d model requests, want 2 (the call, then its result)", n)
	}
	if res := w.slackApprovalResults(1); len(res) != 1 || strings.Contains(res[0], "was not run") {
		t.Errorf("Bash results in the model's next request: %q; want the one command's result", res)
	}
	edit := w.slackApprovalEdit(msg, "approved by alice")
	if edit.Blocks == "" || len(edit.Buttons()) != 0 {
		t.Errorf("approval message edited to %+v; want its buttons removed", edit)
	}

	// Clicks on the finished job's buttons: notes, nothing changes.
	if status := w.slackApprovalClick(msg, "deny", slackApprovalRequester); status != http.StatusOK {
		t.Fatalf("late click answered %d", status)
	}
	w.slackApprovalEphemeral(slackApprovalRequester, root, "already decided")
	status := w.slackApprovalStatus(root)
	if s := w.slackApprovalClick(status, "stop", slackApprovalRequester); s != http.StatusOK {
		t.Fatalf("stop click answered %d", s)
	}
	w.slackApprovalEphemeral(slackApprovalRequester, root, "Nothing is running in this thread.")
	if jobs := w.jobs(root); len(jobs) != 1 || jobs[0].State != core.JobSucceeded {
		t.Errorf("jobs %+v after the late clicks; want the one, succeeded", jobs)
	}
	if _, again := w.slackApprovalFile(root); !again.Equal(touched) {
		t.Errorf("approved.txt touched again (%v, first %v) after the late clicks", again, touched)
	}
	if n := len(w.sys.LLM.Requests()); n != 2 {
		t.Errorf("%d model requests after the late clicks, want 2", n)
	}
}

// slackApprovalStatus waits for the job status message of root's thread
// with its Stop button, and returns it.
func (w *slackWorld) slackApprovalStatus(root string) slackfake.Call {
	w.t.Helper()
	var msg slackfake.Call
	eventually(w.t, "the status message with its Stop button", func() bool {
		for _, c := range w.slack.Recorded("chat.postMessage") {
			if b := c.Buttons(); c.ThreadTS == root && len(b) == 1 && strings.HasPrefix(b[0].Value, "stop:") {
				msg = c
				return true
			}
		}
		return false
	})
	return msg
}

// Deny: nothing runs, and the model is told who denied it.
func TestSlackApprovalDeny(t *testing.T) {
	w := newSlackApprovalWorld(t)
	const root = "1700000000.000100"
	msg := w.slackApprovalAsk(root, "Ev1", "I was not allowed to touch it.")
	if status := w.slackApprovalClick(msg, "deny", slackApprovalRequester); status != http.StatusOK {
		t.Fatalf("click answered %d", status)
	}
	w.waitJob(root, core.JobSucceeded)
	w.waitPost("C1", root, "I was not allowed to touch it.")
	if ran, _ := w.slackApprovalFile(root); ran {
		t.Error("the denied command ran")
	}
	if n := len(w.sys.LLM.Requests()); n != 2 {
		t.Errorf("%d model requests, want 2", n)
	}
	if res := w.slackApprovalResults(1); len(res) != 1 || !strings.Contains(res[0], "denied it when asked for approval") {
		t.Errorf("Bash results in the model's next request: %q; want the denial", res)
	}
	edit := w.slackApprovalEdit(msg, "denied by alice")
	if len(edit.Buttons()) != 0 {
		t.Errorf("denied approval message still has buttons: %+v", edit.Buttons())
	}
}

// Always allow: the job goes on, the same command in the same channel
// runs later without asking, `/baton policy` lists the rule, and once an
// admin revoked it (the requester may not) the command is asked about
// again.
func TestSlackApprovalAlwaysAllow(t *testing.T) {
	w := newSlackApprovalWorld(t)
	const root, root2, root3 = "1700000000.000100", "1700000000.000200", "1700000000.000300"
	msg := w.slackApprovalAsk(root, "Ev1", "Touched it.")
	if status := w.slackApprovalClick(msg, "always", slackApprovalRequester); status != http.StatusOK {
		t.Fatalf("click answered %d", status)
	}
	w.waitJob(root, core.JobSucceeded)
	if ran, _ := w.slackApprovalFile(root); !ran {
		t.Error("the command always allowed did not run")
	}
	w.slackApprovalEdit(msg, "always allowed in this channel")

	// The same command, another task in the channel: no approval asked.
	w.sys.LLM.Script(llmtest.Call("Bash", `{"command":"`+slackApprovalCommandText+`"}`), llmtest.Transition("COMPLETE", "Touched it again."))
	w.send(slackfake.MentionEvent("Ev2", slackApprovalRequester, "<@UBATON> touch it again", root2, ""), "")
	w.waitJob(root2, core.JobSucceeded)
	w.waitPost("C1", root2, "Touched it again.")
	if w.slackApprovalAsked(root2) {
		t.Error("an approval was asked for a command always allowed in the channel")
	}
	if ran, _ := w.slackApprovalFile(root2); !ran {
		t.Error("second task: the command always allowed did not run")
	}
	if res := w.slackApprovalResults(3); len(res) != 1 || strings.Contains(res[0], "was not run") {
		t.Errorf("second task: Bash results in the model's request %q; want the command's result", res)
	}

	list := w.slackApprovalCommand(slackApprovalRequester, "policy")
	m := regexp.MustCompile(`(\d+)\. Bash .*touch approved\.txt`).FindStringSubmatch(list)
	if m == nil {
		t.Fatalf("/baton policy answered %q; want the rule listed with its number", list)
	}
	if got := w.slackApprovalCommand(slackApprovalRequester, "policy revoke "+m[1]); !strings.Contains(got, "Only an admin can revoke") {
		t.Errorf("the requester's revoke answered %q; want a refusal", got)
	}
	if got := w.slackApprovalCommand(slackApprovalAdmin, "policy revoke "+m[1]); !strings.Contains(got, "Rule "+m[1]+" revoked") {
		t.Errorf("the admin's revoke answered %q", got)
	}
	if got := w.slackApprovalCommand(slackApprovalRequester, "policy"); !strings.Contains(got, "No always-allow rules") {
		t.Errorf("/baton policy after the revoke answered %q; want no rules", got)
	}

	// Revoked: the same command asks again.
	w.slackApprovalAsk(root3, "Ev3", "Touched it a third time.")
	if ran, _ := w.slackApprovalFile(root3); ran {
		t.Error("third task: the command ran though its rule was revoked")
	}
}

// The Stop button of a running job's status message ends a running Bash
// `sleep 600` within 5 s, and the thread says who stopped it.
func TestSlackApprovalStop(t *testing.T) {
	w := newSlackWorld(t)
	w.slack.SetUser(slackApprovalRequester, "alice")
	w.sys.LLM.Script(
		llmtest.Call("Bash", `{"command":"echo started > running.txt && sleep 600"}`),
		llmtest.Transition("COMPLETE", "late answer"),
	)
	const root = "1700000000.000100"
	w.send(slackfake.MentionEvent("Ev1", slackApprovalRequester, "<@UBATON> wait a while", root, ""), "")
	status := w.slackApprovalStatus(root)
	eventually(t, "the Bash command running", func() bool {
		task, err := w.sys.Store.TaskByThread(context.Background(), slackThread(root))
		if err != nil {
			return false
		}
		_, err = os.Stat(filepath.Join(task.Workspace, "running.txt"))
		return err == nil
	})
	jobs := w.jobs(root)
	if len(jobs) != 1 || jobs[0].State != core.JobRunning || w.slackApprovalButton(status, "stop") != "stop:"+strconv.FormatInt(jobs[0].ID, 10) {
		t.Fatalf("jobs %+v, status buttons %+v; want one running job, its Stop button on the status", jobs, status.Buttons())
	}

	if s := w.slackApprovalClick(status, "stop", slackApprovalRequester); s != http.StatusOK {
		t.Fatalf("stop click answered %d", s)
	}
	slackApprovalWithin(t, 5*time.Second, "the job aborted", func() bool {
		jobs := w.jobs(root)
		return len(jobs) == 1 && jobs[0].State == core.JobAborted
	})
	if jobs := w.jobs(root); jobs[0].AbortedBy != "slack:"+slackApprovalRequester {
		t.Errorf("aborted by %q, want slack:U1", jobs[0].AbortedBy)
	}
	posts := w.waitPost("C1", root, "was aborted by")
	for _, p := range posts {
		if strings.Contains(p, "was aborted by") && !strings.Contains(p, slackApprovalRequester) && !strings.Contains(p, "alice") {
			t.Errorf("the thread does not say who stopped the job: %q", p)
		}
		if strings.Contains(p, "late answer") {
			t.Errorf("the answer was posted after all: %q", p)
		}
	}
	w.slackApprovalEphemeral(slackApprovalRequester, root, "Stopping job")
	eventually(t, "the status message's Stop button removed", func() bool {
		ups := w.slack.Recorded("chat.update")
		for i := len(ups) - 1; i >= 0; i-- {
			if ups[i].TS == status.Posted {
				return strings.Contains(ups[i].Text, "was aborted by") && ups[i].Blocks != "" && len(ups[i].Buttons()) == 0
			}
		}
		return false
	})
	if n := len(w.sys.LLM.Requests()); n != 1 {
		t.Errorf("%d model requests, want the one that called Bash", n)
	}
}
