package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

func testSeenInbound(t *testing.T, s core.Store) {
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

func testSeenInboundConcurrent(t *testing.T, s core.Store) {
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
