package chat

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chattext"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/policy"
)

// Approvals in the thread: the message that asks (with Approve, Deny and
// Always allow buttons, and `!approve` / `!deny` as the text fallback), the
// decision (exactly one per wait, by the requester, an admin or an
// approver), the message edited to say who decided, and the timeout.

// Button actions: "<verb>:<argument>", handed back by the adapters.
const (
	actionApprove = "approve"
	actionDeny    = "deny"
	actionAlways  = "always"
	actionStop    = "stop"
	actionRetry   = "retry"
)

// approvalRef is the outbox ref of an approval's message.
func approvalRef(key string) string { return "approval:" + key }

// approvalMsgs are the messages of job j, as it stands before the park,
// parking at a: the park opens wait j.WaitSeq+1 (core.JobStore.FinishJob).
func (s *Service) approvalMsgs(j core.Job, a core.Approval) []core.OutboxMessage {
	key := core.ApprovalKey(j.ID, j.WaitSeq+1)
	timeout := a.Deadline.Sub(a.CreatedAt).Round(time.Minute).String()
	text := s.say("approval_ask", "tool", a.Tool, "rule", a.Rule, "preview", fence(a.Preview), "timeout", timeout)
	if a.Tool == engine.EgressTool {
		text = s.say("approval_ask_egress", "host", "`"+a.Subject+"`", "rule", a.Rule, "preview", fence(a.Preview), "timeout", timeout)
	}
	buttons := []Button{
		{Action: actionApprove + ":" + key, Label: s.say("button_approve"), Style: StylePrimary},
		{Action: actionDeny + ":" + key, Label: s.say("button_deny"), Style: StyleDanger},
		{Action: actionAlways + ":" + key, Label: s.say("button_always")},
	}
	return []core.OutboxMessage{
		{Kind: core.OutboxUpdate, Ref: approvalRef(key), Payload: Payload{Text: text, Buttons: buttons}.Encode()},
		s.runningMsg(j.ID, s.say("waiting_approval", "tool", a.Tool)), // Stop still ends it
	}
}

// fence puts text in a code block that nothing in it can close.
func fence(text string) string {
	return "```\n" + strings.ReplaceAll(text, "```", "`\u200b``") + "\n```"
}

// HandleAction runs a button click. The Reply, when not empty, is for the
// person who clicked alone (a refusal, a note that nothing changed).
func (s *Service) HandleAction(ctx context.Context, a Action) (Reply, error) {
	if a.Author.Bot {
		return Reply{}, nil
	}
	if !s.allowed(a.Author, a.Channel) {
		return Reply{Text: s.say("not_allowed")}, nil
	}
	verb, arg, _ := strings.Cut(a.Value, ":")
	switch verb {
	case actionApprove, actionDeny, actionAlways:
		jobID, waitSeq, ok := core.ParseApprovalKey(arg)
		if !ok {
			return Reply{Text: s.say("approval_unknown")}, nil
		}
		return s.decide(ctx, a.Thread, jobID, waitSeq, core.Verdict(verb), a.Author, "")
	case actionStop, actionRetry:
		jobID, err := strconv.ParseInt(arg, 10, 64)
		if err != nil {
			return Reply{Text: s.say("action_unknown")}, nil
		}
		j, err := s.store.Job(ctx, jobID)
		if errors.Is(err, core.ErrNotFound) {
			return Reply{Text: s.say("action_unknown")}, nil
		}
		if err != nil {
			return Reply{}, err
		}
		task, err := s.store.Task(ctx, j.TaskID)
		if err != nil {
			return Reply{}, err
		}
		if task.Thread != a.Thread {
			return Reply{Text: s.say("action_unknown")}, nil // a button of another thread
		}
		if verb == actionStop {
			if j.State.Terminal() {
				return Reply{Text: s.say("no_active_job")}, nil
			}
			return s.abort(ctx, task, a.Author)
		}
		r, err := s.retry(ctx, task, a.Author)
		if err != nil {
			return Reply{}, err
		}
		return s.publish(ctx, task, r), nil
	}
	return Reply{Text: s.say("action_unknown")}, nil
}

// approvalHome is the task whose thread shows the approvals of task
// taskID's jobs: the task itself, or a subtask's parent.
func (s *Service) approvalHome(ctx context.Context, taskID int64) (core.Task, error) {
	t, err := s.store.Task(ctx, taskID)
	if err != nil || t.ParentTaskID == 0 {
		return t, err
	}
	return s.store.Task(ctx, t.ParentTaskID)
}

// approveCommand runs `!approve [reason]` and `!deny [reason]` in a
// thread: the decision on the oldest pending approval shown there (its
// task's, or one of its subtasks').
func (s *Service) approveCommand(ctx context.Context, task core.Task, v core.Verdict, who Author, reason string) (Reply, error) {
	if task.ID == 0 {
		return Reply{Text: s.say("no_task")}, nil
	}
	pending, err := s.store.PendingApprovals(ctx, 0)
	if err != nil {
		return Reply{}, err
	}
	for _, a := range pending {
		if a.TaskID != task.ID {
			home, err := s.approvalHome(ctx, a.TaskID)
			if err != nil || home.ID != task.ID {
				continue
			}
		}
		return s.decide(ctx, task.Thread, a.JobID, a.WaitSeq, v, who, reason)
	}
	return Reply{Text: s.say("approval_none")}, nil
}

// mayDecide reports whether who may decide approvals of task: its
// requester, an admin, or one of approvals.approvers.
func (s *Service) mayDecide(task core.Task, who Author) bool {
	return task.OwnerUser == who.ID || s.isAdmin(who) || matches(s.cfg.Access.Approvers, who)
}

// decide records who's verdict on the approval of job jobID's wait
// waitSeq, asked in thread, and resumes the job. A decision that finds
// the approval decided already changes nothing and says so to who alone.
func (s *Service) decide(ctx context.Context, thread core.ThreadRef, jobID, waitSeq int64, v core.Verdict, who Author, reason string) (Reply, error) {
	a, err := s.store.Approval(ctx, jobID, waitSeq)
	if errors.Is(err, core.ErrNotFound) {
		return Reply{Text: s.say("approval_unknown")}, nil
	}
	if err != nil {
		return Reply{}, err
	}
	task, err := s.approvalHome(ctx, a.TaskID)
	if err != nil {
		return Reply{}, err
	}
	if task.Thread != thread {
		return Reply{Text: s.say("approval_unknown")}, nil // a button of another thread
	}
	if a.State != core.ApprovalPending {
		return Reply{Text: s.say("approval_decided", "who", s.decider(a.DecidedBy), "state", string(a.State))}, nil
	}
	if !s.mayDecide(task, who) {
		return Reply{Text: s.say("not_allowed_approve")}, nil
	}
	return s.record(ctx, a, v, who.ID, mention(who), reason)
}

// record writes a decision on a: the approval message edited to say who
// decided (its buttons removed), the always-allow rule, and the job
// resumed.
func (s *Service) record(ctx context.Context, a core.Approval, v core.Verdict, by, byName, reason string) (Reply, error) {
	key := a.Key()
	var text string
	switch {
	case by == core.DecidedByTimeout:
		text = s.say("approval_timed_out", "tool", a.Tool, "timeout", a.Deadline.Sub(a.CreatedAt).Round(time.Minute).String())
	case v == core.VerdictApprove:
		text = s.say("approval_approved", "tool", a.Tool, "who", byName)
	case v == core.VerdictAlways:
		text = s.say("approval_always", "tool", a.Tool, "who", byName)
	default:
		text = s.say("approval_denied", "tool", a.Tool, "who", byName)
	}
	if r := strings.TrimSpace(reason); r != "" {
		text += " " + s.say("approval_reason", "reason", chattext.NeutralizeName(r, chattext.Plain))
	}
	text += "\n" + fence(a.Preview)
	home, err := s.approvalHome(ctx, a.TaskID)
	if err != nil {
		return Reply{}, err
	}
	d := core.ApprovalDecision{
		JobID: a.JobID, WaitSeq: a.WaitSeq, Verdict: v, By: by, Reason: reason, At: s.cfg.Now(),
		Outbox: []core.OutboxMessage{{TaskID: home.ID, JobID: a.JobID, Kind: core.OutboxUpdate, Ref: approvalRef(key), Payload: Payload{Text: text}.Encode()}},
	}
	if v == core.VerdictAlways {
		d.Rule = &core.AllowRule{Channel: a.Channel, Tool: a.Tool, Pattern: policy.AlwaysPattern(a.Subject), CreatedBy: by}
	}
	_, j, err := s.store.DecideApproval(ctx, d)
	if errors.Is(err, core.ErrDecided) {
		// Another decision came first: say whose, as it stands now.
		now, rerr := s.store.Approval(ctx, a.JobID, a.WaitSeq)
		if rerr != nil {
			return Reply{}, rerr
		}
		return Reply{Text: s.say("approval_decided", "who", s.decider(now.DecidedBy), "state", string(now.State))}, nil
	}
	if err != nil {
		return Reply{}, err
	}
	s.cfg.Kick()
	if err := s.dispatch.Resumed(ctx, j.ID, a.WaitSeq); err != nil {
		s.log.Warn("the decided job waits in the store until the queue answers", "job", j.ID, "err", err)
	}
	return Reply{}, nil
}

// approvalAborted edits the approval message of job j, which waited for
// it and was stopped by who: its buttons go, nothing ran.
func (s *Service) approvalAborted(ctx context.Context, j core.Job, who Author) core.OutboxMessage {
	a, err := s.store.Approval(ctx, j.ID, j.WaitSeq)
	if err != nil {
		s.log.Warn("the approval of a stopped job was not found", "job", j.ID, "err", err)
		return core.OutboxMessage{}
	}
	text := s.say("approval_stopped", "tool", a.Tool, "who", mention(who)) + "\n" + fence(a.Preview)
	return core.OutboxMessage{Kind: core.OutboxUpdate, Ref: approvalRef(a.Key()), Payload: Payload{Text: text}.Encode()}
}

// decider names who decided an approval.
func (s *Service) decider(by string) string {
	if by == core.DecidedByTimeout || by == "" {
		return s.say("approval_nobody")
	}
	return mentionID(by)
}

// ExpireApprovals denies the approvals nobody decided before their
// deadline, up to limit of them, and reports how many it denied. Run it
// now and then wherever the service runs.
func (s *Service) ExpireApprovals(ctx context.Context, limit int) (int, error) {
	expired, err := s.store.ExpiredApprovals(ctx, s.cfg.Now(), limit)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, a := range expired {
		if _, err := s.record(ctx, a, core.VerdictDeny, core.DecidedByTimeout, "", ""); err != nil {
			errs = append(errs, fmt.Errorf("approval %s: %w", a.Key(), err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// RunExpiry runs ExpireApprovals every interval until ctx ends.
func (s *Service) RunExpiry(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := s.ExpireApprovals(ctx, 100); err != nil && ctx.Err() == nil {
			s.log.Warn("denying expired approvals failed", "err", err)
		} else if n > 0 {
			s.log.Info("approvals denied: nobody decided in time", "n", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// policyCommand runs `policy` (the channel's stored always-allow rules,
// numbered) and `policy revoke N` (admins only).
func (s *Service) policyCommand(ctx context.Context, c Command) (Reply, error) {
	f := strings.Fields(c.Args)
	if len(f) >= 1 && f[0] == "revoke" {
		if !s.isAdmin(c.Author) {
			return Reply{Text: s.say("not_allowed_revoke")}, nil
		}
		if len(f) != 2 {
			return Reply{Text: s.say("policy_revoke_usage")}, nil
		}
		id, err := strconv.ParseInt(strings.TrimPrefix(f[1], "#"), 10, 64)
		if err != nil {
			return Reply{Text: s.say("policy_revoke_usage")}, nil
		}
		err = s.store.RevokeAllowRule(ctx, c.Channel, id)
		if errors.Is(err, core.ErrNotFound) {
			return Reply{Text: s.say("policy_no_rule", "n", strconv.FormatInt(id, 10))}, nil
		}
		if err != nil {
			return Reply{}, err
		}
		return Reply{Text: s.say("policy_revoked", "n", strconv.FormatInt(id, 10))}, nil
	}
	rules, err := s.store.AllowRules(ctx, c.Channel)
	if err != nil {
		return Reply{}, err
	}
	if len(rules) == 0 {
		return Reply{Text: s.say("policy_none")}, nil
	}
	lines := []string{s.say("policy_header")}
	for _, r := range rules {
		lines = append(lines, s.say("policy_line", "n", strconv.FormatInt(r.ID, 10), "tool", r.Tool,
			"pattern", "`"+strings.ReplaceAll(patternText(r.Pattern), "`", "'")+"`", "who", mentionID(r.CreatedBy)))
	}
	return Reply{Text: strings.Join(lines, "\n")}, nil
}

// patternText shows a stored pattern as people wrote it: the exact
// subject of an "always allow" (policy.AlwaysPattern), else the pattern.
func patternText(p string) string {
	inner, ok := strings.CutPrefix(p, "^")
	if inner, ok2 := strings.CutSuffix(inner, "$"); ok && ok2 {
		var b strings.Builder
		for i := 0; i < len(inner); i++ {
			if inner[i] == '\\' && i+1 < len(inner) {
				i++
			}
			b.WriteByte(inner[i])
		}
		if policy.AlwaysPattern(b.String()) == p {
			return b.String()
		}
	}
	return p
}
