package sqlite

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestAddOutboxSeq(t *testing.T) {
	s := newStore(t)
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
	var got []core.OutboxMessage
	for _, m := range outboxRows(t, s, `ORDER BY id`) {
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
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(core.OutboxMessage{}, "ID", "CreatedAt")); diff != "" {
		t.Errorf("outbox (-want +got):\n%s", diff)
	}

	// One bad message stores none.
	err := s.AddOutbox(ctx, core.OutboxMessage{TaskID: a.ID, Kind: core.OutboxPost}, core.OutboxMessage{TaskID: 999, Kind: core.OutboxPost})
	if !errors.Is(err, core.ErrNotFound) {
		t.Errorf("AddOutbox with a missing task: %v, want ErrNotFound", err)
	}
	var n int
	if err := s.reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox`).Scan(&n); err != nil || n != 4 {
		t.Errorf("outbox holds %d messages (%v), want 4", n, err)
	}
}

func TestDueOutbox(t *testing.T) {
	s := newStore(t)
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
	add(t1, "t1-1", now.Add(-time.Minute))
	add(t1, "t1-2", time.Time{})
	add(t2, "t2-2", time.Time{})
	add(t3, "t3-1", now.Add(time.Minute)) // first not due yet: the task waits
	add(t3, "t3-2", time.Time{})
	add(t4, "t4-1", now) // due exactly now
	add(d1, "d1-1", time.Time{})

	due := func(p core.Platform, limit int) []string {
		t.Helper()
		msgs, err := s.DueOutbox(ctx, p, now, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range msgs {
			out = append(out, m.Payload)
		}
		return out
	}
	byPayload := func(payload string) core.OutboxMessage {
		t.Helper()
		m, err := scanOutbox(s.reader.QueryRowContext(ctx, `SELECT `+outboxCols+` FROM outbox o WHERE payload = ?`, payload))
		if err != nil {
			t.Fatal(err)
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
		}, []string{"t1-2", "t4-1"}, 0},
		{"a failed message lets the next go", func() {
			if err := s.OutboxFail(ctx, byPayload("t2-1").ID, "channel gone"); err != nil {
				t.Fatal(err)
			}
		}, []string{"t1-2", "t2-2", "t4-1"}, 0},
	}
	for _, st := range steps {
		st.action()
		if diff := cmp.Diff(st.slack, due(core.PlatformSlack, st.limit), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: slack due (-want +got):\n%s", st.name, diff)
		}
	}
	if diff := cmp.Diff([]string{"d1-1"}, due(core.PlatformDiscord, 10)); diff != "" {
		t.Errorf("discord due (-want +got):\n%s", diff)
	}
	if got := due(core.PlatformConsole, 10); len(got) != 0 {
		t.Errorf("console due = %v, want none", got)
	}

	sent, err := s.Outbox(ctx, byPayload("t1-1").ID)
	if err != nil {
		t.Fatal(err)
	}
	if sent.State != core.OutboxSent || sent.PlatformMsgID != "ts-1" {
		t.Errorf("sent message = %+v", sent)
	}
	failed := byPayload("t2-1")
	want := core.OutboxMessage{ID: failed.ID, TaskID: t2.ID, Seq: 1, Kind: core.OutboxPost, Payload: "t2-1",
		State: core.OutboxFailed, Tries: 2, NextTryAt: now.Add(time.Second), LastError: "channel gone", CreatedAt: failed.CreatedAt}
	if diff := cmp.Diff(want, failed); diff != "" {
		t.Errorf("failed message (-want +got):\n%s", diff)
	}
	for name, err := range map[string]error{
		"sent":  s.OutboxSent(ctx, 999, "x"),
		"retry": s.OutboxRetry(ctx, 999, now, "x"),
		"fail":  s.OutboxFail(ctx, 999, "x"),
		"get": func() error {
			_, err := s.Outbox(ctx, 999)
			return err
		}(),
	} {
		if !errors.Is(err, core.ErrNotFound) {
			t.Errorf("%s on a missing message: %v, want ErrNotFound", name, err)
		}
	}
}

// TestDueOutboxOrder checks seq order within a task over many messages:
// delivering each due message in turn yields them in the order written.
func TestDueOutboxOrder(t *testing.T) {
	s := newStore(t)
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
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delivery order (-want +got):\n%s", diff)
	}
}

func TestInbound(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		key   string
		at    time.Time
		first bool
	}{
		{"slack:Ev1", base, true},
		{"slack:Ev1", base.Add(time.Hour), false},
		{"slack:Ev2", base.Add(2 * time.Hour), true},
		{"discord:m1", base.Add(3 * time.Hour), true},
		{"slack:Ev2", base.Add(4 * time.Hour), false},
	}
	for i, st := range steps {
		first, err := s.SeenInbound(ctx, st.key, st.at)
		if err != nil {
			t.Fatal(err)
		}
		if first != st.first {
			t.Errorf("step %d SeenInbound(%s) = %v, want %v", i, st.key, first, st.first)
		}
	}
	for keys, want := range map[string]bool{"slack:Ev1": true, "slack:Ev9 discord:m1": true, "slack:Ev9": false, "": false} {
		if known, err := s.InboundKnown(ctx, strings.Fields(keys)); err != nil || known != want {
			t.Errorf("InboundKnown(%s) = %v, %v; want %v", keys, known, err, want)
		}
	}
	if first, err := s.SeenInbound(ctx, "slack:Ev9", base.Add(3*time.Hour)); err != nil || !first {
		t.Errorf("InboundKnown recorded a key: SeenInbound = %v, %v", first, err)
	}
	n, err := s.PruneInbound(ctx, base.Add(2*time.Hour))
	if err != nil || n != 1 {
		t.Errorf("PruneInbound = %d, %v; want 1", n, err)
	}
	// Pruned keys are new again; kept ones are not.
	for key, want := range map[string]bool{"slack:Ev1": true, "slack:Ev2": false, "discord:m1": false} {
		if first, err := s.SeenInbound(ctx, key, base.Add(5*time.Hour)); err != nil || first != want {
			t.Errorf("after prune SeenInbound(%s) = %v, %v; want %v", key, first, err, want)
		}
	}
	if n, err := s.PruneInbound(ctx, base.Add(24*time.Hour)); err != nil || n != 4 {
		t.Errorf("PruneInbound all = %d, %v; want 4", n, err)
	}
}

func TestInboundConcurrent(t *testing.T) {
	s := newStore(t)
	results := make(chan bool, 11)
	for range 11 {
		go func() {
			first, err := s.SeenInbound(t.Context(), "slack:EvDup", time.Now())
			if err != nil {
				t.Error(err)
			}
			results <- first
		}()
	}
	n := 0
	for range 11 {
		if <-results {
			n++
		}
	}
	if n != 1 {
		t.Errorf("11 deliveries of one event: %d first, want 1", n)
	}
}

func TestStatusMessage(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
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

func TestOutboxStats(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
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

// outboxRows reads the outbox messages the clause after FROM picks.
func outboxRows(t *testing.T, s *Store, clause string, args ...any) []core.OutboxMessage {
	t.Helper()
	rows, err := s.reader.QueryContext(t.Context(), `SELECT `+outboxCols+` FROM outbox o `+clause, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []core.OutboxMessage
	for rows.Next() {
		m, err := scanOutbox(rows)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
