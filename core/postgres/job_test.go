package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/google/go-cmp/cmp"
)

// TestFencing: a claim under a newer attempt takes the job over, and the
// old attempt's writes then change nothing — not the job, its comments,
// its outbox or its history.
func TestFencing(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	j := newJob(t, s)
	if _, err := s.StartJob(ctx, j.ID, 1); err != nil {
		t.Fatal(err)
	}
	for _, stale := range []int64{0, 1} {
		if _, err := s.StartJob(ctx, j.ID, stale); !errors.Is(err, core.ErrStale) {
			t.Errorf("StartJob attempt %d on attempt 1: %v, want ErrStale", stale, err)
		}
	}
	if err := s.SaveProgress(ctx, j.ID, 1, core.Progress{Movement: "implement", MovementCount: 2}); err != nil {
		t.Fatal(err)
	}
	taken, err := s.StartJob(ctx, j.ID, 2, core.OutboxMessage{Kind: core.OutboxUpdate, Payload: `{"text":"working"}`})
	if err != nil {
		t.Fatal(err)
	}
	if taken.State != core.JobRunning || taken.Attempt != 2 || taken.Failures != 1 || taken.Movement != "implement" || !taken.QueuedAt.IsZero() {
		t.Errorf("taken over = %+v; want running at attempt 2, one failure, movement kept, QueuedAt unknown", taken)
	}
	events := []string{core.EventCreated, core.EventClaimed, core.EventLeaseLost, core.EventClaimed}
	if diff := cmp.Diff(events, eventKinds(t, s, j.ID)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	before := mustJob(t, s, j.ID)
	if err := s.SaveProgress(ctx, j.ID, 1, core.Progress{Movement: "review", Events: []core.JobEvent{{Kind: "x"}}}); !errors.Is(err, core.ErrStale) {
		t.Errorf("stale SaveProgress: %v, want ErrStale", err)
	}
	_, err = s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobSucceeded, ResultSummary: "stale answer",
		Comments: []core.Comment{{Role: core.RoleBot, Text: "stale answer"}},
		Outbox:   []core.OutboxMessage{{Kind: core.OutboxPost, Payload: "{}"}}})
	if !errors.Is(err, core.ErrStale) {
		t.Errorf("stale FinishJob: %v, want ErrStale", err)
	}
	if _, err := s.TakeCheckpoint(ctx, j.ID, 1); !errors.Is(err, core.ErrStale) {
		t.Errorf("stale TakeCheckpoint: %v, want ErrStale", err)
	}
	if diff := cmp.Diff(before, mustJob(t, s, j.ID)); diff != "" {
		t.Errorf("stale writes changed the job (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(events, eventKinds(t, s, j.ID)); diff != "" {
		t.Errorf("stale writes changed the events (-want +got):\n%s", diff)
	}
	if cs, _ := s.RecentComments(ctx, j.TaskID, 10); len(cs) != 0 {
		t.Errorf("stale finish stored comments: %+v", cs)
	}
	if n := countRows(t, s, `SELECT COUNT(*) FROM outbox WHERE job_id = $1`, j.ID); n != 1 {
		t.Errorf("outbox holds %d messages of the job, want the takeover's note only", n)
	}
	if err := s.SaveProgress(ctx, 999999, 1, core.Progress{}); !errors.Is(err, core.ErrNotFound) || errors.Is(err, core.ErrStale) {
		t.Errorf("SaveProgress on a missing job: %v, want ErrNotFound only", err)
	}

	done, err := s.FinishJob(ctx, j.ID, 2, core.Finish{To: core.JobSucceeded, ResultSummary: "done"})
	if err != nil || done.State != core.JobSucceeded || done.FinishedAt.IsZero() {
		t.Fatalf("FinishJob attempt 2 = %+v, %v", done, err)
	}
	var te *core.TransitionError
	if _, err := s.StartJob(ctx, j.ID, 3); !errors.As(err, &te) || te.From != core.JobSucceeded || te.To != core.JobRunning {
		t.Errorf("StartJob on a succeeded job: %v, want *core.TransitionError succeeded -> running", err)
	}
}

// TestClaimRace races two claims of one job, attempts 1 and 2, each
// followed by a finish: exactly one finish commits, at its attempt.
func TestClaimRace(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	for range 20 {
		j := newJob(t, s)
		var finished [3]bool
		together(2, func(i int) {
			attempt := int64(i + 1)
			if _, err := s.StartJob(ctx, j.ID, attempt); err != nil {
				var te *core.TransitionError
				if !errors.Is(err, core.ErrStale) && !errors.As(err, &te) {
					t.Errorf("StartJob %d: %v", attempt, err)
				}
				return
			}
			_, err := s.FinishJob(ctx, j.ID, attempt, core.Finish{To: core.JobSucceeded})
			if err == nil {
				finished[attempt] = true
			} else if !errors.Is(err, core.ErrStale) {
				t.Errorf("FinishJob %d: %v", attempt, err)
			}
		})
		got := mustJob(t, s, j.ID)
		if finished[1] == finished[2] {
			t.Fatalf("job %d: finishes %v; want exactly one", j.ID, finished[1:])
		}
		if got.State != core.JobSucceeded || finished[1] && got.Attempt != 1 || finished[2] && got.Attempt != 2 {
			t.Errorf("job %d is %s at attempt %d; finishes %v", j.ID, got.State, got.Attempt, finished[1:])
		}
	}
}

// TestParkResume: a park increments WaitSeq; a reply resumes only the
// wait it answers, once, however many deliver it at the same time.
func TestParkResume(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	j := reach(t, s, core.JobRunning)
	parked, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobWaitingHuman, Question: "which branch?", ResumeMovement: "plan",
		Comments: []core.Comment{{Role: core.RoleBot, Text: "which branch?"}}})
	if err != nil {
		t.Fatal(err)
	}
	if parked.State != core.JobWaitingHuman || parked.WaitSeq != 1 || parked.Question != "which branch?" || parked.ResumeMovement != "plan" {
		t.Errorf("parked = %+v; want waiting_human at wait 1 with its question", parked)
	}
	if ok, err := s.ResumeJob(ctx, j.ID, 0); ok || err != nil {
		t.Errorf("ResumeJob of an older wait = %v, %v; want false, nil", ok, err)
	}
	const n = 6
	oks := make(chan bool, n)
	together(n, func(int) {
		ok, err := s.ResumeJob(ctx, j.ID, 1)
		if err != nil {
			t.Error(err)
		}
		oks <- ok
	})
	close(oks)
	count := 0
	for ok := range oks {
		if ok {
			count++
		}
	}
	if count != 1 {
		t.Errorf("%d concurrent resumes of one wait resumed %d times, want 1", n, count)
	}
	got := mustJob(t, s, j.ID)
	if got.State != core.JobQueued || got.WaitSeq != 1 || got.QueuedAt.Before(j.QueuedAt) {
		t.Errorf("resumed = %+v; want queued, wait 1 kept, QueuedAt not before its creation", got)
	}
	want := []string{core.EventCreated, core.EventClaimed, core.EventParked, core.EventResumed}
	if diff := cmp.Diff(want, eventKinds(t, s, j.ID)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	if _, err := s.StartJob(ctx, j.ID, 2); err != nil {
		t.Fatal(err)
	}
	again, err := s.FinishJob(ctx, j.ID, 2, core.Finish{To: core.JobWaitingSubtasks, ResumeMovement: "merge",
		Children: []core.Job{{TaskID: j.TaskID, Piece: "part"}}})
	if err != nil || again.WaitSeq != 2 {
		t.Fatalf("second park = %+v, %v; want wait 2", again, err)
	}
	if ok, _ := s.ResumeJob(ctx, j.ID, 1); ok {
		t.Error("the first wait's reply resumed the second wait")
	}
	if ok, err := s.ResumeJob(ctx, j.ID, 2); !ok || err != nil {
		t.Errorf("ResumeJob of the second wait = %v, %v; want true", ok, err)
	}
	if _, err := s.ResumeJob(ctx, 999999, 1); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("ResumeJob of a missing job: %v, want ErrNotFound", err)
	}
}

// TestFinishAfterAbort: once an abort is requested, a run can only end
// aborted (or be requeued): its result is refused with ErrAborted and
// writes nothing.
func TestFinishAfterAbort(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	j := reach(t, s, core.JobRunning)
	if _, err := s.RequestAbort(ctx, j.ID, "slack:U1"); err != nil {
		t.Fatal(err)
	}
	_, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobSucceeded, ResultSummary: "late",
		Outbox: []core.OutboxMessage{{Kind: core.OutboxPost, Payload: "late"}}})
	if !errors.Is(err, core.ErrAborted) {
		t.Fatalf("finish after an abort request: %v, want ErrAborted", err)
	}
	if msgs, _ := s.DueOutbox(ctx, core.PlatformSlack, time.Now().Add(time.Hour), 0); len(msgs) != 0 {
		t.Errorf("the refused finish left %d outbox messages", len(msgs))
	}
	got, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobAborted})
	if err != nil || got.State != core.JobAborted || got.AbortedBy != "slack:U1" || got.FinishedAt.IsZero() {
		t.Errorf("aborted = %+v, %v; want aborted by slack:U1", got, err)
	}
}
