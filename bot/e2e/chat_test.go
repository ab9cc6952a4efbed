package e2e_test

// The conversation service over the whole stack: messages, commands and
// reactions handed to core/chat's Service as an adapter hands them, jobs
// run by the worker pool against the scripted LLM server.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/google/go-cmp/cmp"
)

// chatWorld is the whole system in-process (the stack) driven through
// the conversation service's API, as an adapter would.
type chatWorld struct {
	t     *testing.T
	srv   *llmtest.Server
	store *sqlite.Store
	svc   *chat.Service
	msgN  atomic.Int64
}

func newChatWorld(t *testing.T, access chat.Access) *chatWorld {
	t.Helper()
	sys := startStack(t, stackOptions{Access: access})
	return &chatWorld{t: t, srv: sys.LLM, store: sys.Store, svc: sys.Service}
}

var chatThread = core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: "1700.1"}

func (w *chatWorld) say(who, text string) chat.Reply {
	w.t.Helper()
	return w.sayIn(chatThread, who, text, fmt.Sprintf("1700.%d", 100+w.msgN.Add(1)))
}

func (w *chatWorld) sayIn(th core.ThreadRef, who, text, msgID string) chat.Reply {
	w.t.Helper()
	r, err := w.svc.HandleMessage(context.Background(), chat.Message{
		Thread: th, Channel: "slack:" + th.Channel, MsgID: msgID, Author: chat.Author{ID: "slack:" + who, Name: who},
		Text: text, Addressed: true,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

func (w *chatWorld) task() core.Task {
	w.t.Helper()
	task, err := w.store.TaskByThread(context.Background(), chatThread)
	if err != nil {
		w.t.Fatal(err)
	}
	return task
}

// waitJob waits for the task's latest job to reach state s.
func (w *chatWorld) waitJob(s core.JobState) core.Job {
	w.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		jobs, err := w.store.Jobs(context.Background(), core.JobFilter{TaskID: w.task().ID, Limit: 1})
		if err != nil {
			w.t.Fatal(err)
		}
		if len(jobs) > 0 && jobs[0].State == s {
			return jobs[0]
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("latest job not %s: %+v", s, jobs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outbox returns the task's pending outbox messages as "kind text|emoji",
// delivering them (marking them sent) as it goes.
func (w *chatWorld) outbox() []string {
	w.t.Helper()
	var out []string
	for {
		msgs, err := w.store.DueOutbox(context.Background(), core.PlatformSlack, time.Now().Add(time.Hour), 10)
		if err != nil {
			w.t.Fatal(err)
		}
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			p, _ := chat.DecodePayload(m.Payload)
			v := p.Text
			if p.Emoji != "" {
				v = p.Emoji + " on " + p.MsgID
			}
			out = append(out, string(m.Kind)+" "+v)
			if err := w.store.OutboxSent(context.Background(), m.ID, fmt.Sprint("sent-", m.ID)); err != nil {
				w.t.Fatal(err)
			}
		}
	}
}

func chatContains(t *testing.T, list []string, want ...string) {
	t.Helper()
	for _, w := range want {
		found := false
		for _, l := range list {
			if strings.Contains(l, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %q among:\n%s", w, strings.Join(list, "\n"))
		}
	}
}

func TestChatMessageToAnswer(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	w.srv.Script(llmtest.Transition("COMPLETE", "The answer is 42."))
	// Slack delivers a mention twice (app_mention and message): one comment, one job.
	for range 2 {
		w.sayIn(chatThread, "alice", "<@UBATON> what is the answer?", "1700.1")
	}
	j := w.waitJob(core.JobSucceeded)
	if j.TriggerMsgID != "1700.1" {
		t.Errorf("trigger = %q", j.TriggerMsgID)
	}
	jobs, _ := w.store.Jobs(context.Background(), core.JobFilter{TaskID: w.task().ID})
	comments, _ := w.store.RecentComments(context.Background(), w.task().ID, 10)
	if len(jobs) != 1 || len(comments) != 2 { // the request and the answer
		t.Errorf("%d jobs and %d comments, want 1 and 2", len(jobs), len(comments))
	}
	chatContains(t, w.outbox(), "react eyes on 1700.1", "update ⏳ Working on it", "post The answer is 42.", "react white_check_mark on 1700.1", "update ✅ Done")
}

func TestChatAskAnswerResumesOnce(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	w.srv.Script(llmtest.Transition("ASK", "need a year", "question", "Which year?"))
	w.say("alice", "make the report")
	waiting := w.waitJob(core.JobWaitingHuman)
	chatContains(t, w.outbox(), "post Which year?", "update ❓ Waiting for an answer")
	w.srv.Script(llmtest.Transition("COMPLETE", "Report for 2025."))
	// The same reply delivered twice, then a second different reply.
	w.sayIn(chatThread, "alice", "2025", "1700.900")
	w.sayIn(chatThread, "alice", "2025", "1700.900")
	done := w.waitJob(core.JobSucceeded)
	if done.ID != waiting.ID {
		t.Errorf("a new job %d instead of resuming %d", done.ID, waiting.ID)
	}
	reqs := w.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2 (ask, resume once)", len(reqs))
	}
	user := reqs[1].Messages[1].Text()
	if !strings.Contains(user, "Which year?") || !strings.Contains(user, "alice: 2025") {
		t.Errorf("question and answer not in the resumed prompt:\n%s", user)
	}
}

func TestChatCommands(t *testing.T) {
	w := newChatWorld(t, chat.Access{Admins: []string{"slack:root"}})
	w.srv.Script(llmtest.Transition("ASK", "q", "question", "Which?"))
	w.say("alice", "start")
	w.waitJob(core.JobWaitingHuman)
	w.outbox()

	if r := w.say("alice", "!status"); r.Text != "" {
		t.Errorf("in-thread status answered privately: %q", r.Text)
	}
	chatContains(t, w.outbox(), "post ❓ Task #1 — job #1 waiting_human: piece chat")
	if r := w.say("alice", "!frobnicate"); !strings.Contains(r.Text, "I don't know the command `!frobnicate`") || !strings.Contains(r.Text, "!abort") {
		t.Errorf("unknown command reply = %q", r.Text)
	}
	if r := w.say("mallory", "!abort"); !strings.Contains(r.Text, "Only the person who started") {
		t.Errorf("abort by a stranger = %q", r.Text)
	}
	if j := w.waitJob(core.JobWaitingHuman); j.State != core.JobWaitingHuman {
		t.Fatal("refused abort changed the job")
	}
	if r := w.say("root", "!stop"); !strings.Contains(r.Text, "Stopping job #1") {
		t.Errorf("abort by an admin = %q", r.Text)
	}
	j := w.waitJob(core.JobAborted)
	if j.AbortedBy != "slack:root" {
		t.Errorf("aborted by %q", j.AbortedBy)
	}
	chatContains(t, w.outbox(), "post 🛑 Job #1 was aborted by root.")
	if r := w.say("alice", "!abort"); !strings.Contains(r.Text, "Nothing is running") {
		t.Errorf("abort with no job = %q", r.Text)
	}
	if r := w.say("alice", "!piece nope do it"); !strings.Contains(r.Text, "There is no piece `nope`") || !strings.Contains(r.Text, "research") {
		t.Errorf("!piece nope = %q", r.Text)
	}
	w.srv.Script(llmtest.Transition("investigate", "planned"), llmtest.Transition("report", "found"), llmtest.Transition("COMPLETE", "researched"))
	w.say("alice", "!piece research look into it")
	if j := w.waitJob(core.JobSucceeded); j.Piece != "research" || j.Instruction != "look into it" {
		t.Errorf("job = piece %q instruction %q", j.Piece, j.Instruction)
	}
}

func TestChatRetryContinuesAtFailedMovement(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	w.srv.Script(llmtest.Status(400))
	w.say("alice", "do it")
	failed := w.waitJob(core.JobFailed)
	chatContains(t, w.outbox(), "post ❌ Job #1 failed", "react x on")
	w.srv.Script(llmtest.Transition("COMPLETE", "done on retry"))
	w.say("alice", "!retry")
	j := w.waitJob(core.JobSucceeded)
	if j.RetryOf != failed.ID || j.ID == failed.ID {
		t.Errorf("retry job %d retry_of %d, want a new job retrying %d", j.ID, j.RetryOf, failed.ID)
	}
}

func TestChatSteerAfterLastCallStartsFollowUp(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	n := 0
	w.srv.Handle(func(llmtest.Request) llmtest.Step {
		n++
		switch n {
		case 1: // a person writes while the only request is out
			w.say("alice", "also add a title")
			return llmtest.Transition("COMPLETE", "first answer")
		default:
			return llmtest.Transition("COMPLETE", "title added")
		}
	})
	w.say("alice", "write a summary")
	deadline := time.Now().Add(60 * time.Second)
	for {
		jobs, _ := w.store.Jobs(context.Background(), core.JobFilter{TaskID: w.task().ID})
		if len(jobs) == 2 && jobs[0].State == core.JobSucceeded {
			if jobs[0].Instruction != "also add a title" {
				t.Errorf("follow-up instruction = %q", jobs[0].Instruction)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no follow-up job: %+v", jobs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// chatSubtaskScript answers a parent that splits its work into three children
// (the second of which fails) and then collects their results.
func chatSubtaskScript(req llmtest.Request) llmtest.Step {
	user := req.Messages[1].Text()
	switch {
	case strings.Contains(user, "## Results of subtasks"):
		return llmtest.Transition("COMPLETE", "collected: "+strings.ReplaceAll(user[strings.Index(user, "## Results of subtasks"):], "\n", " | "))
	case strings.Contains(user, "## Request\ndo A"):
		return llmtest.Transition("COMPLETE", "A done")
	case strings.Contains(user, "## Request\ndo B"):
		return llmtest.Transition("ABORT", "B is impossible")
	case strings.Contains(user, "## Request\ndo C"):
		return llmtest.Transition("COMPLETE", "C done")
	}
	b, _ := json.Marshal(map[string]any{"next_step": "WAIT_SUBTASKS", "summary": "splitting", "subtasks": []map[string]string{
		{"title": "part A", "instruction": "do A"}, {"title": "part B", "instruction": "do B"}, {"title": "part C", "instruction": "do C"},
	}})
	return llmtest.Call("transition", string(b))
}

func TestChatSubtasksOneFailing(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	w.srv.Handle(chatSubtaskScript)
	w.say("alice", "do three things")
	parent := w.waitJob(core.JobSucceeded)
	for _, want := range []string{"part A — succeeded: A done", "part B — failed: B is impossible", "part C — succeeded: C done"} {
		if !strings.Contains(parent.ResultSummary, want) {
			t.Errorf("the parent's resumed prompt lacks %q: %s", want, parent.ResultSummary)
		}
	}
	kids, _ := w.store.Jobs(context.Background(), core.JobFilter{ParentJobID: parent.ID})
	if len(kids) != 3 {
		t.Fatalf("%d children, want 3", len(kids))
	}
	out := w.outbox()
	chatContains(t, out, "update ⏳ Waiting for 3 subtasks:", "part A", "post collected:")
	for _, o := range out {
		if strings.Contains(o, "A done") && !strings.Contains(o, "collected") {
			t.Errorf("a child posted in the thread: %q", o)
		}
	}
}

func TestChatAbortParentAbortsChildren(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	w.srv.Handle(func(req llmtest.Request) llmtest.Step {
		user := req.Messages[1].Text()
		if strings.Contains(user, "## Request\ndo A") || strings.Contains(user, "## Request\ndo B") || strings.Contains(user, "## Request\ndo C") { // children take their time
			return llmtest.Transition("COMPLETE", "late child").After(30 * time.Second)
		}
		return chatSubtaskScript(req)
	})
	w.say("alice", "do three things")
	parent := w.waitJob(core.JobWaitingSubtasks)
	deadline := time.Now().Add(60 * time.Second)
	for { // at least one child is running
		kids, _ := w.store.Jobs(context.Background(), core.JobFilter{ParentJobID: parent.ID, States: []core.JobState{core.JobRunning}})
		if len(kids) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no child ever ran")
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.say("alice", "!abort")
	w.waitJob(core.JobAborted)
	deadline = time.Now().Add(30 * time.Second)
	for {
		kids, _ := w.store.Jobs(context.Background(), core.JobFilter{ParentJobID: parent.ID})
		aborted := 0
		for _, k := range kids {
			if k.State == core.JobAborted {
				aborted++
			}
		}
		if aborted == len(kids) && len(kids) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("children not all aborted: %+v", kids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAbortDuringLongBash aborts a job while its Bash command runs: the
// command's processes are gone within 2 s and no result is posted later.
func TestChatAbortDuringLongBash(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	pidFile := filepath.Join(t.TempDir(), "pids")
	w.srv.Script(llmtest.Call("Bash", fmt.Sprintf(`{"command":"sleep 60 & echo $! > %s; echo $$ >> %s; wait","timeout_s":120}`, pidFile, pidFile)))
	w.srv.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "late result") })
	w.say("alice", "run the long command")
	var pids []int
	deadline := time.Now().Add(60 * time.Second)
	for len(pids) < 2 {
		b, _ := os.ReadFile(pidFile)
		pids = pids[:0]
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	asked := time.Now()
	w.say("alice", "!abort")
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil {
			if time.Since(asked) > 2*time.Second {
				t.Fatalf("process %d still alive 2 s after the abort", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	w.waitJob(core.JobAborted)
	time.Sleep(300 * time.Millisecond)
	for _, o := range w.outbox() {
		if strings.Contains(o, "late result") {
			t.Errorf("the aborted job posted a result: %q", o)
		}
	}
}

// TestRetryStartsAtTheFailedMovement: a job failing in its second movement
// is retried from that movement, with the first movement's lessons.
func TestChatRetryStartsAtTheFailedMovement(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	w.srv.Script(
		llmtest.Transition("implement", "planned", "lessons", "use port 8080"),
		llmtest.Status(400),
	)
	w.say("alice", "!piece plan-implement-verify build it")
	failed := w.waitJob(core.JobFailed)
	if failed.Movement != "implement" {
		t.Fatalf("failed at %q, want implement", failed.Movement)
	}
	w.srv.Script(llmtest.Transition("verify", "built"), llmtest.Transition("COMPLETE", "verified"))
	w.say("alice", "!retry")
	done := w.waitJob(core.JobSucceeded)
	if done.RetryOf != failed.ID {
		t.Errorf("retry_of = %d, want %d", done.RetryOf, failed.ID)
	}
	reqs := w.srv.Requests()
	first := reqs[2] // the retry's first request
	if !strings.Contains(first.Messages[0].Text(), "**implement** (this step)") {
		t.Errorf("the retry did not start at implement")
	}
	if !strings.Contains(first.Messages[1].Text(), "use port 8080") {
		t.Errorf("the retry lost the lessons")
	}
}

func TestChatMessageWhileRunningReachesNextRequest(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	n := 0
	w.srv.Handle(func(llmtest.Request) llmtest.Step {
		n++
		if n == 1 {
			w.say("bob", "use the 2024 figures")
			return llmtest.Call("Read", `{"path":"input/none"}`)
		}
		return llmtest.Transition("COMPLETE", "done")
	})
	w.say("alice", "make the report")
	w.waitJob(core.JobSucceeded)
	second := w.srv.Requests()[1]
	last := second.Messages[len(second.Messages)-1]
	if last.Role != "user" || last.Text() != "New message in the thread from bob: use the 2024 figures" {
		t.Errorf("the next request ends with %s %q", last.Role, last.Text())
	}
	jobs, _ := w.store.Jobs(context.Background(), core.JobFilter{TaskID: w.task().ID})
	if len(jobs) != 1 {
		t.Errorf("%d jobs: a steer the job consumed must not start another", len(jobs))
	}
}

func TestChatBadInput(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	w.srv.Handle(func(req llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "ok") })
	// Only a mention (the adapter strips it): a sane request.
	w.say("alice", "   ")
	w.waitJob(core.JobSucceeded)
	first := w.srv.Requests()[0].Messages[1].Text()
	if !strings.Contains(first, "The message has no text") {
		t.Errorf("an empty message gave the agent:\n%s", first)
	}
	// A reply to a finished job starts a new one; a 1 MB message with
	// invalid UTF-8 is stored capped, with a note.
	w.say("alice", "bad \xff bytes "+strings.Repeat("x", 1<<20))
	deadline := time.Now().Add(60 * time.Second)
	for {
		jobs, _ := w.store.Jobs(context.Background(), core.JobFilter{TaskID: w.task().ID})
		if len(jobs) == 2 && jobs[0].State == core.JobSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no second job: %+v", jobs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cs, _ := w.store.RecentComments(context.Background(), w.task().ID, 10)
	var big core.Comment
	for _, c := range cs {
		if strings.HasPrefix(c.Text, "bad") {
			big = c
		}
	}
	if len(big.Text) > 100_200 || !strings.Contains(big.Text, "Your message was cut at 100000 bytes") || !utf8.ValidString(big.Text) {
		t.Errorf("stored %d bytes, valid UTF-8 %v, note %v", len(big.Text), utf8.ValidString(big.Text), strings.Contains(big.Text, "cut"))
	}
}

func TestChatReactionAborts(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	w.srv.Script(llmtest.Transition("ASK", "q", "question", "Which?"))
	w.sayIn(chatThread, "alice", "start", chatThread.Thread)
	w.waitJob(core.JobWaitingHuman)
	// The bot's own reaction, and one on another message, change nothing.
	for _, r := range []chat.Reaction{
		{Thread: chatThread, MsgID: chatThread.Thread, Emoji: "x", Author: chat.Author{ID: "slack:UBOT", Bot: true}},
		{Thread: chatThread, MsgID: "1700.999", Emoji: "x", Author: chat.Author{ID: "slack:alice"}},
		{Thread: chatThread, MsgID: chatThread.Thread, Emoji: "eyes", Author: chat.Author{ID: "slack:alice"}},
	} {
		if _, err := w.svc.HandleReaction(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if j := w.waitJob(core.JobWaitingHuman); j.State != core.JobWaitingHuman {
		t.Fatal("a reaction that is no abort changed the job")
	}
	if _, err := w.svc.HandleReaction(context.Background(), chat.Reaction{Thread: chatThread, MsgID: chatThread.Thread, Emoji: "x", Author: chat.Author{ID: "slack:alice", Name: "alice"}}); err != nil {
		t.Fatal(err)
	}
	if j := w.waitJob(core.JobAborted); j.AbortedBy != "slack:alice" {
		t.Errorf("aborted by %q", j.AbortedBy)
	}
}

// TestReactionAbortsInDirectMessages: a direct-message channel is one
// thread keyed by no message; ❌ on the message that started the job stops
// it there.
func TestChatReactionAbortsInDirectMessages(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	dm := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "D1", Thread: "D1"}
	w.srv.Script(llmtest.Transition("ASK", "q", "question", "Which?"))
	if _, err := w.svc.HandleMessage(context.Background(), chat.Message{Thread: dm, Channel: "slack:D1", MsgID: "1700.5", Author: chat.Author{ID: "slack:alice"}, Text: "start", Addressed: true, Direct: true}); err != nil {
		t.Fatal(err)
	}
	job := func() core.Job {
		task, err := w.store.TaskByThread(context.Background(), dm)
		if err != nil {
			t.Fatal(err)
		}
		jobs, err := w.store.Jobs(context.Background(), core.JobFilter{TaskID: task.ID})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("jobs %+v, %v", jobs, err)
		}
		return jobs[0]
	}
	for deadline := time.Now().Add(60 * time.Second); job().State != core.JobWaitingHuman; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job never asked")
		}
	}
	if _, err := w.svc.HandleReaction(context.Background(), chat.Reaction{Thread: dm, MsgID: "1700.4", Emoji: "x", Author: chat.Author{ID: "slack:alice"}}); err != nil {
		t.Fatal(err)
	}
	if j := job(); j.State != core.JobWaitingHuman {
		t.Fatalf("❌ on another message: job %s", j.State)
	}
	if _, err := w.svc.HandleReaction(context.Background(), chat.Reaction{Thread: dm, MsgID: "1700.5", Emoji: "x", Author: chat.Author{ID: "slack:alice"}}); err != nil {
		t.Fatal(err)
	}
	if j := job(); j.State != core.JobAborted || j.AbortedBy != "slack:alice" {
		t.Errorf("❌ on the request: job %s aborted by %q, want aborted by slack:alice", j.State, j.AbortedBy)
	}
}

func TestChatSlashCommands(t *testing.T) {
	w := newChatWorld(t, chat.Access{Admins: []string{"slack:root"}})
	w.srv.Script(llmtest.Transition("ASK", "q", "question", "Which?"))
	w.say("alice", "start the report")
	w.waitJob(core.JobWaitingHuman)
	slash := func(who, name, args string) string {
		t.Helper()
		r, err := w.svc.HandleCommand(context.Background(), chat.Command{Name: name, Args: args, Channel: "slack:C9", Author: chat.Author{ID: "slack:" + who, Name: who}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Public {
			t.Errorf("/baton %s answered in public", name)
		}
		return r.Text
	}
	if got := slash("alice", "list", ""); !strings.Contains(got, "#1 start the report — job #1 waiting_human") {
		t.Errorf("alice's list = %q", got)
	}
	if got := slash("bob", "list", ""); !strings.Contains(got, "No active tasks") {
		t.Errorf("bob's list = %q", got)
	}
	if got := slash("root", "list", ""); !strings.Contains(got, "#1") {
		t.Errorf("the admin's list = %q", got)
	}
	if got := slash("bob", "status", "#1"); !strings.Contains(got, "job #1 waiting_human") {
		t.Errorf("status #1 = %q", got)
	}
	if got := slash("bob", "status", "#99"); !strings.Contains(got, "There is no task #99") {
		t.Errorf("status #99 = %q", got)
	}
	if got := slash("bob", "help", ""); !strings.Contains(got, "!abort") {
		t.Errorf("help = %q", got)
	}
	if got := slash("alice", "abort", "#1"); !strings.Contains(got, "Stopping job #1") {
		t.Errorf("abort #1 = %q", got)
	}
	w.waitJob(core.JobAborted)
}

// The model reads a message as people read it, the comment keeps the
// platform's markup for audit, and stickers alone in a task's thread are
// a comment rather than a request.
func TestChatReadableTextAndStickers(t *testing.T) {
	w := newChatWorld(t, chat.Access{})
	w.srv.Handle(func(req llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "ok") })
	_, err := w.svc.HandleMessage(context.Background(), chat.Message{
		Thread: chatThread, Channel: "slack:C1", MsgID: "1700.1", Author: chat.Author{ID: "slack:U9", Name: "carol"},
		Text: "ask @alice about #ops", Original: "<@UBATON> ask <@U1> about <#C1|ops>", Addressed: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.waitJob(core.JobSucceeded)
	if got := w.task().Title; got != "ask @alice about #ops" {
		t.Errorf("title = %q", got)
	}
	if req := w.srv.Requests()[0].Messages[1].Text(); !strings.Contains(req, "ask @alice about #ops") || strings.Contains(req, "<@U1>") {
		t.Errorf("the model read:\n%s", req)
	}

	// Stickers alone in the thread, then stickers with words.
	for i, m := range []chat.Message{
		{Stickers: []string{"Wave"}},
		{Text: "thanks!", Stickers: []string{"Party\nParrot"}},
	} {
		m.Thread, m.Channel, m.MsgID, m.Author = chatThread, "slack:C1", fmt.Sprintf("1700.%d", 2+i), chat.Author{ID: "slack:U9"}
		if _, err := w.svc.HandleMessage(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			jobs, _ := w.store.Jobs(context.Background(), core.JobFilter{TaskID: w.task().ID})
			if len(jobs) != 1 {
				t.Errorf("a sticker started a job: %+v", jobs)
			}
		}
	}
	w.waitJob(core.JobSucceeded)
	jobs, _ := w.store.Jobs(context.Background(), core.JobFilter{TaskID: w.task().ID})
	if len(jobs) != 2 {
		t.Errorf("%d jobs, want 2: the first request and the one with words", len(jobs))
	}
	cs, _ := w.store.RecentComments(context.Background(), w.task().ID, 10)
	var got [][2]string
	for _, c := range cs {
		if c.Role == core.RoleUser {
			got = append(got, [2]string{c.Text, c.Original})
		}
	}
	want := [][2]string{
		{"ask @alice about #ops", "<@UBATON> ask <@U1> about <#C1|ops>"},
		{"[sticker: Wave]", ""},
		{"thanks!\n[sticker: Party Parrot]", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
}
