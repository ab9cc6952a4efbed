package core

import (
	"errors"
	"testing"
	"time"
)

func TestTransitionTable(t *testing.T) {
	allowed := map[[2]JobState]bool{
		{JobQueued, JobRunning}: true, {JobQueued, JobAborted}: true,
		{JobWaitingHuman, JobAborted}: true, {JobWaitingSubtasks, JobAborted}: true,
		{JobRunning, JobSucceeded}: true, {JobRunning, JobWaitingHuman}: true,
		{JobRunning, JobWaitingSubtasks}: true, {JobRunning, JobFailed}: true,
		{JobRunning, JobAborted}: true, {JobRunning, JobQueued}: true,
		{JobWaitingHuman, JobQueued}: true, {JobWaitingSubtasks, JobQueued}: true,
		{JobRunning, JobWaitingApproval}: true, {JobWaitingApproval, JobQueued}: true, {JobWaitingApproval, JobAborted}: true,
	}
	for _, from := range JobStates {
		for _, to := range JobStates {
			want := allowed[[2]JobState{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
			err := CheckTransition(7, from, to)
			var te *TransitionError
			if want != (err == nil) || (!want && !errors.As(err, &te)) {
				t.Errorf("CheckTransition(%s, %s) = %v", from, to, err)
			}
			if !want && err.Error() != "job 7: state change "+string(from)+" -> "+string(to)+" is not allowed" {
				t.Errorf("error %q does not name both states", err)
			}
		}
	}
	for _, s := range JobStates {
		if s.Terminal() == s.Active() {
			t.Errorf("%s: terminal %v, active %v: exactly one must hold", s, s.Terminal(), s.Active())
		}
		if s.Terminal() && len(transitions[s]) > 0 {
			t.Errorf("terminal state %s has transitions", s)
		}
	}
}

func TestRetryBackoffBounds(t *testing.T) {
	for n, limit := range map[int]time.Duration{0: 15 * time.Second, 1: 15 * time.Second, 2: 30 * time.Second, 5: 4 * time.Minute, 6: 8 * time.Minute, 7: 10 * time.Minute, 100: 10 * time.Minute} {
		for range 200 {
			if d := RetryBackoff(n); d < 0 || d >= limit {
				t.Fatalf("RetryBackoff(%d) = %s, want in [0, %s)", n, d, limit)
			}
		}
	}
}
