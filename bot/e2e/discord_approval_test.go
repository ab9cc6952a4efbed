package e2e_test

// Approvals on Discord, the whole stack: a Bash call the policy asks about
// parks the job and posts a message with Approve, Deny and Always allow
// buttons in the task's thread; a click goes through the adapter to the
// conversation service, which decides (or refuses, to the clicker alone)
// and edits the message to say who decided, its buttons gone. The Stop
// button of a running job's status message ends it.

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/adapters/discord/discordfake"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/policy"
)

// Who clicks: the requester (the author of the mention), someone else, and
// an admin.
const (
	discordApprovalRequester = "42"
	discordApprovalStranger  = "43"
	discordApprovalAdmin     = "99"
)

// discordApprovalCommand is the call the policy asks about.
const discordApprovalCommand = "touch approved.txt"

// discordApprovalStart starts the stack on a fake Discord with the rule
// Bash `^touch ` → ask, and discordApprovalAdmin an admin.
func discordApprovalStart(t *testing.T) *discordWorld {
	t.Helper()
	return startDiscordWorldWith(t, stackOptions{
		Rules:  []policy.Rule{{Tool: "Bash", Match: regexp.MustCompile(`^touch `), Action: policy.Ask}},
		Access: chat.Access{Admins: []string{"discord:" + discordApprovalAdmin}},
	})
}

// discordApprovalScript scripts one job's model: Bash command, then
// COMPLETE.
func discordApprovalScript(w *discordWorld, command string) {
	w.sys.LLM.Script(llmtest.Call("Bash", `{"command":"`+command+`"}`), llmtest.Transition("COMPLETE", "done"))
}

// discordApprovalAsk mentions the bot in the text channel as the
// requester, its model scripted to touch approved.txt, and returns the
// task's thread and the approval message once it is posted.
func discordApprovalAsk(w *discordWorld) (thread string, msg discordfake.Message) {
	w.t.Helper()
	discordApprovalScript(w, discordApprovalCommand)
	thread = w.say(discordfake.Text, discordfake.Guild, discordApprovalRequester, "<@"+discordfake.Bot+"> create the file", true)
	eventually(w.t, "the approval message", func() bool {
		msg, _ = discordApprovalMessage(w, thread)
		return msg.ID != ""
	})
	return thread, msg
}

// discordApprovalMessage returns the approval message of thread (the post
// with an Approve button) as it stands, if there is one.
func discordApprovalMessage(w *discordWorld, thread string) (discordfake.Message, bool) {
	for _, p := range w.f.Posts() {
		if p.Channel == thread && slices.ContainsFunc(p.Buttons(), func(b discordfake.Button) bool { return strings.HasPrefix(b.CustomID, "approve:") }) {
			return w.f.Current(p.ID)
		}
	}
	return discordfake.Message{}, false
}

// discordApprovalButton returns the custom_id of msg's button whose action
// starts with verb.
func discordApprovalButton(t testing.TB, msg discordfake.Message, verb string) string {
	t.Helper()
	for _, b := range msg.Buttons() {
		if strings.HasPrefix(b.CustomID, verb+":") {
			return b.CustomID
		}
	}
	t.Fatalf("message %s has no %s button: %+v", msg.ID, verb, msg.Buttons())
	return ""
}

// discordApprovalClick clicks the button of msg named by verb as user, in
// thread, and returns the interaction's id.
func discordApprovalClick(w *discordWorld, thread string, msg discordfake.Message, verb, user string) string {
	w.t.Helper()
	return w.f.Click(discordfake.Click{CustomID: discordApprovalButton(w.t, msg, verb), User: user, Name: "user" + user,
		Roles: []string{"55"}, Channel: thread, Guild: discordfake.Guild, Message: msg.ID})
}

// discordApprovalFollowup waits for the follow-up of interaction id and
// returns it.
func discordApprovalFollowup(w *discordWorld, id string) discordfake.Followup {
	w.t.Helper()
	var fu discordfake.Followup
	eventually(w.t, "the follow-up of "+id, func() bool {
		i := slices.IndexFunc(w.f.Followups(), func(f discordfake.Followup) bool { return f.Interaction == id })
		if i >= 0 {
			fu = w.f.Followups()[i]
		}
		return i >= 0
	})
	return fu
}

// discordApprovalFollowups returns the follow-ups of interaction id.
func discordApprovalFollowups(w *discordWorld, id string) []discordfake.Followup {
	var out []discordfake.Followup
	for _, f := range w.f.Followups() {
		if f.Interaction == id {
			out = append(out, f)
		}
	}
	return out
}

// discordApprovalTask returns the task of thread.
func discordApprovalTask(w *discordWorld, thread string) core.Task {
	w.t.Helper()
	task, err := w.sys.Store.TaskByThread(context.Background(), core.ThreadRef{Platform: core.PlatformDiscord, Team: discordfake.Guild, Channel: discordfake.Text, Thread: thread})
	if err != nil {
		w.t.Fatalf("no task for thread %s: %v", thread, err)
	}
	return task
}

// discordApprovalJob waits for the only job of thread to be in state, and
// returns it.
func discordApprovalJob(w *discordWorld, thread string, state core.JobState) core.Job {
	w.t.Helper()
	var j core.Job
	eventually(w.t, "the job "+string(state), func() bool {
		jobs := w.jobs(thread)
		if len(jobs) != 1 {
			return false
		}
		j = jobs[0]
		return j.State == state
	})
	return j
}

// discordApprovalFile reports whether approved.txt is in thread's
// workspace.
func discordApprovalFile(w *discordWorld, thread string) bool {
	w.t.Helper()
	_, err := os.Stat(filepath.Join(discordApprovalTask(w, thread).Workspace, "approved.txt"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		w.t.Fatal(err)
	}
	return err == nil
}

// discordApprovalRunning reports whether a Bash command runs in thread's
// workspace: its output's copy is kept under logs/bash while it runs.
func discordApprovalRunning(w *discordWorld, thread string) bool {
	w.t.Helper()
	logs, err := os.ReadDir(filepath.Join(discordApprovalTask(w, thread).Workspace, "logs", "bash"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		w.t.Fatal(err)
	}
	return len(logs) > 0
}

// discordApprovalToolResults returns the texts of the tool results the
// model was sent, request by request: a call that ran once has its result
// in the request after it, and in no other as a new one.
func discordApprovalToolResults(w *discordWorld) [][]string {
	var out [][]string
	for _, req := range w.sys.LLM.Requests() {
		var results []string
		for _, m := range req.Messages {
			if m.Role == "tool" {
				results = append(results, m.Text())
			}
		}
		out = append(out, results)
	}
	return out
}

// discordApprovalRanOnce checks that the model saw the command run once:
// two requests (the call, then the transition after it), the second with
// the one tool result, exit code 0; and the file is there.
func discordApprovalRanOnce(w *discordWorld, thread string) {
	w.t.Helper()
	results := discordApprovalToolResults(w)
	if len(results) != 2 || len(results[0]) != 0 || len(results[1]) != 1 || !strings.Contains(results[1][0], "[exit code 0]") {
		w.t.Errorf("tool results by model request = %q, want two requests, the second with the command's exit code 0", results)
	}
	if !discordApprovalFile(w, thread) {
		w.t.Errorf("approved.txt is not in the workspace")
	}
}

// The approval message, a stranger refused, the requester's Approve (the
// call runs once, the message names who approved and loses its buttons),
// and a click on the decided approval.
func TestDiscordApprovalApprove(t *testing.T) {
	w := discordApprovalStart(t)
	thread, msg := discordApprovalAsk(w)

	// (a) Three buttons, the call's preview in the text.
	var labels []string
	for _, b := range msg.Buttons() {
		labels = append(labels, b.Label)
	}
	if diff := cmp.Diff([]string{"Approve", "Deny", "Always allow"}, labels); diff != "" {
		t.Errorf("buttons (-want +got):\n%s", diff)
	}
	if len(msg.Rows) != 1 || !strings.Contains(msg.Content, discordApprovalCommand) {
		t.Errorf("approval message = %+v, want one row and the command", msg)
	}
	discordApprovalJob(w, thread, core.JobWaitingApproval)

	// (b) A stranger's click: refused to them alone, nothing changes.
	refused := discordApprovalFollowup(w, discordApprovalClick(w, thread, msg, "approve", discordApprovalStranger))
	if refused.Flags != 64 || !strings.Contains(refused.Content, "Only the person who started this task") {
		t.Errorf("the stranger was answered %+v, want an ephemeral refusal", refused)
	}
	if discordApprovalFile(w, thread) || len(w.sys.LLM.Requests()) != 1 {
		t.Errorf("after the stranger's click: the file exists, or %d model requests; want nothing run", len(w.sys.LLM.Requests()))
	}
	if jobs := w.jobs(thread); len(jobs) != 1 || jobs[0].State != core.JobWaitingApproval {
		t.Errorf("jobs = %+v, want one, still waiting for approval", jobs)
	}
	if cur, _ := discordApprovalMessage(w, thread); len(cur.Buttons()) != 3 || cur.Content != msg.Content {
		t.Errorf("the stranger's click changed the approval message: %+v", cur)
	}

	// (c) The requester approves: the command runs once, the model reads
	// its result, the message says who approved and has no buttons.
	approve := discordApprovalClick(w, thread, msg, "approve", discordApprovalRequester)
	discordApprovalJob(w, thread, core.JobSucceeded)
	discordApprovalRanOnce(w, thread)
	eventually(t, "the approval message edited", func() bool {
		cur, _ := discordApprovalMessage(w, thread)
		return strings.Contains(cur.Content, "approved by user"+discordApprovalRequester)
	})
	cur, _ := discordApprovalMessage(w, thread)
	if !cur.HasComponents || len(cur.Rows) != 0 {
		t.Errorf("the decided approval message still has buttons: %+v", cur.Rows)
	}
	if fu := discordApprovalFollowups(w, approve); len(fu) != 0 {
		t.Errorf("the approval was answered %+v; the message's edit says it", fu)
	}

	// A click on the decided approval changes nothing, and says so.
	again := discordApprovalFollowup(w, discordApprovalClick(w, thread, msg, "deny", discordApprovalRequester))
	if again.Flags != 64 || !strings.Contains(again.Content, "already decided") {
		t.Errorf("a click on the decided approval was answered %+v, want an ephemeral \"already decided\"", again)
	}
	discordApprovalRanOnce(w, thread)
}

// Deny: nothing runs, the model is told who denied it.
func TestDiscordApprovalDeny(t *testing.T) {
	w := discordApprovalStart(t)
	thread, msg := discordApprovalAsk(w)
	discordApprovalClick(w, thread, msg, "deny", discordApprovalRequester)
	discordApprovalJob(w, thread, core.JobSucceeded)
	if discordApprovalFile(w, thread) {
		t.Errorf("approved.txt exists after the denial")
	}
	results := discordApprovalToolResults(w)
	if len(results) != 2 || len(results[1]) != 1 || !strings.Contains(results[1][0], "was not run") ||
		!strings.Contains(results[1][0], "discord:"+discordApprovalRequester) {
		t.Errorf("tool results by model request = %q, want the second to say the call was denied and by whom", results)
	}
	eventually(t, "the approval message edited", func() bool {
		cur, _ := discordApprovalMessage(w, thread)
		return strings.Contains(cur.Content, "denied by user"+discordApprovalRequester) && cur.HasComponents && len(cur.Rows) == 0
	})
}

// Always allow: the call runs, and the same call in another task of the
// channel runs without asking until an admin revokes the rule with
// /baton policy revoke.
func TestDiscordApprovalAlwaysAllow(t *testing.T) {
	w := discordApprovalStart(t)
	first, msg := discordApprovalAsk(w)
	discordApprovalClick(w, first, msg, "always", discordApprovalRequester)
	discordApprovalJob(w, first, core.JobSucceeded)
	discordApprovalRanOnce(w, first)

	// The same command in a second task of the channel: no question.
	discordApprovalScript(w, discordApprovalCommand)
	second := w.say(discordfake.Text, discordfake.Guild, discordApprovalRequester, "<@"+discordfake.Bot+"> once more", true)
	discordApprovalJob(w, second, core.JobSucceeded)
	if results := discordApprovalToolResults(w); len(results) != 4 || len(results[3]) != 1 || !strings.Contains(results[3][0], "[exit code 0]") {
		t.Errorf("tool results by model request = %q, want the second task's call run", results)
	}
	if !discordApprovalFile(w, second) {
		t.Errorf("approved.txt is not in the second task's workspace")
	}
	if _, asked := discordApprovalMessage(w, second); asked {
		t.Errorf("the allowed call was asked about again")
	}

	// /baton policy lists the rule; only an admin revokes it.
	list := discordApprovalSlash(w, discordApprovalRequester, 0)
	m := regexp.MustCompile(`(\d+)\. Bash .*touch approved\.txt`).FindStringSubmatch(list)
	if m == nil {
		t.Fatalf("/baton policy answered %q, want the rule listed", list)
	}
	rule, _ := strconv.Atoi(m[1])
	if got := discordApprovalSlash(w, discordApprovalRequester, rule); !strings.Contains(got, "Only an admin") {
		t.Errorf("a requester's revoke was answered %q", got)
	}
	if got := discordApprovalSlash(w, discordApprovalAdmin, rule); !strings.Contains(got, "Rule "+m[1]+" revoked") {
		t.Errorf("the admin's revoke was answered %q", got)
	}
	if got := discordApprovalSlash(w, discordApprovalRequester, 0); !strings.Contains(got, "No always-allow rules") {
		t.Errorf("after the revoke /baton policy answered %q", got)
	}

	// The call asks again.
	third, _ := discordApprovalAsk(w)
	discordApprovalJob(w, third, core.JobWaitingApproval)
}

// discordApprovalSlash sends /baton policy (revoke:rule when rule is not
// 0) in the text channel as user and returns the answer.
func discordApprovalSlash(w *discordWorld, user string, rule int) string {
	w.t.Helper()
	n := len(w.f.Answers())
	sub := map[string]any{"name": "policy", "type": 1}
	if rule != 0 {
		sub["options"] = []any{map[string]any{"name": "revoke", "type": 4, "value": rule}}
	}
	w.f.Dispatch("INTERACTION_CREATE", map[string]any{
		"id": "slash-" + strconv.Itoa(n), "application_id": discordfake.App, "type": 2, "token": "tok-slash-" + strconv.Itoa(n),
		"channel_id": discordfake.Text, "guild_id": discordfake.Guild,
		"member": map[string]any{"user": map[string]any{"id": user, "username": "user" + user}, "roles": []string{}},
		"data":   map[string]any{"id": "c1", "name": "baton", "type": 1, "options": []any{sub}},
	})
	eventually(w.t, "the /baton policy answer", func() bool { return len(w.f.Answers()) > n })
	return w.f.Answers()[n]
}

// Two clicks at once (Approve and Deny by the requester): one decision;
// the other click hears that it came too late.
func TestDiscordApprovalTwoClicks(t *testing.T) {
	w := discordApprovalStart(t)
	thread, msg := discordApprovalAsk(w)
	approve := discordApprovalClick(w, thread, msg, "approve", discordApprovalRequester)
	deny := discordApprovalClick(w, thread, msg, "deny", discordApprovalRequester)
	discordApprovalJob(w, thread, core.JobSucceeded)
	eventually(t, "the losing click answered", func() bool {
		return len(discordApprovalFollowups(w, approve))+len(discordApprovalFollowups(w, deny)) > 0
	})
	_, key, _ := strings.Cut(discordApprovalButton(t, msg, "approve"), ":")
	jobID, waitSeq, ok := core.ParseApprovalKey(key)
	if !ok {
		t.Fatalf("approval key %q", key)
	}
	a, err := w.sys.Store.Approval(context.Background(), jobID, waitSeq)
	if err != nil {
		t.Fatal(err)
	}
	loser, verdict := deny, "approved by"
	if a.State == core.ApprovalDenied {
		loser, verdict = approve, "denied by"
	}
	fu := append(discordApprovalFollowups(w, approve), discordApprovalFollowups(w, deny)...)
	if len(fu) != 1 || fu[0].Interaction != loser || !strings.Contains(fu[0].Content, "already decided") {
		t.Errorf("follow-ups = %+v, want one \"already decided\" for the losing click %s (approval %s)", fu, loser, a.State)
	}
	if a.State == core.ApprovalApproved {
		discordApprovalRanOnce(w, thread)
	} else if discordApprovalFile(w, thread) {
		t.Errorf("approval denied, but approved.txt exists")
	}
	eventually(t, "the approval message edited", func() bool {
		cur, _ := discordApprovalMessage(w, thread)
		return strings.Contains(cur.Content, verdict)
	})
	var decisions int
	for _, e := range w.f.Edits() {
		if e.ID == msg.ID && (strings.Contains(e.Content, "approved by") || strings.Contains(e.Content, "denied by")) {
			decisions++
		}
	}
	if decisions != 1 {
		t.Errorf("the approval message was edited with %d decisions, want 1", decisions)
	}
}

// The Stop button of a running job's status message: a click by the
// requester while the model's Bash sleeps ends the job, aborted, within
// 5 seconds, and the thread says who stopped it.
func TestDiscordApprovalStop(t *testing.T) {
	w := discordApprovalStart(t)
	w.sys.LLM.Script(llmtest.Call("Bash", `{"command":"sleep 600"}`), llmtest.Transition("COMPLETE", "late answer"))
	thread := w.say(discordfake.Text, discordfake.Guild, discordApprovalRequester, "<@"+discordfake.Bot+"> wait a while", true)
	var status discordfake.Message
	eventually(t, "the status message with Stop", func() bool {
		for _, p := range w.f.Posts() {
			if p.Channel == thread && slices.ContainsFunc(p.Buttons(), func(b discordfake.Button) bool { return strings.HasPrefix(b.CustomID, "stop:") }) {
				status = p
				return true
			}
		}
		return false
	})
	eventually(t, "the sleep running", func() bool { return discordApprovalRunning(w, thread) })
	if b := status.Buttons(); len(b) != 1 || b[0].Label != "Stop" || b[0].Style != 4 {
		t.Errorf("status buttons = %+v, want one red Stop", b)
	}
	w.f.Click(discordfake.Click{CustomID: status.Buttons()[0].CustomID, User: discordApprovalRequester, Name: "user" + discordApprovalRequester,
		Channel: thread, Guild: discordfake.Guild, Message: status.ID})
	// The one bound on time here is the product's: Stop ends a running
	// command within seconds, not when its 600 s are over.
	deadline := time.Now().Add(5 * time.Second)
	for {
		jobs := w.jobs(thread)
		if len(jobs) == 1 && jobs[0].State == core.JobAborted {
			if jobs[0].AbortedBy != "discord:"+discordApprovalRequester {
				t.Errorf("aborted by %q", jobs[0].AbortedBy)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job is not aborted 5 s after Stop: %+v", jobs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.waitPost(thread, "was aborted by <@"+discordApprovalRequester+">")
	eventually(t, "Stop removed from the status message", func() bool {
		cur, _ := w.f.Current(status.ID)
		return cur.HasComponents && len(cur.Rows) == 0
	})
	for _, p := range w.posts(thread) {
		if strings.Contains(p, "late answer") {
			t.Errorf("the answer was posted after Stop: %q", p)
		}
	}
}
