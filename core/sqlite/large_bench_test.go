package sqlite

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

// largeScale multiplies the large store's size: 10 makes the store of a
// busy year (1M finished jobs, 300k tasks, 10M job events).
var largeScale = flag.Int("large.scale", 1, "size of BenchmarkHotPathLargeStore's large store, in units of 100k jobs, 30k tasks, 1M events")

// fill writes a year's finished work into s directly (not through the
// engine): tasks finished long ago, each with comments, finished jobs with
// events and sent messages.
func fill(b *testing.B, s *Store, tasks, jobs, events int) {
	b.Helper()
	ctx := b.Context()
	at := ms(time.Now().Add(-200 * 24 * time.Hour))
	series := `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?1 - 1) `
	for _, q := range []struct {
		sql string
		n   int
	}{
		{series + `INSERT INTO tasks (platform, team, channel, thread, title, created_at, updated_at)
			SELECT 'slack', 'T1', 'C' || (i % 50), 'fill.' || i, 'a finished task', ?2, ?2 FROM n`, tasks},
		{series + `INSERT INTO comments (task_id, platform_msg_id, role, text, created_at)
			SELECT (SELECT MIN(id) FROM tasks) + i % ?3, 'm' || i, 'user', 'please look at the report', ?2 FROM n`, 3 * tasks},
		{series + `INSERT INTO jobs (task_id, piece, instruction, state, created_at, started_at, finished_at, result_summary)
			SELECT (SELECT MIN(id) FROM tasks) + i % ?3, 'default', 'look at the report', 'succeeded', ?2, ?2, ?2, 'done' FROM n`, jobs},
		{series + `INSERT INTO job_events (job_id, at, kind, movement, detail)
			SELECT (SELECT MIN(id) FROM jobs) + i % ?4, ?2, 'tool', 'implement', 'Read input/file.go' FROM n`, events},
		{series + `INSERT INTO outbox (task_id, job_id, seq, kind, payload, state, created_at)
			SELECT (SELECT MIN(id) FROM tasks) + i % ?3, (SELECT MIN(id) FROM jobs) + i, 1000000 + i, 'post', '{"text":"done"}', 'sent', ?2 FROM n`, jobs},
	} {
		err := s.tx(ctx, func(tx *txn) error {
			_, err := tx.Tx.ExecContext(ctx, q.sql, q.n, at, tasks, jobs)
			return err
		})
		if err != nil {
			b.Fatalf("fill: %v", err)
		}
	}
}

// BenchmarkHotPathLargeStore measures the store's part of one event's work
// — a new thread's task, its comment, its job created, started and
// finished with an answer, the answer claimed for delivery and marked sent
// — on an empty store and on a large one (-large.scale; 1 is a tenth of a
// busy year), to show the cost does not grow with the work done:
//
//	go test ./core/sqlite -run '^$' -bench HotPathLargeStore -benchtime 2000x
func BenchmarkHotPathLargeStore(b *testing.B) {
	k := *largeScale
	for _, c := range []struct {
		name                string
		tasks, jobs, events int
	}{
		{"store=empty", 0, 0, 0},
		{fmt.Sprintf("store=%dk-jobs", 100*k), 30_000 * k, 100_000 * k, 1_000_000 * k},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := newStore(b)
			if c.jobs > 0 {
				start := time.Now()
				fill(b, s, c.tasks, c.jobs, c.events)
				b.Logf("filled %d tasks, %d jobs, %d events in %s", c.tasks, c.jobs, c.events, time.Since(start).Round(time.Millisecond))
			}
			ctx := b.Context()
			i := 0
			for b.Loop() {
				i++
				ref := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: fmt.Sprint("hot.", i)}
				task, _, err := s.EnsureTask(ctx, core.Task{Thread: ref, Title: "a new request"})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.AddComment(ctx, core.Comment{TaskID: task.ID, PlatformMsgID: "m1", Role: core.RoleUser, Text: "look at this"}); err != nil {
					b.Fatal(err)
				}
				j, err := s.CreateJob(ctx, core.Job{TaskID: task.ID, Piece: "default"})
				if err == nil {
					_, err = s.StartJob(ctx, j.ID, 1)
				}
				if err == nil {
					_, err = s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobSucceeded, ResultSummary: "done",
						Comments: []core.Comment{{Role: core.RoleBot, Text: "done"}},
						Outbox:   []core.OutboxMessage{{Kind: core.OutboxPost, Payload: `{"text":"done"}`}}})
				}
				if err != nil {
					b.Fatal(err)
				}
				msgs, err := s.ClaimOutbox(ctx, core.PlatformSlack, "bench", time.Now(), time.Minute, 10)
				if err != nil || len(msgs) != 1 {
					b.Fatalf("ClaimOutbox = %d, %v", len(msgs), err)
				}
				if err := s.OutboxSent(ctx, msgs[0].ID, "ts"); err != nil {
					b.Fatal(err)
				}
				if _, err := s.StatusMessage(ctx, j.ID); err == nil {
					b.Fatal("a status message where none was sent")
				}
			}
		})
	}
}
