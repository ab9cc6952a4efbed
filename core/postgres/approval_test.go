package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/google/go-cmp/cmp"
)

// TestApprovalDecidedOnce: of concurrent decisions on one approval,
// exactly one passes; it requeues the job under its wait, stores its
// rule and outbox, and the others fail with ErrDecided and write
// nothing.
func TestApprovalDecidedOnce(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	j := reach(t, s, core.JobRunning)
	deadline := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	parked, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobWaitingApproval, ResumeMovement: "deploy", Checkpoint: `{"call":1}`,
		Approval: &core.Approval{Tool: "Bash", Subject: "make deploy", Channel: "slack:C1", Rule: "ask deploys", Deadline: deadline}})
	if err != nil {
		t.Fatal(err)
	}
	pending, err := s.Approval(ctx, j.ID, parked.WaitSeq)
	if err != nil {
		t.Fatal(err)
	}
	want := core.Approval{ID: pending.ID, JobID: j.ID, TaskID: j.TaskID, WaitSeq: 1, Tool: "Bash", Subject: "make deploy",
		Channel: "slack:C1", Rule: "ask deploys", State: core.ApprovalPending, CreatedAt: pending.CreatedAt, Deadline: deadline}
	if diff := cmp.Diff(want, pending); diff != "" {
		t.Errorf("pending approval (-want +got):\n%s", diff)
	}
	if list, err := s.PendingApprovals(ctx, j.TaskID); err != nil || len(list) != 1 || list[0].ID != pending.ID {
		t.Errorf("PendingApprovals = %+v, %v", list, err)
	}
	if list, err := s.ExpiredApprovals(ctx, deadline.Add(time.Second), 10); err != nil || len(list) != 1 {
		t.Errorf("ExpiredApprovals past the deadline = %+v, %v; want the one", list, err)
	}
	if list, _ := s.ExpiredApprovals(ctx, deadline, 10); len(list) != 0 {
		t.Errorf("ExpiredApprovals at the deadline = %+v; want none", list)
	}

	const n = 8
	errs := make([]error, n)
	decided := make([]core.Approval, n)
	together(n, func(i int) {
		d := core.ApprovalDecision{JobID: j.ID, WaitSeq: 1, Verdict: core.VerdictAlways, By: "slack:U1",
			Rule:   &core.AllowRule{Channel: "slack:C1", Tool: "Bash", Pattern: "^make deploy$", CreatedBy: "slack:U1"},
			Outbox: []core.OutboxMessage{{Kind: core.OutboxUpdate, Ref: "approval", Payload: "{}"}}}
		if i%2 == 1 {
			d.Verdict, d.Rule = core.VerdictDeny, nil
		}
		decided[i], _, errs[i] = s.DecideApproval(ctx, d)
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("decisions %d and %d both passed", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, core.ErrDecided):
			t.Errorf("decision %d: %v, want ErrDecided", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no decision passed")
	}
	stored, err := s.ApprovalByID(ctx, pending.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(decided[winner], stored); diff != "" {
		t.Errorf("returned approval differs from the stored one (-returned +stored):\n%s", diff)
	}
	wantState, wantRules := core.ApprovalApproved, 1
	if winner%2 == 1 {
		wantState, wantRules = core.ApprovalDenied, 0
	}
	if stored.State != wantState || stored.DecidedBy != "slack:U1" || stored.DecidedAt.IsZero() {
		t.Errorf("decided approval = %+v; want %s by slack:U1", stored, wantState)
	}
	if rules, err := s.AllowRules(ctx, "slack:C1"); err != nil || len(rules) != wantRules {
		t.Errorf("rules = %+v, %v; want %d", rules, err, wantRules)
	}
	if got := countRows(t, s, `SELECT COUNT(*) FROM outbox WHERE task_id = $1 AND ref = 'approval'`, j.TaskID); got != 1 {
		t.Errorf("%d decision messages, want 1", got)
	}
	got := mustJob(t, s, j.ID)
	if got.State != core.JobQueued || got.WaitSeq != 1 {
		t.Errorf("job after the decision = %s wait %d; want queued at wait 1", got.State, got.WaitSeq)
	}
	wantEvents := []string{core.EventCreated, core.EventClaimed, core.EventApprovalAsked, core.EventParked,
		core.EventApprovalDecided, core.EventResumed}
	if diff := cmp.Diff(wantEvents, eventKinds(t, s, j.ID)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// The resumed attempt takes the checkpoint, once.
	if _, err := s.StartJob(ctx, j.ID, 2); err != nil {
		t.Fatal(err)
	}
	if cp, err := s.TakeCheckpoint(ctx, j.ID, 2); err != nil || cp != `{"call":1}` {
		t.Errorf("TakeCheckpoint = %q, %v", cp, err)
	}
	if cp, err := s.TakeCheckpoint(ctx, j.ID, 2); err != nil || cp != "" {
		t.Errorf("second TakeCheckpoint = %q, %v; want none", cp, err)
	}
	if _, _, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: j.ID, WaitSeq: 7, Verdict: core.VerdictApprove}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("decision on no approval: %v, want ErrNotFound", err)
	}
	if _, _, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: 999999, WaitSeq: 1, Verdict: core.VerdictApprove}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("decision on a missing job: %v, want ErrNotFound", err)
	}
}

// TestApprovalOfAbortedJob: aborting a job that waits for an approval
// denies it; a decision after that fails with ErrDecided.
func TestApprovalOfAbortedJob(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	j := reach(t, s, core.JobWaitingApproval)
	if _, err := s.RequestAbort(ctx, j.ID, "slack:U2"); err != nil {
		t.Fatal(err)
	}
	a, err := s.Approval(ctx, j.ID, j.WaitSeq)
	if err != nil || a.State != core.ApprovalDenied || a.DecidedBy != "slack:U2" || a.Reason != "aborted" {
		t.Errorf("approval of the aborted job = %+v, %v; want denied by slack:U2 (aborted)", a, err)
	}
	if _, _, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: j.ID, WaitSeq: j.WaitSeq, Verdict: core.VerdictApprove, By: "slack:U1"}); !errors.Is(err, core.ErrDecided) {
		t.Errorf("decision after the abort: %v, want ErrDecided", err)
	}
	if got := mustJob(t, s, j.ID); got.State != core.JobAborted {
		t.Errorf("job = %s, want aborted", got.State)
	}
	if list, _ := s.PendingApprovals(ctx, 0); len(list) != 0 {
		t.Errorf("pending approvals = %+v, want none", list)
	}
}

func TestAllowRules(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	j := reach(t, s, core.JobWaitingApproval)
	rule := &core.AllowRule{Channel: "slack:C1", Tool: "Bash", Pattern: "^ls", CreatedBy: "slack:U1"}
	if _, _, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: j.ID, WaitSeq: j.WaitSeq, Verdict: core.VerdictAlways, By: "slack:U1", Rule: rule}); err != nil {
		t.Fatal(err)
	}
	rules, err := s.AllowRules(ctx, "slack:C1")
	if err != nil || len(rules) != 1 {
		t.Fatalf("AllowRules = %+v, %v", rules, err)
	}
	if r := rules[0]; r.Tool != "Bash" || r.Pattern != "^ls" || r.CreatedBy != "slack:U1" || r.CreatedAt.IsZero() {
		t.Errorf("rule = %+v", r)
	}
	if err := s.RevokeAllowRule(ctx, "slack:C2", rules[0].ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("revoking another channel's rule: %v, want ErrNotFound", err)
	}
	if err := s.RevokeAllowRule(ctx, "slack:C1", rules[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeAllowRule(ctx, "slack:C1", rules[0].ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("revoking a rule twice: %v, want ErrNotFound", err)
	}
}
