package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

func testAddOutboxSeq(t *testing.T, s core.Store) {
	ctx := t.Context()
	a, b := newTask(t, s), newTask(t, s)
	j := reach(t, s, core.JobRunning)
	if err := s.AddOutbox(ctx,
		core.OutboxMessage{TaskID: a.ID, Kind: core.OutboxPost, Payload: "a1"},
		core.OutboxMessage{TaskID: b.ID, Kind: core.OutboxPost, Payload: "b1"},
		core.OutboxMessage{TaskID: a.ID, Kind: core.OutboxReact, Payload: "a2", Seq: 40, State: core.OutboxSent, Tries: 3},
	); err != nil {
		t.Fatal(err)
	}
	if err := s.AddOutbox(ctx, core.OutboxMessage{TaskID: a.ID, JobID: j.ID, Attempt: 1, Kind: core.OutboxUpload, Payload: "a3"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddOutbox(ctx); err != nil {
		t.Errorf("AddOutbox with nothing: %v", err)
	}

	// One bad message stores none.
	err := s.AddOutbox(ctx, core.OutboxMessage{TaskID: a.ID, Kind: core.OutboxPost}, core.OutboxMessage{TaskID: 999, Kind: core.OutboxPost})
	if !errors.Is(err, core.ErrNotFound) {
		t.Errorf("AddOutbox with a missing task: %v, want ErrNotFound", err)
	}
	if st, err := s.OutboxStats(ctx); err != nil || st[core.PlatformSlack].Pending != 4 {
		t.Errorf("outbox holds %+v (%v), want 4 pending", st, err)
	}
	var got []core.OutboxMessage
	for _, m := range outboxWhere(t, s, func(core.OutboxMessage) bool { return true }, byID) {
		if m.CreatedAt.IsZero() || m.ID == 0 {
			t.Errorf("message %+v has no id or creation time", m)
		}
		got = append(got, m)
	}
	want := []core.OutboxMessage{
		{TaskID: a.ID, Seq: 1, Kind: core.OutboxPost, Payload: "a1", State: core.OutboxPending},
		{TaskID: b.ID, Seq: 1, Kind: core.OutboxPost, Payload: "b1", State: core.OutboxPending},
		{TaskID: a.ID, Seq: 2, Kind: core.OutboxReact, Payload: "a2", State: core.OutboxPending},
		{TaskID: a.ID, JobID: j.ID, Attempt: 1, Seq: 3, Kind: core.OutboxUpload, Payload: "a3", State: core.OutboxPending},
	}
	if d := diff(want, bareOutbox(got)); d != "" {
		t.Errorf("outbox:\n%s", d)
	}
}

func testDueOutbox(t *testing.T, s core.Store) {
	ctx := t.Context()
	now := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	mkTask := func(p core.Platform, thread string) core.Task {
		task, _, err := s.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: p, Channel: "C", Thread: thread}})
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	t1, t2, t3, t4 := mkTask(core.PlatformSlack, "1"), mkTask(core.PlatformSlack, "2"), mkTask(core.PlatformSlack, "3"), mkTask(core.PlatformSlack, "4")
	d1 := mkTask(core.PlatformDiscord, "1")
	add := func(task core.Task, payload string, next time.Time) {
		if err := s.AddOutbox(ctx, core.OutboxMessage{TaskID: task.ID, Kind: core.OutboxPost, Payload: payload, NextTryAt: next}); err != nil {
			t.Fatal(err)
		}
	}
	add(t2, "t2-1", time.Time{})
	// An update under a ref, so that RefMessage shows what OutboxSent kept.
	if err := s.AddOutbox(ctx, core.OutboxMessage{TaskID: t1.ID, Kind: core.OutboxUpdate, Ref: "card", Payload: "t1-1", NextTryAt: now.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	add(t1, "t1-2", time.Time{})
	add(t2, "t2-2", time.Time{})
	add(t3, "t3-1", now.Add(time.Minute)) // first not due yet: the task waits
	add(t3, "t3-2", time.Time{})
	add(t4, "t4-1", now) // due exactly now
	add(d1, "d1-1", time.Time{})

	seen := map[string]core.OutboxMessage{} // by payload, as last due
	dueAt := func(p core.Platform, at time.Time, limit int) []string {
		t.Helper()
		msgs, err := s.DueOutbox(ctx, p, at, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range msgs {
			out = append(out, m.Payload)
			seen[m.Payload] = m
		}
		return out
	}
	due := func(p core.Platform, limit int) []string {
		t.Helper()
		return dueAt(p, now, limit)
	}
	byPayload := func(payload string) core.OutboxMessage {
		t.Helper()
		m, ok := seen[payload]
		if !ok {
			t.Fatalf("message %q was never due", payload)
		}
		return m
	}

	steps := []struct {
		name   string
		action func()
		slack  []string
		limit  int
	}{
		{"first per task, in task order", func() {}, []string{"t1-1", "t2-1", "t4-1"}, 0},
		{"limit", func() {}, []string{"t1-1", "t2-1"}, 2},
		{"after a send the next is due", func() {
			if err := s.OutboxSent(ctx, byPayload("t1-1").ID, "ts-1"); err != nil {
				t.Fatal(err)
			}
		}, []string{"t1-2", "t2-1", "t4-1"}, 0},
		{"a retry later holds the task back", func() {
			if err := s.OutboxRetry(ctx, byPayload("t2-1").ID, now.Add(time.Second), "429"); err != nil {
				t.Fatal(err)
			}
			// Due again at its next try, the try and its error recorded.
			if got := dueAt(core.PlatformSlack, now.Add(time.Second), 0); !slices.Contains(got, "t2-1") {
				t.Fatalf("due at the retry's time = %v, want t2-1 among them", got)
			}
			retried := byPayload("t2-1")
			want := core.OutboxMessage{ID: retried.ID, TaskID: t2.ID, Seq: 1, Kind: core.OutboxPost, Payload: "t2-1",
				State: core.OutboxPending, Tries: 1, NextTryAt: now.Add(time.Second), LastError: "429", CreatedAt: retried.CreatedAt}
			if d := diff(want, retried); d != "" {
				t.Errorf("retried message:\n%s", d)
			}
		}, []string{"t1-2", "t4-1"}, 0},
		{"a failed message lets the next go", func() {
			if err := s.OutboxFail(ctx, byPayload("t2-1").ID, "channel gone"); err != nil {
				t.Fatal(err)
			}
		}, []string{"t1-2", "t2-2", "t4-1"}, 0},
	}
	for _, st := range steps {
		st.action()
		if d := diff(st.slack, due(core.PlatformSlack, st.limit)); d != "" {
			t.Errorf("%s: slack due:\n%s", st.name, d)
		}
	}
	if d := diff([]string{"d1-1"}, due(core.PlatformDiscord, 10)); d != "" {
		t.Errorf("discord due:\n%s", d)
	}
	if got := due(core.PlatformConsole, 10); len(got) != 0 {
		t.Errorf("console due = %v, want none", got)
	}

	if got, err := s.RefMessage(ctx, t1.ID, "card"); err != nil || got != "ts-1" {
		t.Errorf("RefMessage of the sent message = %q, %v; want ts-1", got, err)
	}
	st, err := s.OutboxStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := st[core.PlatformSlack]; got.Failed != 1 || got.Pending != 5 {
		t.Errorf("slack stats = %+v; want 1 failed (t2-1) and 5 pending (t1-2, t2-2, t3-1, t3-2, t4-1)", got)
	}
	// A failed message is never due again.
	for _, m := range drainOutbox(t, s) {
		if m.Payload == "t2-1" {
			t.Errorf("the failed message was due again: %+v", m)
		}
	}
	for name, err := range map[string]error{
		"sent":  s.OutboxSent(ctx, 999, "x"),
		"retry": s.OutboxRetry(ctx, 999, now, "x"),
		"fail":  s.OutboxFail(ctx, 999, "x"),
	} {
		if !errors.Is(err, core.ErrNotFound) {
			t.Errorf("%s on a missing message: %v, want ErrNotFound", name, err)
		}
	}
}

// testDueOutboxOrder checks seq order within a task over many messages:
// delivering each due message in turn yields them in the order written.
func testDueOutboxOrder(t *testing.T, s core.Store) {
	ctx := t.Context()
	a, b := newTask(t, s), newTask(t, s)
	var want []string
	for i := range 10 {
		for _, task := range []core.Task{a, b} {
			p := fmt.Sprintf("%d-%d", task.ID, i)
			if err := s.AddOutbox(ctx, core.OutboxMessage{TaskID: task.ID, Kind: core.OutboxPost, Payload: p}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 10 {
		want = append(want, fmt.Sprintf("%d-%d", a.ID, i), fmt.Sprintf("%d-%d", b.ID, i))
	}
	var got []string
	for round := 0; ; round++ {
		msgs, err := s.DueOutbox(ctx, core.PlatformSlack, time.Now(), 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		if len(msgs) > 2 || round > 20 {
			t.Fatalf("round %d: %d due messages, want at most one per task", round, len(msgs))
		}
		for _, m := range msgs {
			got = append(got, m.Payload)
			if err := s.OutboxSent(ctx, m.ID, "x"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d := diff(want, got); d != "" {
		t.Errorf("delivery order:\n%s", d)
	}
}

func testStatusMessage(t *testing.T, s core.Store) {
	ctx := t.Context()
	j := newJob(t, s)
	if _, err := s.StatusMessage(ctx, j.ID); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("no status yet: err %v, want ErrNotFound", err)
	}
	if err := s.AddOutbox(ctx,
		core.OutboxMessage{TaskID: j.TaskID, JobID: j.ID, Kind: core.OutboxUpdate, Payload: `{"text":"1"}`},
		core.OutboxMessage{TaskID: j.TaskID, JobID: j.ID, Kind: core.OutboxUpdate, Payload: `{"text":"2"}`},
	); err != nil {
		t.Fatal(err)
	}
	due, err := s.DueOutbox(ctx, core.PlatformSlack, time.Now().Add(time.Hour), 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("due = %v, %v", due, err)
	}
	if err := s.OutboxSent(ctx, due[0].ID, "1700.1"); err != nil {
		t.Fatal(err)
	}
	got, err := s.StatusMessage(ctx, j.ID)
	if err != nil || got != "1700.1" {
		t.Errorf("StatusMessage = %q, %v; want 1700.1", got, err)
	}
}

func testOutboxStats(t *testing.T, s core.Store) {
	ctx := t.Context()
	j := newJob(t, s)
	for range 3 {
		if err := s.AddOutbox(ctx, core.OutboxMessage{TaskID: j.TaskID, Kind: core.OutboxPost, Payload: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	due, _ := s.DueOutbox(ctx, core.PlatformSlack, time.Now().Add(time.Hour), 10)
	if err := s.OutboxFail(ctx, due[0].ID, "gone"); err != nil {
		t.Fatal(err)
	}
	st, err := s.OutboxStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := st[core.PlatformSlack]
	if got.Pending != 2 || got.Failed != 1 || got.OldestPending.IsZero() {
		t.Errorf("stats = %+v, want 2 pending (with the oldest's time) and 1 failed", got)
	}
}

// testRefMessage: the first update delivered under a ref is the message
// later updates under it edit; the status message is the job's first
// update delivered under no ref.
func testRefMessage(t *testing.T, s core.Store) {
	ctx := t.Context()
	j := newJob(t, s)
	other := newTask(t, s)
	if _, err := s.RefMessage(ctx, j.TaskID, "card"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("RefMessage before any delivery: %v, want ErrNotFound", err)
	}
	if err := s.AddOutbox(ctx,
		core.OutboxMessage{TaskID: j.TaskID, JobID: j.ID, Kind: core.OutboxUpdate, Ref: "card", Payload: "c1"},
		core.OutboxMessage{TaskID: j.TaskID, JobID: j.ID, Kind: core.OutboxUpdate, Ref: "card", Payload: "c2"},
	); err != nil {
		t.Fatal(err)
	}
	deliver := func(payload, platformID string) {
		t.Helper()
		due, err := s.DueOutbox(ctx, core.PlatformSlack, time.Now().Add(time.Hour), 0)
		if err != nil || len(due) != 1 || due[0].Payload != payload || due[0].Ref != "card" {
			t.Fatalf("due = %+v, %v; want %s under ref card", due, err, payload)
		}
		if err := s.OutboxSent(ctx, due[0].ID, platformID); err != nil {
			t.Fatal(err)
		}
	}
	deliver("c1", "m1")
	if got, err := s.RefMessage(ctx, j.TaskID, "card"); err != nil || got != "m1" {
		t.Errorf("RefMessage = %q, %v; want m1", got, err)
	}
	if got, err := s.StatusMessage(ctx, j.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("StatusMessage = %q, %v; an update under a ref is not the status message", got, err)
	}
	deliver("c2", "m2")
	if got, err := s.RefMessage(ctx, j.TaskID, "card"); err != nil || got != "m1" {
		t.Errorf("RefMessage after a second delivery = %q, %v; want the first, m1", got, err)
	}
	for _, tc := range []struct {
		task int64
		ref  string
	}{{other.ID, "card"}, {j.TaskID, "other"}, {j.TaskID, ""}} {
		if got, err := s.RefMessage(ctx, tc.task, tc.ref); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("RefMessage(%d, %q) = %q, %v; want ErrNotFound", tc.task, tc.ref, got, err)
		}
	}
}
