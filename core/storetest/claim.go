package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

// payloads returns the payloads of msgs, in order.
func payloads(msgs []core.OutboxMessage) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Payload)
	}
	return out
}

// testClaimOutbox: a claim takes what DueOutbox would return, less what
// an unexpired claim holds; claims exclude one another until they expire
// or are settled or released, and Claims counts the deliveries begun.
func testClaimOutbox(t *testing.T, s core.Store) {
	ctx := t.Context()
	now := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	const lease = time.Minute
	a, b, c := newTask(t, s), newTask(t, s), newTask(t, s)
	discord, _, err := s.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformDiscord, Channel: "C", Thread: "d1"}})
	if err != nil {
		t.Fatal(err)
	}
	add := func(task core.Task, payload string, next time.Time) {
		t.Helper()
		if err := s.AddOutbox(ctx, core.OutboxMessage{TaskID: task.ID, Kind: core.OutboxPost, Payload: payload, NextTryAt: next}); err != nil {
			t.Fatal(err)
		}
	}
	add(a, "a1", time.Time{})
	add(a, "a2", time.Time{})
	add(b, "b1", time.Time{})
	add(c, "c1", now.Add(time.Hour)) // not due: its task waits
	add(c, "c2", time.Time{})
	add(discord, "d1", time.Time{})

	claim := func(owner string, at time.Time, limit int) []core.OutboxMessage {
		t.Helper()
		msgs, err := s.ClaimOutbox(ctx, core.PlatformSlack, owner, at, lease, limit, 0)
		if err != nil {
			t.Fatalf("ClaimOutbox(%s): %v", owner, err)
		}
		return msgs
	}
	if got := claim("one", now, 0); len(got) != 0 {
		t.Errorf("a claim of no messages returned %v", payloads(got))
	}
	first := claim("one", now, 1)
	if d := diff([]string{"a1"}, payloads(first)); d != "" {
		t.Errorf("a claim of one message:\n%s", d)
	}
	if first[0].Claims != 1 {
		t.Errorf("a message claimed once has Claims %d, want 1", first[0].Claims)
	}
	// a1 is claimed: task a offers nothing, not even a2, to anyone.
	if d := diff([]string{"b1"}, payloads(claim("two", now, 10))); d != "" {
		t.Errorf("another owner's claim:\n%s", d)
	}
	if got := claim("one", now, 10); len(got) != 0 {
		t.Errorf("the owner claiming again got %v, want nothing: its own claims hold too", payloads(got))
	}
	if got := claim("three", now.Add(lease-time.Millisecond), 10); len(got) != 0 {
		t.Errorf("just before the leases end a claim got %v, want nothing", payloads(got))
	}
	// DueOutbox reads without regard to claims.
	due, err := s.DueOutbox(ctx, core.PlatformSlack, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff([]string{"a1", "b1"}, payloads(due)); d != "" {
		t.Errorf("DueOutbox while claimed:\n%s", d)
	}

	// Once the leases end, another owner takes them, counted again.
	later := now.Add(lease)
	again := claim("three", later, 10)
	if d := diff([]string{"a1", "b1"}, payloads(again)); d != "" {
		t.Fatalf("claim after the leases ended:\n%s", d)
	}
	for _, m := range again {
		if m.Claims != 2 {
			t.Errorf("%s claimed twice has Claims %d, want 2", m.Payload, m.Claims)
		}
	}
	a1, b1 := again[0], again[1]

	// Sending ends the claim: the task's next message is free at once.
	if err := s.OutboxSent(ctx, a1.ID, "ts-a1"); err != nil {
		t.Fatal(err)
	}
	if d := diff([]string{"a2"}, payloads(claim("one", later, 10))); d != "" {
		t.Errorf("claim after a1 was sent:\n%s", d)
	}
	// A retry ends it too: due again at its next try, to anyone.
	if err := s.OutboxRetry(ctx, b1.ID, later.Add(time.Second), "503"); err != nil {
		t.Fatal(err)
	}
	if got := claim("two", later, 10); len(got) != 0 {
		t.Errorf("before the retry's time a claim got %v", payloads(got))
	}
	retried := claim("two", later.Add(time.Second), 10)
	if len(retried) != 1 || retried[0].Payload != "b1" || retried[0].Claims != 3 || retried[0].Tries != 1 {
		t.Fatalf("claim at the retry's time = %+v; want b1 with Claims 3 and Tries 1", retried)
	}
	// And failing: the task's next message (none here) is free.
	if err := s.OutboxFail(ctx, b1.ID, "gone"); err != nil {
		t.Fatal(err)
	}
	if got := claim("two", later.Add(time.Second), 10); len(got) != 0 {
		t.Errorf("after b1 failed a claim got %v", payloads(got))
	}

	// Another platform's messages are its own.
	d, err := s.ClaimOutbox(ctx, core.PlatformDiscord, "one", now, lease, 10, 0)
	if err != nil || len(d) != 1 || d[0].Payload != "d1" {
		t.Errorf("discord claim = %v, %v; want d1", payloads(d), err)
	}
}

// testReleaseOutbox: a released claim is free at once; untried, it is not
// counted; only its owner releases it.
func testReleaseOutbox(t *testing.T, s core.Store) {
	ctx := t.Context()
	now := time.Now()
	task := newTask(t, s)
	if err := s.AddOutbox(ctx, core.OutboxMessage{TaskID: task.ID, Kind: core.OutboxPost, Payload: "m"}); err != nil {
		t.Fatal(err)
	}
	claimOne := func(owner string, wantClaims int) core.OutboxMessage {
		t.Helper()
		msgs, err := s.ClaimOutbox(ctx, core.PlatformSlack, owner, now, time.Hour, 10, 0)
		if err != nil || len(msgs) != 1 || msgs[0].Claims != wantClaims {
			t.Fatalf("ClaimOutbox(%s) = %+v, %v; want m with Claims %d", owner, msgs, err, wantClaims)
		}
		return msgs[0]
	}
	m := claimOne("one", 1)
	if err := s.ReleaseOutbox(ctx, "two", true, m.ID); err != nil {
		t.Fatal(err)
	}
	if msgs, _ := s.ClaimOutbox(ctx, core.PlatformSlack, "two", now, time.Hour, 10, 0); len(msgs) != 0 {
		t.Fatalf("another owner's release freed the claim: %+v", msgs)
	}
	if err := s.ReleaseOutbox(ctx, "one", true, m.ID, 999); err != nil {
		t.Fatal(err)
	}
	m = claimOne("two", 1) // untried: not counted
	if err := s.ReleaseOutbox(ctx, "two", false, m.ID); err != nil {
		t.Fatal(err)
	}
	m = claimOne("one", 2) // tried: counted
	if err := s.OutboxSent(ctx, m.ID, "ts"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseOutbox(ctx, "one", true, m.ID); err != nil {
		t.Fatal(err)
	}
	if msgs, _ := s.ClaimOutbox(ctx, core.PlatformSlack, "one", now, time.Hour, 10, 0); len(msgs) != 0 {
		t.Errorf("a release after the send made the message due again: %+v", msgs)
	}
	if err := s.ReleaseOutbox(ctx, "one", true); err != nil {
		t.Errorf("ReleaseOutbox of nothing: %v", err)
	}
}

// testClaimOutboxAfter: a claim past a task starts with the next task's
// first due message, and a claim past the last task finds none; what it
// passed over is claimed from the start again.
func testClaimOutboxAfter(t *testing.T, s core.Store) {
	ctx := t.Context()
	now := time.Now()
	var tasks []core.Task
	for i := range 4 {
		task := newTask(t, s)
		tasks = append(tasks, task)
		for j := range 2 {
			if err := s.AddOutbox(ctx, core.OutboxMessage{TaskID: task.ID, Kind: core.OutboxPost, Payload: fmt.Sprintf("t%d.%d", i, j)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	claim := func(owner string, after int64) []string {
		t.Helper()
		msgs, err := s.ClaimOutbox(ctx, core.PlatformSlack, owner, now, time.Hour, 2, after)
		if err != nil {
			t.Fatalf("ClaimOutbox(after %d): %v", after, err)
		}
		return payloads(msgs)
	}
	if d := diff([]string{"t2.0", "t3.0"}, claim("one", tasks[1].ID)); d != "" {
		t.Errorf("a claim past the second task:\n%s", d)
	}
	if got := claim("one", tasks[3].ID); len(got) != 0 {
		t.Errorf("a claim past the last task returned %v", got)
	}
	if d := diff([]string{"t0.0", "t1.0"}, claim("two", 0)); d != "" {
		t.Errorf("a claim from the start after it:\n%s", d)
	}
}

// testClaimOutboxOrder: owners taking turns deliver each task's messages
// in the order written.
func testClaimOutboxOrder(t *testing.T, s core.Store) {
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
		msgs, err := s.ClaimOutbox(ctx, core.PlatformSlack, fmt.Sprint("owner-", round%3), time.Now(), time.Hour, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		if len(msgs) > 2 || round > 20 {
			t.Fatalf("round %d: %d claimed messages, want at most one per task", round, len(msgs))
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

// testClaimOutboxConcurrent: owners claiming and settling at once, as
// deliverers of several processes do, claim every message exactly once
// and each task's messages in order.
func testClaimOutboxConcurrent(t *testing.T, s core.Store) {
	ctx := t.Context()
	const tasks, each, owners = 20, 8, 8
	ids := map[int64]bool{}
	for range tasks {
		task := newTask(t, s)
		ids[task.ID] = true
		var msgs []core.OutboxMessage
		for i := range each {
			msgs = append(msgs, core.OutboxMessage{TaskID: task.ID, Kind: core.OutboxPost, Payload: fmt.Sprint(i)})
		}
		if err := s.AddOutbox(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	claims := map[int64]int{}    // message id → times claimed; guarded by mu
	order := map[int64][]int64{} // task → seqs in the order claimed; guarded by mu
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, owners)
	for o := range owners {
		wg.Go(func() {
			<-start
			owner := fmt.Sprint("owner-", o)
			for idle := 0; idle < 50; {
				msgs, err := s.ClaimOutbox(ctx, core.PlatformSlack, owner, time.Now(), time.Hour, 3, 0)
				if err != nil {
					errs <- err
					return
				}
				if len(msgs) == 0 {
					idle++
					mu.Lock()
					done := len(claims) == tasks*each
					mu.Unlock()
					if done {
						return
					}
					time.Sleep(time.Millisecond)
					continue
				}
				idle = 0
				for _, m := range msgs {
					mu.Lock()
					claims[m.ID]++
					order[m.TaskID] = append(order[m.TaskID], m.Seq)
					mu.Unlock()
					if err := s.OutboxSent(ctx, m.ID, owner); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(claims) != tasks*each {
		t.Errorf("%d messages claimed, want %d", len(claims), tasks*each)
	}
	for id, n := range claims {
		if n != 1 {
			t.Errorf("message %d claimed %d times, want once", id, n)
		}
	}
	for task, seqs := range order {
		if !ids[task] || !slices.IsSorted(seqs) || len(seqs) != each {
			t.Errorf("task %d: messages claimed in Seq order %v, want 1…%d in order", task, seqs, each)
		}
	}
}
