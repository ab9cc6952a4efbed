package main

import (
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/baton-bot/baton/core/storefill"
)

// TestFilledStoreShowsOnlyTheRun fills a run's SQLite store and reads it
// back as the load test does: the fill's jobs are not the run's, so the
// store reads as empty until a job is made, and then holds that one.
func TestFilledStoreShowsOnlyTheRun(t *testing.T) {
	ctx := t.Context()
	db, err := newDatabase(ctx, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.fill(ctx, storefill.Sizes{Tasks: 20, Jobs: 50, Events: 200}); err != nil {
		t.Fatal(err)
	}
	r, err := db.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	count := func() int64 {
		t.Helper()
		n, err := r.CountJobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for _, c := range n {
			total += c
		}
		return total
	}
	if n := count(); n != 0 {
		t.Errorf("a filled store before the run counts %d jobs, want 0", n)
	}
	if jobs, err := r.Jobs(ctx, core.JobFilter{}); err != nil || len(jobs) != 0 {
		t.Errorf("Jobs before the run = %d jobs, %v; want none", len(jobs), err)
	}

	s := r.(runJobs).jobReader.(*sqlite.Store)
	task, _, err := s.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: "1800000000.000001"}})
	if err != nil {
		t.Fatal(err)
	}
	made, err := s.CreateJob(ctx, core.Job{TaskID: task.ID, Piece: "chat", TriggerMsgID: "1800000000.000001"})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Errorf("after one job of the run the store counts %d, want 1", n)
	}
	jobs, err := r.Jobs(ctx, core.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID != made.ID {
		t.Errorf("Jobs after the run's job = %d jobs (first %+v), want job %d alone", len(jobs), jobs, made.ID)
	}
	if got := db.String(); got != "SQLite "+db.url[len("sqlite:"):]+" filled with 20 tasks, 50 jobs, 200 events" {
		t.Errorf("the store is named %q", got)
	}
}
