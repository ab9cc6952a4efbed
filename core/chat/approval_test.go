package chat_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// parked runs the task's job to a park at an approval of a Bash call, as
// the worker would (the notifier's messages in the park's transaction),
// and returns the job as it waits.
func (w *world) parked(command string) core.Job {
	w.t.Helper()
	ctx := context.Background()
	w.say("alice", "deploy it")
	j, err := w.store.ActiveJob(ctx, w.task().ID)
	if err != nil {
		w.t.Fatal(err)
	}
	if j, err = w.store.StartJob(ctx, j.ID, 1); err != nil {
		w.t.Fatal(err)
	}
	fin := core.Finish{To: core.JobWaitingApproval, ResumeMovement: "chat", Checkpoint: "{}", Approval: &core.Approval{
		Tool: "Bash", Arguments: `{"command":"` + command + `"}`, Subject: command, Preview: command,
		Channel: "slack:C1", Requester: "slack:alice", Rule: "approvals.rules[0]",
		CreatedAt: time.Now(), Deadline: time.Now().Add(time.Hour),
	}}
	fin.Outbox = w.svc.Finishing(ctx, j, fin)
	if j, err = w.store.FinishJob(ctx, j.ID, j.Attempt, fin); err != nil {
		w.t.Fatal(err)
	}
	return j
}

// click presses the button whose action starts with verb on the job's
// approval message, as who.
func (w *world) click(j core.Job, verb, who string) chat.Reply {
	w.t.Helper()
	r, err := w.svc.HandleAction(context.Background(), chat.Action{
		Value: verb + ":" + core.ApprovalKey(j.ID, j.WaitSeq), Thread: thread, Channel: "slack:C1",
		Author: chat.Author{ID: "slack:" + who, Name: who},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

// approvalMessages delivers (marks sent) every pending outbox message and
// returns the payloads of the updates under the job's approval ref, in
// order.
func (w *world) approvalMessages(j core.Job) []chat.Payload {
	w.t.Helper()
	ctx := context.Background()
	var out []chat.Payload
	for {
		msgs, err := w.store.DueOutbox(ctx, core.PlatformSlack, time.Now().Add(time.Hour), 1000)
		if err != nil {
			w.t.Fatal(err)
		}
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			if err := w.store.OutboxSent(ctx, m.ID, "m"+itoa(m.ID)); err != nil {
				w.t.Fatal(err)
			}
			if m.Ref != "approval:"+core.ApprovalKey(j.ID, j.WaitSeq) {
				continue
			}
			p, err := chat.DecodePayload(m.Payload)
			if err != nil {
				w.t.Fatal(err)
			}
			out = append(out, p)
		}
	}
}

func TestApprovalMessageHasButtonsAndPreview(t *testing.T) {
	w := newWorld(t, chat.Access{})
	j := w.parked("make deploy")
	msgs := w.approvalMessages(j)
	if len(msgs) != 1 {
		t.Fatalf("approval messages = %d, want 1", len(msgs))
	}
	m := msgs[0]
	if !strings.Contains(m.Text, "```\nmake deploy\n```") || !strings.Contains(m.Text, "!approve") {
		t.Errorf("approval text = %q, want the fenced command and the text fallback", m.Text)
	}
	var labels []string
	for _, b := range m.Buttons {
		labels = append(labels, b.Label)
	}
	if strings.Join(labels, ",") != "Approve,Deny,Always allow" {
		t.Errorf("buttons = %v", labels)
	}
}

func TestStrangerCannotDecide(t *testing.T) {
	w := newWorld(t, chat.Access{})
	j := w.parked("make deploy")
	r := w.click(j, "approve", "mallory")
	if !strings.Contains(r.Text, "Only the person who started this task") {
		t.Errorf("stranger's reply = %q", r.Text)
	}
	a, err := w.store.Approval(context.Background(), j.ID, j.WaitSeq)
	if err != nil || a.State != core.ApprovalPending || len(w.queue.Resumed()) != 0 {
		t.Errorf("after a stranger's click: approval %+v, %v; resumed %v", a, err, w.queue.Resumed())
	}
}

func TestApproverAndAdminMayDecide(t *testing.T) {
	for _, who := range []string{"carol", "root"} {
		t.Run(who, func(t *testing.T) {
			w := newWorld(t, chat.Access{Admins: []string{"slack:root"}, Approvers: []string{"slack-group:SOPS"}})
			j := w.parked("make deploy")
			r, err := w.svc.HandleAction(context.Background(), chat.Action{
				Value: "approve:" + core.ApprovalKey(j.ID, j.WaitSeq), Thread: thread, Channel: "slack:C1",
				Author: chat.Author{ID: "slack:" + who, Name: who, Groups: []string{"slack-group:SOPS"}},
			})
			if err != nil || r.Text != "" {
				t.Fatalf("click = %+v, %v", r, err)
			}
			if a, _ := w.store.Approval(context.Background(), j.ID, j.WaitSeq); a.State != core.ApprovalApproved || a.DecidedBy != "slack:"+who {
				t.Errorf("approval = %+v", a)
			}
		})
	}
}

func TestTwoClicksOneDecision(t *testing.T) {
	w := newWorld(t, chat.Access{Admins: []string{"slack:root"}})
	j := w.parked("make deploy")
	var wg sync.WaitGroup
	replies := make([]chat.Reply, 2)
	for i, verb := range []string{"approve", "deny"} {
		wg.Go(func() {
			who := "alice"
			if i == 1 {
				who = "root"
			}
			replies[i] = w.click(j, verb, who)
		})
	}
	wg.Wait()
	if got := w.queue.Resumed(); len(got) != 1 {
		t.Errorf("resumed %v, want once", got)
	}
	notes := 0
	for _, r := range replies {
		if strings.Contains(r.Text, "already decided") {
			notes++
			if !strings.Contains(r.Text, "<@alice>") && !strings.Contains(r.Text, "<@root>") {
				t.Errorf("the note %q does not say who decided", r.Text)
			}
		}
	}
	if notes != 1 {
		t.Errorf("replies = %+v, want exactly one 'already decided'", replies)
	}
	if again := w.click(j, "approve", "alice"); !strings.Contains(again.Text, "already decided") {
		t.Errorf("a later click = %q", again.Text)
	}
	msgs := w.approvalMessages(j)
	if len(msgs) != 2 || len(msgs[1].Buttons) != 0 || !strings.Contains(msgs[1].Text, " by ") {
		t.Errorf("approval messages = %+v, want the ask and one edit naming who decided, without buttons", msgs)
	}
}

func TestAlwaysAllowStoresARuleAndPolicyRevokes(t *testing.T) {
	w := newWorld(t, chat.Access{Admins: []string{"slack:root"}})
	j := w.parked("make deploy")
	if r := w.click(j, "always", "alice"); r.Text != "" {
		t.Fatalf("always = %q", r.Text)
	}
	ctx := context.Background()
	cmd := func(who, args string) string {
		r, err := w.svc.HandleCommand(ctx, chat.Command{Name: "policy", Args: args, Thread: thread, InThread: true, Channel: "slack:C1", Author: chat.Author{ID: "slack:" + who, Name: who}})
		if err != nil {
			t.Fatal(err)
		}
		return r.Text
	}
	list := cmd("alice", "")
	rules, _ := w.store.AllowRules(ctx, "slack:C1")
	if len(rules) != 1 || !strings.Contains(list, "`make deploy`") {
		t.Fatalf("rules %+v; policy = %q", rules, list)
	}
	n := rules[0].ID
	if got := cmd("alice", "revoke "+itoa(n)); !strings.Contains(got, "Only an admin") {
		t.Errorf("revoke by a non-admin = %q", got)
	}
	if got := cmd("root", "revoke "+itoa(n)); !strings.Contains(got, "revoked") {
		t.Errorf("revoke by an admin = %q", got)
	}
	if rules, _ := w.store.AllowRules(ctx, "slack:C1"); len(rules) != 0 {
		t.Errorf("rules after revoke: %+v", rules)
	}
}

func TestTextFallbackDecides(t *testing.T) {
	w := newWorld(t, chat.Access{})
	j := w.parked("make deploy")
	w.say("alice", "!deny not on Fridays")
	a, err := w.store.Approval(context.Background(), j.ID, j.WaitSeq)
	if err != nil || a.State != core.ApprovalDenied || a.Reason != "not on Fridays" {
		t.Errorf("after !deny: %+v, %v", a, err)
	}
	if r := w.say("alice", "!approve"); !strings.Contains(r.Text, "Nothing in this thread is waiting") {
		t.Errorf("!approve with nothing pending = %q", r.Text)
	}
}

func TestUndecidedApprovalTimesOut(t *testing.T) {
	w := newWorld(t, chat.Access{})
	j := w.parked("make deploy")
	ctx := context.Background()
	if n, err := w.svc.ExpireApprovals(ctx, 10); err != nil || n != 0 {
		t.Fatalf("before the deadline: expired %d, %v", n, err)
	}
	late := chat.NewService(w.store, w.queue, chat.Config{DefaultPiece: "chat", Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	if n, err := late.ExpireApprovals(ctx, 10); err != nil || n != 1 {
		t.Fatalf("after the deadline: expired %d, %v", n, err)
	}
	a, _ := w.store.Approval(ctx, j.ID, j.WaitSeq)
	if a.State != core.ApprovalDenied || a.DecidedBy != core.DecidedByTimeout {
		t.Errorf("approval = %+v", a)
	}
	msgs := w.approvalMessages(j)
	if len(msgs) != 2 || !strings.Contains(msgs[1].Text, "nobody decided") {
		t.Errorf("the thread is not told of the timeout: %+v", msgs)
	}
	if got := w.queue.Resumed(); len(got) != 1 {
		t.Errorf("resumed %v, want once", got)
	}
}

func TestForeignApprovalButtonRefused(t *testing.T) {
	w := newWorld(t, chat.Access{})
	j := w.parked("make deploy")
	other := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: "1700.999"}
	r, err := w.svc.HandleAction(context.Background(), chat.Action{Value: "approve:" + core.ApprovalKey(j.ID, j.WaitSeq), Thread: other, Channel: "slack:C1",
		Author: chat.Author{ID: "slack:alice", Name: "alice"}})
	if err != nil || !strings.Contains(r.Text, "nothing changed") {
		t.Errorf("button from another thread = %+v, %v", r, err)
	}
	for _, v := range []string{"approve:nonsense", "approve:99.1", "launch:1"} {
		r, err := w.svc.HandleAction(context.Background(), chat.Action{Value: v, Thread: thread, Channel: "slack:C1", Author: chat.Author{ID: "slack:alice"}})
		if err != nil || !strings.Contains(r.Text, "nothing changed") {
			t.Errorf("action %q = %+v, %v", v, r, err)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestActionFromAChannelNotAllowedIsRefused(t *testing.T) {
	w := newWorld(t, chat.Access{})
	j := w.parked("make deploy")
	strict := chat.NewService(w.store, w.queue, chat.Config{DefaultPiece: "chat", Access: chat.Access{AllowedChannels: []string{"slack:C9"}}})
	r, err := strict.HandleAction(context.Background(), chat.Action{Value: "approve:" + core.ApprovalKey(j.ID, j.WaitSeq),
		Thread: thread, Channel: "slack:C1", Author: chat.Author{ID: "slack:alice", Name: "alice"}})
	if err != nil || !strings.Contains(r.Text, "not allowed") {
		t.Errorf("click in a channel not allowed = %+v, %v", r, err)
	}
	if a, _ := w.store.Approval(context.Background(), j.ID, j.WaitSeq); a.State != core.ApprovalPending {
		t.Errorf("approval = %+v, want still pending", a)
	}
}

func TestRetryButtonOnAFailedJob(t *testing.T) {
	w := newWorld(t, chat.Access{})
	w.say("alice", "do the thing")
	ctx := context.Background()
	j, err := w.store.ActiveJob(ctx, w.task().ID)
	if err != nil {
		t.Fatal(err)
	}
	if j, err = w.store.StartJob(ctx, j.ID, 1); err != nil {
		t.Fatal(err)
	}
	fin := core.Finish{To: core.JobFailed, Error: "the model failed"}
	msgs := w.svc.Finishing(ctx, j, fin)
	var retry string
	for _, m := range msgs {
		p, _ := chat.DecodePayload(m.Payload)
		for _, b := range p.Buttons {
			retry = b.Action
		}
	}
	if retry != "retry:"+itoa(j.ID) {
		t.Fatalf("failure messages carry the button %q, want retry of job %d", retry, j.ID)
	}
	fin.Outbox = msgs
	if _, err := w.store.FinishJob(ctx, j.ID, j.Attempt, fin); err != nil {
		t.Fatal(err)
	}
	before := len(w.queue.Enqueued())
	if r, err := w.svc.HandleAction(ctx, chat.Action{Value: retry, Thread: thread, Channel: "slack:C1",
		Author: chat.Author{ID: "slack:mallory", Name: "mallory"}}); err != nil || !strings.Contains(r.Text, "Only the person") {
		t.Errorf("a stranger's retry = %+v, %v", r, err)
	}
	if r, err := w.svc.HandleAction(ctx, chat.Action{Value: retry, Thread: thread, Channel: "slack:C1",
		Author: chat.Author{ID: "slack:alice", Name: "alice"}}); err != nil || r.Text != "" {
		t.Fatalf("retry = %+v, %v", r, err)
	}
	if got := w.queue.Enqueued(); len(got) != before+1 {
		t.Errorf("enqueued %v, want one more job", got)
	}
	next, err := w.store.ActiveJob(ctx, w.task().ID)
	if err != nil || next.RetryOf != j.ID {
		t.Errorf("active job = %+v, %v; want a retry of %d", next, err, j.ID)
	}
}
