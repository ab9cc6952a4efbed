package storetest

import (
	"errors"
	"testing"

	"github.com/baton-bot/baton/core"
)

// reach creates a job and drives it to state through the store's public
// methods, the way Baton does.
func reach(t *testing.T, s core.Store, state core.JobState) core.Job {
	t.Helper()
	ctx := t.Context()
	j := newJob(t, s)
	if state == core.JobQueued {
		return j
	}
	j, err := s.StartJob(ctx, j.ID, 1)
	if err != nil {
		t.Fatalf("StartJob: %v", err)
	}
	if state == core.JobRunning {
		return j
	}
	f := core.Finish{To: state}
	switch state {
	case core.JobWaitingHuman:
		f.Question, f.ResumeMovement = "which one?", "plan"
	case core.JobWaitingSubtasks:
		f.ResumeMovement = "plan"
	case core.JobWaitingApproval:
		f.ResumeMovement, f.Approval, f.Checkpoint = "plan", &core.Approval{Tool: "Bash", Subject: "make deploy"}, "{}"
	}
	j, err = s.FinishJob(ctx, j.ID, j.Attempt, f)
	if err != nil {
		t.Fatalf("FinishJob to %s: %v", state, err)
	}
	if j.State != state {
		t.Fatalf("reached %s, want %s", j.State, state)
	}
	return j
}

// move tries to take job j to state to through every public method that
// can reach to, stopping at the first that changes the job.
func move(t *testing.T, s core.Store, j core.Job, to core.JobState) {
	t.Helper()
	ctx := t.Context()
	finish := func() {
		f := core.Finish{To: to}
		switch to {
		case core.JobWaitingHuman:
			f.Question = "q"
		case core.JobWaitingApproval:
			f.Approval = &core.Approval{Tool: "Bash"}
		}
		_, _ = s.FinishJob(ctx, j.ID, j.Attempt, f)
	}
	switch to {
	case core.JobRunning:
		_, _ = s.StartJob(ctx, j.ID, j.Attempt+1)
	case core.JobQueued:
		if j.State == core.JobRunning {
			finish()
		} else {
			_, _ = s.ResumeJob(ctx, j.ID, j.WaitSeq)
			_, _, _ = s.DecideApproval(ctx, core.ApprovalDecision{JobID: j.ID, WaitSeq: j.WaitSeq, Verdict: core.VerdictApprove, By: "slack:U1"})
			finish()
		}
	case core.JobAborted:
		if j.State == core.JobRunning {
			finish()
		} else {
			_, _ = s.RequestAbort(ctx, j.ID, "U1")
			finish()
		}
	default:
		finish()
	}
}

// testTransitionTable checks every from × to pair: a change through the
// store happens exactly when core.CanTransition allows it, and a refused
// change leaves the job and its history as they were.
func testTransitionTable(t *testing.T, s core.Store) {
	for _, from := range core.JobStates {
		for _, to := range core.JobStates {
			if from == core.JobRunning && to == core.JobRunning {
				// A new attempt taking over a running job is the
				// lease-lost path running -> queued -> running in one
				// step; jobs/StartJobTakeover covers it.
				continue
			}
			t.Run(string(from)+"_to_"+string(to), func(t *testing.T) {
				j := reach(t, s, from)
				events := eventKinds(t, s, j.ID)
				move(t, s, j, to)
				got := mustJob(t, s, j.ID)
				if core.CanTransition(from, to) {
					if got.State != to {
						t.Errorf("allowed %s -> %s: job is %s", from, to, got.State)
					}
					return
				}
				if d := diff(j, got); d != "" {
					t.Errorf("refused %s -> %s changed the job (want before, got after):\n%s", from, to, d)
				}
				if d := diff(events, eventKinds(t, s, j.ID)); d != "" {
					t.Errorf("refused %s -> %s changed the history (want before, got after):\n%s", from, to, d)
				}
			})
		}
	}
}

// testTransitionErrors checks the error each refused change reports.
func testTransitionErrors(t *testing.T, s core.Store) {
	ctx := t.Context()
	for _, from := range []core.JobState{core.JobWaitingHuman, core.JobWaitingSubtasks, core.JobWaitingApproval, core.JobSucceeded, core.JobFailed, core.JobAborted} {
		t.Run("start_"+string(from), func(t *testing.T) {
			j := reach(t, s, from)
			_, err := s.StartJob(ctx, j.ID, j.Attempt+1)
			var te *core.TransitionError
			if !errors.As(err, &te) {
				t.Fatalf("StartJob on %s: %v, want *core.TransitionError", from, err)
			}
			if d := diff(core.TransitionError{JobID: j.ID, From: from, To: core.JobRunning}, *te); d != "" {
				t.Errorf("TransitionError:\n%s", d)
			}
		})
	}
	for _, to := range []core.JobState{core.JobRunning, "", "bogus"} {
		t.Run("finish_to_"+string(to), func(t *testing.T) {
			j := reach(t, s, core.JobRunning)
			_, err := s.FinishJob(ctx, j.ID, j.Attempt, core.Finish{To: to})
			var te *core.TransitionError
			if !errors.As(err, &te) || te.From != core.JobRunning || te.To != to {
				t.Fatalf("FinishJob to %q: %v, want *core.TransitionError running -> %q", to, err, to)
			}
			if d := diff(j, mustJob(t, s, j.ID)); d != "" {
				t.Errorf("refused finish changed the job (want before, got after):\n%s", d)
			}
		})
	}
	for _, from := range []core.JobState{core.JobQueued, core.JobWaitingHuman, core.JobSucceeded} {
		t.Run("finish_from_"+string(from), func(t *testing.T) {
			j := reach(t, s, from)
			_, err := s.FinishJob(ctx, j.ID, j.Attempt, core.Finish{To: core.JobSucceeded})
			if !errors.Is(err, core.ErrStale) {
				t.Fatalf("FinishJob on %s: %v, want ErrStale", from, err)
			}
		})
	}
}
