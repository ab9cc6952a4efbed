package sqlite

import (
	"fmt"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

// BenchmarkAddComment measures one comment write (one transaction).
func BenchmarkAddComment(b *testing.B) {
	s := newStore(b)
	task := newTask(b, s)
	i := 0
	for b.Loop() {
		i++
		if _, err := s.AddComment(b.Context(), core.Comment{TaskID: task.ID, PlatformMsgID: fmt.Sprint(i), Text: "hello"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJobLifecycle measures a job's store writes from creation to a
// finish with an answer: CreateJob, StartJob, SaveProgress, FinishJob with
// one comment and one outbox message.
func BenchmarkJobLifecycle(b *testing.B) {
	s := newStore(b)
	ctx := b.Context()
	task := newTask(b, s)
	for b.Loop() {
		j, err := s.CreateJob(ctx, core.Job{TaskID: task.ID, Piece: "default"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.StartJob(ctx, j.ID, 1); err != nil {
			b.Fatal(err)
		}
		if err := s.SaveProgress(ctx, j.ID, 1, core.Progress{Movement: "plan", MovementCount: 1}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobSucceeded, ResultSummary: "done",
			Comments: []core.Comment{{Role: core.RoleBot, Text: "done"}},
			Outbox:   []core.OutboxMessage{{Kind: core.OutboxPost, Payload: `{"text":"done"}`}}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDueOutbox measures a deliverer's poll over 1,000 tasks with
// 10 pending messages each.
func BenchmarkDueOutbox(b *testing.B) {
	s := newStore(b)
	ctx := b.Context()
	var msgs []core.OutboxMessage
	for range 1000 {
		task := newTask(b, s)
		for range 10 {
			msgs = append(msgs, core.OutboxMessage{TaskID: task.ID, Kind: core.OutboxPost, Payload: "x"})
		}
	}
	if err := s.AddOutbox(ctx, msgs...); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for b.Loop() {
		got, err := s.DueOutbox(ctx, core.PlatformSlack, now, 100)
		if err != nil || len(got) != 100 {
			b.Fatalf("DueOutbox = %d, %v", len(got), err)
		}
	}
}
