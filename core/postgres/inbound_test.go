package postgres

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

// TestIngestAtomic: an ingest that fails writes nothing, not even its
// keys, so that a redelivery is handled afresh; a duplicate key records
// the new keys only.
func TestIngestAtomic(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	thread := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: "200.1"}
	in := core.Inbound{
		Keys: []string{"event:E9"}, At: time.Now(),
		Task:    core.Task{Thread: thread},
		History: []core.Comment{{PlatformMsgID: "199.1", Text: "earlier"}},
		Comment: core.Comment{PlatformMsgID: "200.1", Text: "hi"},
		Job:     &core.Job{Piece: "chat", ParentJobID: 999999}, // no such parent
	}
	if _, err := s.Ingest(ctx, in); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("Ingest with a missing parent job: %v, want ErrNotFound", err)
	}
	if _, err := s.TaskByThread(ctx, thread); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("task after a failed ingest: %v, want ErrNotFound", err)
	}
	if n := countRows(t, s, `SELECT COUNT(*) FROM comments`); n != 0 {
		t.Errorf("%d comments after a failed ingest", n)
	}
	if known, err := s.InboundKnown(ctx, in.Keys); err != nil || known {
		t.Errorf("key after a failed ingest: known %v, %v", known, err)
	}

	in.Job.ParentJobID = 0
	got, err := s.Ingest(ctx, in)
	if err != nil || got.Duplicate || !got.TaskCreated || got.Job.ID == 0 || got.Comment.ID == 0 {
		t.Fatalf("Ingest = %+v, %v", got, err)
	}
	if cs, _ := s.RecentComments(ctx, got.Task.ID, 10); len(cs) != 2 || cs[0].Text != "earlier" {
		t.Errorf("comments = %+v; want the history then the message", cs)
	}
	again := in
	again.Keys = []string{"event:E9", "msg:200.1"}
	dup, err := s.Ingest(ctx, again)
	if err != nil || !dup.Duplicate || dup.Job.ID != 0 {
		t.Errorf("redelivery = %+v, %v; want a duplicate", dup, err)
	}
	if known, _ := s.InboundKnown(ctx, []string{"msg:200.1"}); !known {
		t.Error("the duplicate's new key was not recorded")
	}
}

// TestIngestOneJobPerThread ingests distinct messages of one new thread
// at the same time: one task is created, one job, every message stored;
// the other ingests find the job active.
func TestIngestOneJobPerThread(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	thread := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: "300.1"}
	const n = 8
	out := make([]core.Ingested, n)
	together(n, func(i int) {
		id := fmt.Sprintf("300.%d", i+2)
		var err error
		out[i], err = s.Ingest(ctx, core.Inbound{Keys: []string{"event:" + id}, At: time.Now(),
			Task: core.Task{Thread: thread}, Comment: core.Comment{PlatformMsgID: id, Text: id},
			Job: &core.Job{Piece: "chat", Instruction: id}})
		if err != nil {
			t.Error(err)
		}
	})
	var created, jobs int
	var job core.Job
	for _, o := range out {
		if o.TaskCreated {
			created++
		}
		if o.Job.ID != 0 {
			jobs++
			job = o.Job
		}
	}
	if created != 1 || jobs != 1 {
		t.Fatalf("%d concurrent ingests created %d tasks and %d jobs, want 1 and 1", n, created, jobs)
	}
	for i, o := range out {
		if o.Job.ID == 0 && o.Active.ID != job.ID {
			t.Errorf("ingest %d: active job %d, want %d", i, o.Active.ID, job.ID)
		}
		if o.Task.ID != job.TaskID || o.Comment.ID == 0 {
			t.Errorf("ingest %d: task %d comment %d", i, o.Task.ID, o.Comment.ID)
		}
	}
	if cs, _ := s.RecentComments(ctx, job.TaskID, 100); len(cs) != n {
		t.Errorf("%d comments stored, want %d", len(cs), n)
	}
}
