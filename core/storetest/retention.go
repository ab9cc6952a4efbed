package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

// pruneAll calls Prune until it removes nothing and returns the sum of
// what it removed and the number of calls that removed something.
func pruneAll(t *testing.T, p core.Pruner, r core.Retention, batch int) (core.Pruned, int) {
	t.Helper()
	var sum core.Pruned
	for calls := 0; ; calls++ {
		got, err := p.Prune(t.Context(), r, batch)
		if err != nil {
			t.Fatalf("Prune: %v", err)
		}
		if got.Total() == 0 {
			return sum, calls
		}
		if got.Jobs > int64(batch) || got.Events > int64(batch) || got.Comments > int64(batch) {
			t.Fatalf("Prune(batch %d) removed %+v: more than a batch of a kind", batch, got)
		}
		sum.Jobs, sum.Events, sum.Comments = sum.Jobs+got.Jobs, sum.Events+got.Events, sum.Comments+got.Comments
		if calls > 1000 {
			t.Fatal("Prune never runs out of rows")
		}
	}
}

// snapshot is everything the store holds of one task's jobs and comments.
type snapshot struct {
	Jobs     []core.Job
	Events   map[int64][]core.JobEvent
	Comments []core.Comment
}

func snap(t *testing.T, s core.Store, taskID int64) snapshot {
	t.Helper()
	ctx := t.Context()
	jobs, err := s.Jobs(ctx, core.JobFilter{TaskID: taskID})
	if err != nil {
		t.Fatal(err)
	}
	out := snapshot{Jobs: jobs, Events: map[int64][]core.JobEvent{}}
	for _, j := range jobs {
		evs, err := s.Events(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		out.Events[j.ID] = evs
	}
	if out.Comments, err = s.RecentComments(ctx, taskID, 1000); err != nil {
		t.Fatal(err)
	}
	return out
}

// testPrune: retention removes only what is past its age — old events and
// comments of closed tasks, then finished jobs whole once they are old
// enough, a retried job after its retry — in batches; it keeps every open
// task whole (its finished jobs, events and comments, however old), and
// rows stamped ahead of the store's clock (written before the clock was
// set back) stay.
func testPrune(t *testing.T, s core.Store) {
	p, ok := s.(core.Pruner)
	if !ok {
		t.Fatalf("%T does not implement core.Pruner", s)
	}
	ctx := t.Context()
	now := time.Now()
	old, future := now.Add(-48*time.Hour), now.Add(72*time.Hour)
	finished := func(task core.Task, retryOf int64, to core.JobState) core.Job {
		t.Helper()
		j, err := s.CreateJob(ctx, core.Job{TaskID: task.ID, RetryOf: retryOf, Piece: "default", Instruction: "do it"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.StartJob(ctx, j.ID, 1); err != nil {
			t.Fatal(err)
		}
		if j, err = s.FinishJob(ctx, j.ID, 1, core.Finish{To: to, Error: "x"}); err != nil {
			t.Fatal(err)
		}
		return j
	}
	comment := func(task core.Task, at time.Time) {
		t.Helper()
		if _, err := s.AddComment(ctx, core.Comment{TaskID: task.ID, Role: core.RoleUser, Text: "hi", CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	event := func(j core.Job, at time.Time) {
		t.Helper()
		if err := s.AddEvent(ctx, core.JobEvent{JobID: j.ID, At: at, Kind: "note"}); err != nil {
			t.Fatal(err)
		}
	}

	// A closed task: a failed job, its retry that succeeded, old and new
	// comments and events.
	closed := newTask(t, s)
	failed := finished(closed, 0, core.JobFailed)
	retry := finished(closed, failed.ID, core.JobSucceeded)
	comment(closed, old)
	comment(closed, old)
	comment(closed, now)
	event(failed, old)
	event(retry, old)
	// An open task: an old finished job and a queued one.
	open := newTask(t, s)
	openDone := finished(open, 0, core.JobSucceeded)
	if _, err := s.CreateJob(ctx, core.Job{TaskID: open.ID, Piece: "default"}); err != nil {
		t.Fatal(err)
	}
	comment(open, old)
	event(openDone, old)
	// A closed task whose rows were stamped ahead of the clock.
	ahead := newTask(t, s)
	aheadJob := finished(ahead, 0, core.JobSucceeded)
	comment(ahead, future)
	event(aheadJob, future)
	openBefore := snap(t, s, open.ID)

	// Events and comments past a day go; the jobs, finished a moment ago,
	// are younger than their hour.
	day := core.Retention{FinishedJobs: time.Hour, Events: 24 * time.Hour, Comments: 24 * time.Hour}
	got, calls := pruneAll(t, p, day, 1)
	if d := diff(core.Pruned{Events: 2, Comments: 2}, got); d != "" {
		t.Errorf("pruned past a day:\n%s", d)
	}
	if calls < 2 {
		t.Errorf("pruned in %d calls of one row, want one call per row", calls)
	}
	c := snap(t, s, closed.ID)
	if len(c.Jobs) != 2 || len(c.Comments) != 1 || !c.Comments[0].CreatedAt.After(old) {
		t.Errorf("closed task after pruning a day: %d jobs, comments %+v; want both jobs and the new comment", len(c.Jobs), c.Comments)
	}
	for _, j := range c.Jobs {
		for _, e := range c.Events[j.ID] {
			if e.Kind == "note" {
				t.Errorf("job %d keeps its old event %+v", j.ID, e)
			}
		}
		if len(c.Events[j.ID]) == 0 {
			t.Errorf("job %d lost its recent events", j.ID)
		}
	}

	// Once the jobs are older than their age, the closed tasks' jobs go
	// whole: the retried job after its retry.
	for time.Since(aheadJob.FinishedAt) < 20*time.Millisecond {
		time.Sleep(5 * time.Millisecond)
	}
	young := core.Retention{FinishedJobs: 10 * time.Millisecond, Events: 10 * time.Millisecond, Comments: 10 * time.Millisecond}
	got, _ = pruneAll(t, p, young, 1)
	if got.Jobs != 3 {
		t.Errorf("pruned %d finished jobs, want 3 (the closed tasks'), %+v", got.Jobs, got)
	}
	for _, j := range []core.Job{failed, retry, aheadJob} {
		if _, err := s.Job(ctx, j.ID); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("Job(%d) after pruning: %v, want ErrNotFound", j.ID, err)
		}
	}
	if d := diff(openBefore, snap(t, s, open.ID)); d != "" {
		t.Errorf("the open task changed under pruning:\n%s", d)
	}
	a, err := s.RecentComments(ctx, ahead.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 1 || !a[0].CreatedAt.After(now) {
		t.Errorf("comments stamped ahead of the clock = %+v, want the one kept", a)
	}
	if again, _ := pruneAll(t, p, young, 100); again.Total() != 0 {
		t.Errorf("a second pruning removed %+v, want nothing", again)
	}
}

// Stamp sets, behind the store's API, the time job jobID finished and the
// time of each of its events to at: what a store holds of a job that
// finished while the clock was ahead. The API stamps finished jobs with
// the store's clock, so only an engine's own tests can give one.
type Stamp func(t *testing.T, jobID int64, at time.Time)

// PruneAhead checks that a clock set back never prunes "the future": a
// finished job whose time is after the store's now (stamped by stamp as
// finished and written three days ahead, before the clock went back) is
// kept whole with its events by retention at every age, while a job of
// the same closed task finished two hours ago, by the clock as it is
// now, goes; and pruning comes to an end. Engines run it beside the
// contract suite with their own stamp.
func PruneAhead(t *testing.T, s core.Store, stamp Stamp) {
	p, ok := s.(core.Pruner)
	if !ok {
		t.Fatalf("%T does not implement core.Pruner", s)
	}
	ctx := t.Context()
	now := time.Now()
	task := newTask(t, s)
	finished := func(at time.Time) core.Job {
		t.Helper()
		j, err := s.CreateJob(ctx, core.Job{TaskID: task.ID, Piece: "default", Instruction: "do it"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.StartJob(ctx, j.ID, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.AddEvent(ctx, core.JobEvent{JobID: j.ID, Kind: "note"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobSucceeded}); err != nil {
			t.Fatal(err)
		}
		stamp(t, j.ID, at)
		return j
	}
	ahead := finished(now.Add(72 * time.Hour))
	past := finished(now.Add(-2 * time.Hour))
	aheadBefore, err := s.Events(ctx, ahead.ID)
	if err != nil || len(aheadBefore) == 0 {
		t.Fatalf("events of the job ahead: %+v (%v)", aheadBefore, err)
	}

	for _, r := range []core.Retention{
		{Events: time.Hour},
		{FinishedJobs: time.Hour, Events: time.Hour, Comments: time.Hour},
		{FinishedJobs: time.Millisecond, Events: time.Millisecond, Comments: time.Millisecond},
	} {
		pruneAll(t, p, r, 1)
		j, err := s.Job(ctx, ahead.ID)
		if err != nil {
			t.Fatalf("after pruning %+v, the job finished ahead of the clock: %v; want it kept", r, err)
		}
		if !j.FinishedAt.After(now) {
			t.Errorf("the job ahead finished at %v, want after %v", j.FinishedAt, now)
		}
		evs, err := s.Events(ctx, ahead.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d := diff(aheadBefore, evs); d != "" {
			t.Errorf("after pruning %+v, the events of the job ahead changed:\n%s", r, d)
		}
	}
	if _, err := s.Job(ctx, past.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("Job(%d), finished two hours ago, after pruning finished jobs past an hour: %v, want ErrNotFound", past.ID, err)
	}
}
