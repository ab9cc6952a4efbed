package storetest

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

// deadline is a whole second, so that every store keeps it exactly.
var deadline = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// parkOn creates a job on task taskID, runs it under attempt 1 and parks
// it waiting for approval of a, leaving checkpoint to resume from.
func parkOn(t *testing.T, s core.Store, taskID int64, a core.Approval, checkpoint string) core.Job {
	t.Helper()
	ctx := t.Context()
	j, err := s.CreateJob(ctx, core.Job{TaskID: taskID, Piece: "coding", Instruction: "deploy it"})
	if err != nil {
		t.Fatalf("CreateJob: %v", err)
	}
	if _, err := s.StartJob(ctx, j.ID, 1); err != nil {
		t.Fatalf("StartJob: %v", err)
	}
	parked, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobWaitingApproval, ResumeMovement: "implement", Approval: &a, Checkpoint: checkpoint})
	if err != nil {
		t.Fatalf("FinishJob to waiting_approval: %v", err)
	}
	return parked
}

// park parks a job of a fresh task (see parkOn).
func park(t *testing.T, s core.Store, a core.Approval, checkpoint string) core.Job {
	t.Helper()
	return parkOn(t, s, newTask(t, s).ID, a, checkpoint)
}

func mustApproval(t *testing.T, s core.Store, jobID, waitSeq int64) core.Approval {
	t.Helper()
	a, err := s.Approval(t.Context(), jobID, waitSeq)
	if err != nil {
		t.Fatalf("Approval(%d, %d): %v", jobID, waitSeq, err)
	}
	return a
}

// testApprovalPark: a park with an approval stores it pending, under the
// job's new wait, as given; a park for approval without one is refused.
func testApprovalPark(t *testing.T, s core.Store) {
	ctx := t.Context()
	before := time.Now().Add(-time.Second)
	in := core.Approval{Tool: "Bash", Arguments: `{"command":"make deploy"}`, CallID: "call_1", Subject: "make deploy",
		Preview: "$ make deploy", Channel: "slack:C1", Requester: "slack:U1", Rule: "ask: deploys", Deadline: deadline}
	task := newTask(t, s)
	j, err := s.CreateJob(ctx, core.Job{TaskID: task.ID, Piece: "coding"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartJob(ctx, j.ID, 1); err != nil {
		t.Fatal(err)
	}
	running := mustJob(t, s, j.ID)
	events := eventKinds(t, s, j.ID)
	if _, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobWaitingApproval, ResumeMovement: "implement"}); err == nil {
		t.Error("a park for approval without an approval succeeded")
	}
	if d := diff(running, mustJob(t, s, j.ID)); d != "" {
		t.Errorf("the refused park changed the job (want before, got after):\n%s", d)
	}

	parked, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobWaitingApproval, ResumeMovement: "implement", Approval: &in, Checkpoint: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	if parked.State != core.JobWaitingApproval || parked.WaitSeq != running.WaitSeq+1 || parked.ResumeMovement != "implement" {
		t.Errorf("parked = %+v; want waiting_approval under the next wait, resuming at implement", parked)
	}
	got := mustApproval(t, s, j.ID, parked.WaitSeq)
	want := in
	want.ID, want.JobID, want.TaskID, want.WaitSeq, want.State, want.CreatedAt = got.ID, j.ID, task.ID, parked.WaitSeq, core.ApprovalPending, got.CreatedAt
	if d := diff(want, got); d != "" {
		t.Errorf("stored approval:\n%s", d)
	}
	if got.ID == 0 || got.CreatedAt.Before(before) || !got.DecidedAt.IsZero() {
		t.Errorf("approval id %d, created %v, decided %v; want an id, a recent creation, no decision", got.ID, got.CreatedAt, got.DecidedAt)
	}
	byID, err := s.ApprovalByID(ctx, got.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(got, byID); d != "" {
		t.Errorf("ApprovalByID:\n%s", d)
	}
	kinds := eventKinds(t, s, j.ID)[len(events):]
	if !slices.Contains(kinds, core.EventApprovalAsked) || !slices.Contains(kinds, core.EventParked) {
		t.Errorf("events of the park = %v; want %s and %s", kinds, core.EventApprovalAsked, core.EventParked)
	}
	if _, err := s.Approval(ctx, j.ID, parked.WaitSeq+1); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("Approval of a wait that never was: %v, want ErrNotFound", err)
	}
	if _, err := s.Approval(ctx, 999999, 1); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("Approval of a missing job: %v, want ErrNotFound", err)
	}
	if _, err := s.ApprovalByID(ctx, 999999); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("ApprovalByID(999999): %v, want ErrNotFound", err)
	}
}

// testPendingAndExpiredApprovals lists pending approvals by task and
// those past their deadline, oldest first; a decided one is in neither.
func testPendingAndExpiredApprovals(t *testing.T, s core.Store) {
	ctx := t.Context()
	taskA, taskB := newTask(t, s), newTask(t, s)
	// Created in deadline order, so that oldest first means one order.
	jobs := []core.Job{
		parkOn(t, s, taskA.ID, core.Approval{Tool: "Bash", Subject: "one", Deadline: deadline}, ""),
		parkOn(t, s, taskB.ID, core.Approval{Tool: "Bash", Subject: "two", Deadline: deadline.Add(time.Hour)}, ""),
		parkOn(t, s, taskA.ID, core.Approval{Tool: "Bash", Subject: "three", Deadline: deadline.Add(2 * time.Hour)}, ""),
	}
	var all []core.Approval
	for _, j := range jobs {
		all = append(all, mustApproval(t, s, j.ID, j.WaitSeq))
	}
	subjects := func(as []core.Approval, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, a := range as {
			out = append(out, a.Subject)
		}
		return out
	}
	pending, err := s.PendingApprovals(ctx, 0)
	if d := diff(all, pending); err != nil || d != "" {
		t.Errorf("PendingApprovals(0) (%v):\n%s", err, d)
	}
	later := deadline.Add(3 * time.Hour)
	for _, tc := range []struct {
		name string
		got  []string
		want []string
	}{
		{"pending of task A", subjects(s.PendingApprovals(ctx, taskA.ID)), []string{"one", "three"}},
		{"pending of task B", subjects(s.PendingApprovals(ctx, taskB.ID)), []string{"two"}},
		{"pending of a task without any", subjects(s.PendingApprovals(ctx, 999999)), []string{}},
		{"expired at a deadline: not before it", subjects(s.ExpiredApprovals(ctx, deadline, 10)), []string{}},
		{"expired a second after the first deadline", subjects(s.ExpiredApprovals(ctx, deadline.Add(time.Second), 10)), []string{"one"}},
		{"expired after every deadline", subjects(s.ExpiredApprovals(ctx, later, 10)), []string{"one", "two", "three"}},
		{"expired, limited", subjects(s.ExpiredApprovals(ctx, later, 2)), []string{"one", "two"}},
	} {
		if d := diff(tc.want, tc.got); d != "" {
			t.Errorf("%s:\n%s", tc.name, d)
		}
	}
	expired, err := s.ExpiredApprovals(ctx, later, 10)
	if d := diff(all, expired); err != nil || d != "" {
		t.Errorf("ExpiredApprovals (%v):\n%s", err, d)
	}

	if _, _, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: jobs[1].ID, WaitSeq: jobs[1].WaitSeq,
		Verdict: core.VerdictDeny, By: core.DecidedByTimeout, At: later}); err != nil {
		t.Fatal(err)
	}
	if d := diff([]string{"one", "three"}, subjects(s.PendingApprovals(ctx, 0))); d != "" {
		t.Errorf("pending after a decision:\n%s", d)
	}
	if d := diff([]string{"one", "three"}, subjects(s.ExpiredApprovals(ctx, later, 10))); d != "" {
		t.Errorf("expired after a decision:\n%s", d)
	}
}

// testDecideApproval: one decision resumes the job (queued, its wait
// kept) with its outbox messages and an event; any later decision of
// that wait fails with ErrDecided and changes nothing.
func testDecideApproval(t *testing.T, s core.Store) {
	ctx := t.Context()
	at := deadline.Add(-time.Hour)
	j := park(t, s, core.Approval{Tool: "Bash", Subject: "make deploy", Channel: "slack:C1", Deadline: deadline}, "{}")
	pending := mustApproval(t, s, j.ID, j.WaitSeq)
	events := eventKinds(t, s, j.ID)
	note := core.OutboxMessage{TaskID: j.TaskID, JobID: j.ID, Kind: core.OutboxUpdate, Ref: "approval", Payload: "approved by U2"}

	decided, resumed, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: j.ID, WaitSeq: j.WaitSeq,
		Verdict: core.VerdictApprove, By: "slack:U2", Reason: "looks fine", At: at, Outbox: []core.OutboxMessage{note}})
	if err != nil {
		t.Fatal(err)
	}
	want := pending
	want.State, want.DecidedBy, want.Reason, want.DecidedAt = core.ApprovalApproved, "slack:U2", "looks fine", at
	if d := diff(want, decided); d != "" {
		t.Errorf("decided approval:\n%s", d)
	}
	if !decided.Approved() {
		t.Error("an approved approval does not report Approved")
	}
	if d := diff(decided, mustApproval(t, s, j.ID, j.WaitSeq)); d != "" {
		t.Errorf("stored approval differs from the returned one (want returned, got stored):\n%s", d)
	}
	wantJob := j
	wantJob.State = core.JobQueued
	if d := diff(withoutTimes(wantJob), withoutTimes(resumed)); d != "" {
		t.Errorf("resumed job:\n%s", d)
	}
	if d := diff(resumed, mustJob(t, s, j.ID)); d != "" {
		t.Errorf("stored job differs from the returned one (want returned, got stored):\n%s", d)
	}
	if kinds := eventKinds(t, s, j.ID)[len(events):]; !slices.Contains(kinds, core.EventApprovalDecided) {
		t.Errorf("events of the decision = %v; want %s", kinds, core.EventApprovalDecided)
	}
	events = eventKinds(t, s, j.ID)

	// A second decision (a second click, someone else) changes nothing.
	_, _, err = s.DecideApproval(ctx, core.ApprovalDecision{JobID: j.ID, WaitSeq: j.WaitSeq,
		Verdict: core.VerdictDeny, By: "slack:U3", At: at, Outbox: []core.OutboxMessage{note}})
	if !errors.Is(err, core.ErrDecided) {
		t.Errorf("second decision: %v, want ErrDecided", err)
	}
	if d := diff(decided, mustApproval(t, s, j.ID, j.WaitSeq)); d != "" {
		t.Errorf("the second decision changed the approval (want before, got after):\n%s", d)
	}
	if d := diff(resumed, mustJob(t, s, j.ID)); d != "" {
		t.Errorf("the second decision changed the job (want before, got after):\n%s", d)
	}
	if d := diff(events, eventKinds(t, s, j.ID)); d != "" {
		t.Errorf("the second decision changed the events (want before, got after):\n%s", d)
	}
	msgs := outboxWhere(t, s, func(m core.OutboxMessage) bool { return m.TaskID == j.TaskID }, bySeq)
	if len(msgs) != 1 || msgs[0].Payload != note.Payload || msgs[0].Ref != "approval" || msgs[0].Kind != core.OutboxUpdate {
		t.Errorf("outbox = %+v; want the first decision's one message", msgs)
	}

	for name, d := range map[string]core.ApprovalDecision{
		"a wait without an approval": {JobID: j.ID, WaitSeq: j.WaitSeq + 1, Verdict: core.VerdictApprove, By: "slack:U2"},
		"a missing job":              {JobID: 999999, WaitSeq: 1, Verdict: core.VerdictApprove, By: "slack:U2"},
	} {
		if _, _, err := s.DecideApproval(ctx, d); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("DecideApproval on %s: %v, want ErrNotFound", name, err)
		}
	}

	// Denied: the job resumes too, to hear that the call may not run.
	k := park(t, s, core.Approval{Tool: "Write", Subject: "/etc/passwd", Deadline: deadline}, "{}")
	denied, resumed, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: k.ID, WaitSeq: k.WaitSeq, Verdict: core.VerdictDeny, By: "slack:U2", At: at})
	if err != nil {
		t.Fatal(err)
	}
	if denied.State != core.ApprovalDenied || denied.Approved() || resumed.State != core.JobQueued || resumed.WaitSeq != k.WaitSeq {
		t.Errorf("denied = %+v, job %+v; want denied, the job queued under its wait", denied, resumed)
	}

	// The job parks again for another call: the old wait's decision is
	// refused, the new wait's taken.
	if _, err := s.StartJob(ctx, k.ID, k.Attempt+1); err != nil {
		t.Fatal(err)
	}
	again, err := s.FinishJob(ctx, k.ID, k.Attempt+1, core.Finish{To: core.JobWaitingApproval, ResumeMovement: "implement",
		Approval: &core.Approval{Tool: "Write", Subject: "/tmp/x", Deadline: deadline}})
	if err != nil {
		t.Fatal(err)
	}
	if again.WaitSeq != k.WaitSeq+1 {
		t.Fatalf("second park under wait %d, want %d", again.WaitSeq, k.WaitSeq+1)
	}
	if _, _, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: k.ID, WaitSeq: k.WaitSeq, Verdict: core.VerdictApprove, By: "slack:U2"}); !errors.Is(err, core.ErrDecided) {
		t.Errorf("deciding the old wait: %v, want ErrDecided", err)
	}
	if got := mustJob(t, s, k.ID); got.State != core.JobWaitingApproval {
		t.Errorf("deciding the old wait moved the job to %s", got.State)
	}
	if _, got, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: k.ID, WaitSeq: again.WaitSeq, Verdict: core.VerdictApprove, By: "slack:U2"}); err != nil || got.State != core.JobQueued {
		t.Errorf("deciding the new wait = %s, %v; want queued", got.State, err)
	}
}

// testAbortDeniesApproval: an aborted job no longer waits for its
// approval: nobody may decide it, and it is no longer pending.
func testAbortDeniesApproval(t *testing.T, s core.Store) {
	ctx := t.Context()
	j := park(t, s, core.Approval{Tool: "Bash", Subject: "make deploy", Deadline: deadline}, "{}")
	aborted, err := s.RequestAbort(ctx, j.ID, "slack:U3")
	if err != nil || aborted.State != core.JobAborted {
		t.Fatalf("RequestAbort = %s, %v; want aborted", aborted.State, err)
	}
	if _, _, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: j.ID, WaitSeq: j.WaitSeq, Verdict: core.VerdictApprove, By: "slack:U2"}); !errors.Is(err, core.ErrDecided) {
		t.Errorf("deciding the approval of an aborted job: %v, want ErrDecided", err)
	}
	if d := diff(aborted, mustJob(t, s, j.ID)); d != "" {
		t.Errorf("the refused decision changed the job (want before, got after):\n%s", d)
	}
	if a := mustApproval(t, s, j.ID, j.WaitSeq); a.State == core.ApprovalPending || a.Approved() {
		t.Errorf("approval of the aborted job = %+v; want decided, not approved", a)
	}
	if got, err := s.PendingApprovals(ctx, 0); err != nil || len(got) != 0 {
		t.Errorf("PendingApprovals = %+v, %v; want none", got, err)
	}
	if got, err := s.ExpiredApprovals(ctx, deadline.Add(time.Hour), 10); err != nil || len(got) != 0 {
		t.Errorf("ExpiredApprovals = %+v, %v; want none", got, err)
	}
}

// testAllowRules: "always" stores its rule with the decision, per
// channel, oldest first; a refused decision stores none; a rule is
// revoked in its own channel only.
func testAllowRules(t *testing.T, s core.Store) {
	ctx := t.Context()
	always := func(subject, pattern string) (core.Job, error) {
		t.Helper()
		j := park(t, s, core.Approval{Tool: "Bash", Subject: subject, Channel: "slack:C1", Deadline: deadline}, "")
		_, _, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: j.ID, WaitSeq: j.WaitSeq, Verdict: core.VerdictAlways,
			By: "slack:U2", Rule: &core.AllowRule{Channel: "slack:C1", Tool: "Bash", Pattern: pattern, CreatedBy: "slack:U2"}})
		return j, err
	}
	rules := func(channel string) []core.AllowRule {
		t.Helper()
		rs, err := s.AllowRules(ctx, channel)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.ID == 0 || r.CreatedAt.IsZero() {
				t.Errorf("rule %+v has no id or creation time", r)
			}
		}
		return rs
	}
	patterns := func(rs []core.AllowRule) []string {
		out := []string{}
		for _, r := range rs {
			out = append(out, r.Pattern)
		}
		return out
	}
	if got := rules("slack:C1"); len(got) != 0 {
		t.Fatalf("rules of a new store = %+v", got)
	}
	first, err := always("make deploy", "^make deploy$")
	if err != nil {
		t.Fatal(err)
	}
	if a := mustApproval(t, s, first.ID, first.WaitSeq); !a.Approved() {
		t.Errorf("an always verdict left the approval %s, want approved", a.State)
	}
	got := rules("slack:C1")
	if len(got) != 1 {
		t.Fatalf("rules = %+v, want one", got)
	}
	want := core.AllowRule{ID: got[0].ID, Channel: "slack:C1", Tool: "Bash", Pattern: "^make deploy$", CreatedBy: "slack:U2", CreatedAt: got[0].CreatedAt}
	if d := diff(want, got[0]); d != "" {
		t.Errorf("stored rule:\n%s", d)
	}
	if _, err := always("make test", "^make test$"); err != nil {
		t.Fatal(err)
	}
	if d := diff([]string{"^make deploy$", "^make test$"}, patterns(rules("slack:C1"))); d != "" {
		t.Errorf("rules, oldest first:\n%s", d)
	}
	if got := rules("slack:C2"); len(got) != 0 {
		t.Errorf("rules of another channel = %+v, want none", got)
	}

	// A decision refused stores no rule.
	if _, _, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: first.ID, WaitSeq: first.WaitSeq, Verdict: core.VerdictAlways,
		By: "slack:U3", Rule: &core.AllowRule{Channel: "slack:C1", Tool: "Bash", Pattern: "^rm -rf$", CreatedBy: "slack:U3"}}); !errors.Is(err, core.ErrDecided) {
		t.Errorf("second decision: %v, want ErrDecided", err)
	}
	if d := diff([]string{"^make deploy$", "^make test$"}, patterns(rules("slack:C1"))); d != "" {
		t.Errorf("rules after a refused decision:\n%s", d)
	}

	if err := s.RevokeAllowRule(ctx, "slack:C2", want.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("revoking another channel's rule: %v, want ErrNotFound", err)
	}
	if err := s.RevokeAllowRule(ctx, "slack:C1", want.ID); err != nil {
		t.Fatal(err)
	}
	if d := diff([]string{"^make test$"}, patterns(rules("slack:C1"))); d != "" {
		t.Errorf("rules after a revoke:\n%s", d)
	}
	for _, id := range []int64{want.ID, 999999} {
		if err := s.RevokeAllowRule(ctx, "slack:C1", id); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("revoking rule %d that is not there: %v, want ErrNotFound", id, err)
		}
	}
}

// testTakeCheckpoint: a parked movement's checkpoint is taken once, by
// the running attempt that resumed it; a later attempt finds none; a new
// park leaves a new one.
func testTakeCheckpoint(t *testing.T, s core.Store) {
	ctx := t.Context()
	const saved = `{"call":"call_1","step":3}`
	j := park(t, s, core.Approval{Tool: "Bash", Subject: "make deploy", Deadline: deadline}, saved)
	take := func(attempt int64) (string, error) {
		t.Helper()
		return s.TakeCheckpoint(ctx, j.ID, attempt)
	}
	if got, err := take(j.Attempt); !errors.Is(err, core.ErrStale) {
		t.Errorf("take while waiting = %q, %v; want ErrStale", got, err)
	}
	if _, _, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: j.ID, WaitSeq: j.WaitSeq, Verdict: core.VerdictApprove, By: "slack:U2"}); err != nil {
		t.Fatal(err)
	}
	if got, err := take(j.Attempt); !errors.Is(err, core.ErrStale) {
		t.Errorf("take while queued = %q, %v; want ErrStale", got, err)
	}
	if _, err := s.StartJob(ctx, j.ID, 2); err != nil {
		t.Fatal(err)
	}
	if got, err := take(1); !errors.Is(err, core.ErrStale) {
		t.Errorf("take by the old attempt = %q, %v; want ErrStale", got, err)
	}
	if got, err := take(2); err != nil || got != saved {
		t.Errorf("take by the resumed attempt = %q, %v; want %s", got, err, saved)
	}
	if got, err := take(2); err != nil || got != "" {
		t.Errorf("second take = %q, %v; want none", got, err)
	}
	if _, err := s.StartJob(ctx, j.ID, 3); err != nil { // attempt 2 lost its lease
		t.Fatal(err)
	}
	if got, err := take(3); err != nil || got != "" {
		t.Errorf("take by a later attempt = %q, %v; want none", got, err)
	}

	parked, err := s.FinishJob(ctx, j.ID, 3, core.Finish{To: core.JobWaitingApproval, ResumeMovement: "implement",
		Approval: &core.Approval{Tool: "Bash", Subject: "make deploy again", Deadline: deadline}, Checkpoint: `{"call":"call_2"}`})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: j.ID, WaitSeq: parked.WaitSeq, Verdict: core.VerdictApprove, By: "slack:U2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartJob(ctx, j.ID, 4); err != nil {
		t.Fatal(err)
	}
	if got, err := take(4); err != nil || got != `{"call":"call_2"}` {
		t.Errorf("take after the second park = %q, %v; want its checkpoint", got, err)
	}
	if _, err := s.TakeCheckpoint(ctx, 999999, 1); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("TakeCheckpoint of a missing job: %v, want ErrNotFound", err)
	}
}

// testCountJobs counts the jobs in every state, zero included.
func testCountJobs(t *testing.T, s core.Store) {
	counts, err := s.CountJobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := map[core.JobState]int64{}
	for _, st := range core.JobStates {
		want[st] = 0
	}
	if d := diff(want, counts); d != "" {
		t.Errorf("CountJobs of an empty store:\n%s", d)
	}
	for i, st := range core.JobStates {
		for range i + 1 {
			reach(t, s, st)
		}
		want[st] = int64(i + 1)
	}
	if counts, err = s.CountJobs(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d := diff(want, counts); d != "" {
		t.Errorf("CountJobs:\n%s", d)
	}
}

// testDecideApprovalConcurrent: of several decisions of one approval at
// once, exactly one is taken; the job resumes once, its message is
// written once.
func testDecideApprovalConcurrent(t *testing.T, s core.Store) {
	ctx := t.Context()
	for range 10 {
		j := park(t, s, core.Approval{Tool: "Bash", Subject: "make deploy", Deadline: deadline}, "{}")
		const deciders = 5
		var wg sync.WaitGroup
		var mu sync.Mutex
		taken := 0
		for i := range deciders {
			wg.Go(func() {
				v := core.VerdictApprove
				if i%2 == 1 {
					v = core.VerdictDeny
				}
				_, _, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: j.ID, WaitSeq: j.WaitSeq, Verdict: v, By: "slack:U" + strconv.Itoa(i),
					Outbox: []core.OutboxMessage{{TaskID: j.TaskID, JobID: j.ID, Kind: core.OutboxUpdate, Ref: "approval", Payload: "decided"}}})
				switch {
				case err == nil:
					mu.Lock()
					taken++
					mu.Unlock()
				case !errors.Is(err, core.ErrDecided):
					t.Errorf("DecideApproval: %v", err)
				}
			})
		}
		wg.Wait()
		if taken != 1 {
			t.Errorf("job %d: %d of %d decisions taken, want 1", j.ID, taken, deciders)
		}
		n := 0
		for _, k := range eventKinds(t, s, j.ID) {
			if k == core.EventApprovalDecided {
				n++
			}
		}
		if n != 1 {
			t.Errorf("job %d: %d %s events, want 1", j.ID, n, core.EventApprovalDecided)
		}
		if msgs := outboxWhere(t, s, func(m core.OutboxMessage) bool { return m.JobID == j.ID }, byID); len(msgs) != 1 {
			t.Errorf("job %d: %d decision messages, want 1", j.ID, len(msgs))
		}
		if got := mustJob(t, s, j.ID); got.State != core.JobQueued {
			t.Errorf("job %d is %s, want queued", j.ID, got.State)
		}
	}
}
