package postgres

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

// TestInboxLease: concurrent claims never take the same event; a claimed
// event is the claimer's until its lease ends, then due again.
func TestInboxLease(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	lease := time.Minute
	const events = 30
	for i := range events {
		e := core.InboxEvent{Platform: core.PlatformSlack, Key: fmt.Sprintf("Ev%02d", i), Payload: []byte("{}"),
			ReceivedAt: t0.Add(time.Duration(i) * time.Millisecond), DueAt: t0}
		if _, first, err := s.AddInbox(ctx, e); err != nil || !first {
			t.Fatalf("AddInbox %d: first %v, %v", i, first, err)
		}
	}
	if _, first, err := s.AddInbox(ctx, core.InboxEvent{Platform: core.PlatformSlack, Key: "Ev00", Payload: []byte("{}")}); err != nil || first {
		t.Errorf("second AddInbox of Ev00: first %v, %v; want false", first, err)
	}

	now := t0.Add(time.Second)
	var mu sync.Mutex
	claimed := map[int64]int{}
	together(4, func(int) {
		for {
			got, err := s.ClaimInbox(ctx, core.PlatformSlack, now, lease, 4)
			if err != nil {
				t.Error(err)
				return
			}
			if len(got) == 0 {
				return
			}
			mu.Lock()
			for _, e := range got {
				claimed[e.ID]++
				if e.Tries != 2 || !e.DueAt.Equal(now.Add(lease)) {
					t.Errorf("claimed %s: tries %d due %v; want 2 and %v", e.Key, e.Tries, e.DueAt, now.Add(lease))
				}
			}
			mu.Unlock()
		}
	})
	if len(claimed) != events {
		t.Errorf("%d events claimed, want %d", len(claimed), events)
	}
	for id, n := range claimed {
		if n != 1 {
			t.Errorf("event %d claimed %d times within its lease", id, n)
		}
	}
	if got, err := s.ClaimInbox(ctx, core.PlatformSlack, now.Add(lease-time.Millisecond), lease, 100); err != nil || len(got) != 0 {
		t.Errorf("claim before the leases end = %d events, %v; want none", len(got), err)
	}
	got, err := s.ClaimInbox(ctx, core.PlatformSlack, now.Add(lease), lease, 100)
	if err != nil || len(got) != events || got[0].Key != "Ev00" || got[events-1].Key != fmt.Sprintf("Ev%02d", events-1) {
		t.Errorf("claim once the leases end = %d events, %v; want all %d, oldest first", len(got), err, events)
	}
}
