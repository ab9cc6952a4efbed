package sqlite

import (
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/google/go-cmp/cmp"
)

// TestTasks: the listing is newest first, cut at the limit, and the state
// filter looks at each task's newest job only.
func TestTasks(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	mkJob := func(task core.Task) core.Job {
		j, err := s.CreateJob(ctx, core.Job{TaskID: task.ID, Piece: "chat", Instruction: "do it"})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	noJobs := newTask(t, s)
	abortedThenQueued := newTask(t, s)
	old := mkJob(abortedThenQueued)
	if _, err := s.RequestAbort(ctx, old.ID, "U1"); err != nil {
		t.Fatal(err)
	}
	mkJob(abortedThenQueued)
	aborted := newTask(t, s)
	j := mkJob(aborted)
	if _, err := s.RequestAbort(ctx, j.ID, "U1"); err != nil {
		t.Fatal(err)
	}

	ids := func(ts []core.Task) []int64 {
		var out []int64
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	tests := []struct {
		name string
		f    TaskFilter
		want []int64
	}{
		{"all", TaskFilter{}, []int64{aborted.ID, abortedThenQueued.ID, noJobs.ID}},
		{"limit", TaskFilter{Limit: 2}, []int64{aborted.ID, abortedThenQueued.ID}},
		{"newest job aborted", TaskFilter{State: core.JobAborted}, []int64{aborted.ID}},
		{"newest job queued", TaskFilter{State: core.JobQueued}, []int64{abortedThenQueued.ID}},
		{"state and limit", TaskFilter{State: core.JobAborted, Limit: 1}, []int64{aborted.ID}},
		{"no such state", TaskFilter{State: core.JobSucceeded}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Tasks(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
				t.Errorf("Tasks(%+v) (-want +got):\n%s", tt.f, diff)
			}
		})
	}
	got, err := s.Tasks(ctx, TaskFilter{Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("Tasks = %v, %v", got, err)
	}
	want, err := s.Task(ctx, aborted.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got[0]); diff != "" {
		t.Errorf("listed task (-want +got):\n%s", diff)
	}
}
