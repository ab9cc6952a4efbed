package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

// HotPath does the store's part of one Slack event's work on a new thread
// named thread: its task and the person's comment, a job created, started
// and finished with an answer, the answer claimed for delivery and marked
// sent, and a look-up of the job's status message (there is none). The
// stores' large-store benchmarks time it on an empty store and a filled
// one, so that both measure the same work.
func HotPath(ctx context.Context, s core.Store, thread string) error {
	ref := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: thread}
	task, _, err := s.EnsureTask(ctx, core.Task{Thread: ref, Title: "a new request"})
	if err != nil {
		return fmt.Errorf("ensure task: %w", err)
	}
	if _, err := s.AddComment(ctx, core.Comment{TaskID: task.ID, PlatformMsgID: "m1", Role: core.RoleUser, Text: "look at this"}); err != nil {
		return fmt.Errorf("add comment: %w", err)
	}
	j, err := s.CreateJob(ctx, core.Job{TaskID: task.ID, Piece: "default"})
	if err != nil {
		return fmt.Errorf("create job: %w", err)
	}
	if _, err := s.StartJob(ctx, j.ID, 1); err != nil {
		return fmt.Errorf("start job: %w", err)
	}
	_, err = s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobSucceeded, ResultSummary: "done",
		Comments: []core.Comment{{Role: core.RoleBot, Text: "done"}},
		Outbox:   []core.OutboxMessage{{Kind: core.OutboxPost, Payload: `{"text":"done"}`}}})
	if err != nil {
		return fmt.Errorf("finish job: %w", err)
	}
	msgs, err := s.ClaimOutbox(ctx, core.PlatformSlack, "bench", time.Now(), time.Minute, 10, 0)
	if err != nil {
		return fmt.Errorf("claim outbox: %w", err)
	}
	if len(msgs) != 1 {
		return fmt.Errorf("claim outbox: %d messages, want the answer alone", len(msgs))
	}
	if err := s.OutboxSent(ctx, msgs[0].ID, "ts"); err != nil {
		return fmt.Errorf("outbox sent: %w", err)
	}
	if _, err := s.StatusMessage(ctx, j.ID); !errors.Is(err, core.ErrNotFound) {
		return fmt.Errorf("status message of a job that sent none: %v, want ErrNotFound", err)
	}
	return nil
}

// BenchHotPath times HotPath on an empty store and on a filled one,
// alternating event by event so that both see the same machine (on a
// shared one, whatever else runs slows both alike), and reports the mean
// of each (empty-ms/op, filled-ms/op), filled/empty (ratio) and the
// process's CPU time per pair of events (cpu-ms/pair, the stores' own
// goroutines included; a database server's work is not). b.N counts
// pairs.
func BenchHotPath(b *testing.B, empty, filled core.Store) {
	b.Helper()
	ctx := b.Context()
	var took [2]time.Duration
	i, cpu := 0, ProcessCPU()
	for b.Loop() {
		i++
		for k, s := range []core.Store{empty, filled} {
			start := time.Now()
			if err := HotPath(ctx, s, fmt.Sprint("hot.", i)); err != nil {
				b.Fatal(err)
			}
			took[k] += time.Since(start)
		}
	}
	perOp := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
	b.ReportMetric(perOp(took[0]), "empty-ms/op")
	b.ReportMetric(perOp(took[1]), "filled-ms/op")
	b.ReportMetric(float64(took[1])/float64(took[0]), "ratio")
	b.ReportMetric(perOp(ProcessCPU()-cpu), "cpu-ms/pair")
}
