package postgres

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/google/go-cmp/cmp"
)

// TestOutboxSeqConcurrent: writers of one task's outbox, at the same
// time and through every path (AddOutbox, a claim's notes, a finish), get
// the Seqs 1..n with no gap or repeat, each writer's in the order it
// wrote them; DueOutbox then hands them out one at a time, in that order.
func TestOutboxSeqConcurrent(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	j := newJob(t, s)
	const writers, each = 6, 8
	together(writers+1, func(w int) {
		if w == writers {
			if _, err := s.StartJob(ctx, j.ID, 1, core.OutboxMessage{Kind: core.OutboxUpdate, Payload: "job-00"}); err != nil {
				t.Error(err)
				return
			}
			if _, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobSucceeded,
				Outbox: []core.OutboxMessage{{Kind: core.OutboxPost, Payload: "job-01"}}}); err != nil {
				t.Error(err)
			}
			return
		}
		for i := 0; i < each; i += 2 {
			p := func(k int) string { return fmt.Sprintf("w%d-%02d", w, k) }
			if err := s.AddOutbox(ctx,
				core.OutboxMessage{TaskID: j.TaskID, Kind: core.OutboxPost, Payload: p(i)},
				core.OutboxMessage{TaskID: j.TaskID, Kind: core.OutboxPost, Payload: p(i + 1)}); err != nil {
				t.Error(err)
			}
		}
	})

	var payloads []string
	var seqs []int64
	for {
		due, err := s.DueOutbox(ctx, core.PlatformSlack, time.Now(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) == 0 {
			break
		}
		if len(due) != 1 {
			t.Fatalf("DueOutbox gave %d messages of one task, want 1", len(due))
		}
		payloads = append(payloads, due[0].Payload)
		seqs = append(seqs, due[0].Seq)
		if err := s.OutboxSent(ctx, due[0].ID, "ts"); err != nil {
			t.Fatal(err)
		}
	}
	total := writers*each + 2
	want := make([]int64, total)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if diff := cmp.Diff(want, seqs); diff != "" {
		t.Errorf("Seqs in delivery order (-want +got):\n%s", diff)
	}
	// Each writer's messages came out in the order it wrote them.
	last := map[string]string{}
	for _, p := range payloads {
		who := p[:len(p)-3]
		if prev, ok := last[who]; ok && prev > p {
			t.Errorf("%s delivered after %s", p, prev)
		}
		last[who] = p
	}
	if len(payloads) != total || !slices.Contains(payloads, "job-01") {
		t.Errorf("delivered %d messages, want %d with the job's", len(payloads), total)
	}
}

// TestDueOutboxFirstPerTask: a task's messages wait behind its first
// pending one, due or not; other tasks and platforms are not held up.
func TestDueOutboxFirstPerTask(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	now := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	mk := func(p core.Platform, thread string) core.Task {
		task, _, err := s.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: p, Channel: "C", Thread: thread}})
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	a, b, d := mk(core.PlatformSlack, "a"), mk(core.PlatformSlack, "b"), mk(core.PlatformDiscord, "d")
	for _, m := range []core.OutboxMessage{
		{TaskID: a.ID, Payload: "a1"}, {TaskID: a.ID, Payload: "a2"},
		{TaskID: b.ID, Payload: "b1", NextTryAt: now.Add(time.Minute)}, {TaskID: b.ID, Payload: "b2"},
		{TaskID: d.ID, Payload: "d1"},
	} {
		m.Kind = core.OutboxPost
		if err := s.AddOutbox(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	due := func(p core.Platform) []string {
		msgs, err := s.DueOutbox(ctx, p, now, 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range msgs {
			out = append(out, m.Payload)
		}
		return out
	}
	if diff := cmp.Diff([]string{"a1"}, due(core.PlatformSlack)); diff != "" {
		t.Errorf("slack due (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"d1"}, due(core.PlatformDiscord)); diff != "" {
		t.Errorf("discord due (-want +got):\n%s", diff)
	}
	st, err := s.OutboxStats(ctx)
	if err != nil || st[core.PlatformSlack].Pending != 4 || st[core.PlatformDiscord].Pending != 1 {
		t.Errorf("OutboxStats = %+v, %v", st, err)
	}
}
