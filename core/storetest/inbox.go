package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

func testInbox(t *testing.T, s core.Store) {
	ctx := t.Context()
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	lease := time.Minute
	ev := func(key string, at time.Time) core.InboxEvent {
		return core.InboxEvent{Platform: core.PlatformSlack, Key: key, Payload: []byte(`{"event_id":"` + key + `"}`), ReceivedAt: at, DueAt: at.Add(lease)}
	}
	a, first, err := s.AddInbox(ctx, ev("Ev1", t0))
	if err != nil || !first || a.ID == 0 || a.Tries != 1 || string(a.Payload) != `{"event_id":"Ev1"}` {
		t.Fatalf("AddInbox = %+v, %v, %v", a, first, err)
	}
	again, first, err := s.AddInbox(ctx, ev("Ev1", t0.Add(time.Second)))
	if err != nil || first || again.ID != a.ID || !again.ReceivedAt.Equal(t0) {
		t.Errorf("second AddInbox of Ev1 = %+v, %v, %v; want the first event, not first", again, first, err)
	}
	if _, first, err := s.AddInbox(ctx, core.InboxEvent{Platform: core.PlatformDiscord, Key: "Ev1", Payload: []byte("{}"), ReceivedAt: t0, DueAt: t0}); err != nil || !first {
		t.Errorf("Ev1 of another platform: first %v, %v", first, err)
	}
	b, _, err := s.AddInbox(ctx, ev("Ev2", t0.Add(time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}

	// Owned by their adder until due.
	if got, err := s.ClaimInbox(ctx, core.PlatformSlack, t0.Add(lease-time.Millisecond), lease, 10); err != nil || len(got) != 0 {
		t.Errorf("claim before the events are due = %+v, %v; want none", got, err)
	}
	now := t0.Add(2 * lease)
	got, err := s.ClaimInbox(ctx, core.PlatformSlack, now, lease, 10)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range got {
		keys = append(keys, e.Key)
		if e.Tries != 2 || !e.DueAt.Equal(now.Add(lease)) || e.Platform != core.PlatformSlack {
			t.Errorf("claimed %+v: want tries 2, due at %v", e, now.Add(lease))
		}
	}
	if d := diff([]string{"Ev1", "Ev2"}, keys); d != "" {
		t.Errorf("claimed:\n%s", d)
	}
	if got, _ := s.ClaimInbox(ctx, core.PlatformSlack, now, lease, 10); len(got) != 0 {
		t.Errorf("claimed again within the lease: %+v", got)
	}

	if err := s.InboxRetry(ctx, a.ID, now.Add(time.Second), "store full"); err != nil {
		t.Fatal(err)
	}
	got, err = s.ClaimInbox(ctx, core.PlatformSlack, now.Add(time.Second), lease, 10)
	if err != nil || len(got) != 1 || got[0].ID != a.ID || got[0].Tries != 3 || got[0].LastError != "store full" {
		t.Errorf("claim after a retry = %+v, %v; want Ev1 once more with its error", got, err)
	}
	if err := s.InboxDone(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.InboxDone(ctx, b.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("InboxDone twice = %v, want ErrNotFound", err)
	}
	// Removed, its key is free again: a later delivery is a new event
	// (the conversation service drops it as a repeat).
	if _, first, err := s.AddInbox(ctx, ev("Ev2", now)); err != nil || !first {
		t.Errorf("Ev2 after it was handled: first %v, %v", first, err)
	}
	if got, _ := s.ClaimInbox(ctx, core.PlatformSlack, now.Add(time.Hour), lease, 1); len(got) != 1 || got[0].Key != "Ev1" {
		t.Errorf("claim with limit 1 = %+v, want the oldest", got)
	}
}
