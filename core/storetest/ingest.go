package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

func testIngest(t *testing.T, s core.Store) {
	ctx := t.Context()
	thread := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: "100.1"}
	at := time.Now()
	msg := func(keys []string, msgID, text string) core.Inbound {
		return core.Inbound{
			Keys: keys, At: at,
			Task:    core.Task{Thread: thread, OwnerUser: "slack:U1", Title: "first"},
			Comment: core.Comment{PlatformMsgID: msgID, AuthorID: "slack:U1", Role: core.RoleUser, Text: text},
			Job:     &core.Job{Piece: "chat", Instruction: text, TriggerMsgID: msgID},
		}
	}
	in := msg([]string{"event:E1", "msg:C1:100.2"}, "100.2", "please")
	in.History = []core.Comment{
		{PlatformMsgID: "100.1", AuthorID: "slack:U2", Role: core.RoleUser, Text: "earlier"},
		{PlatformMsgID: "100.2", AuthorID: "slack:U1", Role: core.RoleUser, Text: "please"}, // the message itself
	}
	first, err := s.Ingest(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate || !first.TaskCreated || first.Task.ID == 0 || first.Job.ID == 0 || first.Active.ID != 0 {
		t.Fatalf("first message: %+v", first)
	}
	if first.Job.State != core.JobQueued || first.Job.TaskID != first.Task.ID || first.Job.TriggerMsgID != "100.2" {
		t.Errorf("job = %+v", first.Job)
	}
	if first.Task.Workspace == "" {
		t.Error("the new task has no workspace")
	}
	evs, err := s.Events(ctx, first.Job.ID)
	if err != nil || len(evs) != 1 || evs[0].Kind != core.EventCreated {
		t.Errorf("job events = %+v, %v; want one %q", evs, err, core.EventCreated)
	}
	texts := func() []string {
		cs, err := s.RecentComments(ctx, first.Task.ID, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			out = append(out, c.Text)
		}
		return out
	}
	if d := diff([]string{"earlier", "please"}, texts()); d != "" {
		t.Errorf("comments:\n%s", d)
	}

	// Delivered again: by the same event, by another event of the same
	// message, or as the same message with new keys.
	for name, again := range map[string]core.Inbound{
		"same event":      msg([]string{"event:E1", "msg:C1:100.2"}, "100.2", "please"),
		"other event":     msg([]string{"event:E2", "msg:C1:100.2"}, "100.2", "please"),
		"same message id": msg([]string{"event:E3"}, "100.2", "please"),
	} {
		got, err := s.Ingest(ctx, again)
		if err != nil || !got.Duplicate || got.Job.ID != 0 {
			t.Errorf("%s: %+v, %v; want a duplicate", name, got, err)
		}
	}
	jobs, err := s.Jobs(ctx, core.JobFilter{TaskID: first.Task.ID})
	if err != nil || len(jobs) != 1 {
		t.Errorf("jobs after duplicates = %d, %v; want 1", len(jobs), err)
	}
	if d := diff([]string{"earlier", "please"}, texts()); d != "" {
		t.Errorf("comments after duplicates:\n%s", d)
	}

	// A later message of the thread while the job is active: a comment.
	later, err := s.Ingest(ctx, msg([]string{"event:E4", "msg:C1:100.3"}, "100.3", "and also"))
	if err != nil {
		t.Fatal(err)
	}
	if later.Duplicate || later.TaskCreated || later.Task.ID != first.Task.ID || later.Job.ID != 0 || later.Active.ID != first.Job.ID {
		t.Errorf("later message: %+v", later)
	}
	if d := diff([]string{"earlier", "please", "and also"}, texts()); d != "" {
		t.Errorf("comments:\n%s", d)
	}
}

// testIngestWritesNothingInPart fails the job's insert: no key, task or
// comment is left behind, so a redelivery is handled afresh.
func testIngestWritesNothingInPart(t *testing.T, s core.Store) {
	ctx := t.Context()
	thread := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: "200.1"}
	in := core.Inbound{
		Keys: []string{"event:E9"}, At: time.Now(),
		Task:    core.Task{Thread: thread},
		Comment: core.Comment{PlatformMsgID: "200.1", Text: "hi"},
		Job:     &core.Job{Piece: "chat", ParentJobID: 999}, // no such parent
	}
	if _, err := s.Ingest(ctx, in); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if _, err := s.TaskByThread(ctx, thread); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("task after a failed ingest: err = %v, want ErrNotFound", err)
	}
	if first, err := s.SeenInbound(ctx, "event:E9", time.Now()); err != nil || !first {
		t.Errorf("key after a failed ingest: first = %v, %v; want true", first, err)
	}
}
