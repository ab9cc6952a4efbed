package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

// The store's clock decides when a lease ends (see core.LeaseStore), so
// these tests cannot hand it a time: a lease meant to outlast a test is an
// hour long, one meant to run out is a millisecond long and is waited for
// until it has, with a generous deadline.

// acquire calls AcquireLease, failing t on an error.
func acquire(t *testing.T, s core.Store, name, owner string, ttl time.Duration) bool {
	t.Helper()
	held, err := s.AcquireLease(t.Context(), name, owner, ttl)
	if err != nil {
		t.Fatalf("AcquireLease(%s, %s): %v", name, owner, err)
	}
	return held
}

// untilAcquired tries to take name for owner until it does, for up to 30
// seconds.
func untilAcquired(t *testing.T, s core.Store, name, owner string, ttl time.Duration) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !acquire(t, s, name, owner, ttl) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never took the lease %s", owner, name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testLeaseExclusive(t *testing.T, s core.Store) {
	if !acquire(t, s, "discord", "a", time.Hour) {
		t.Fatal("a free lease was refused")
	}
	if acquire(t, s, "discord", "b", time.Hour) {
		t.Error("b took the lease a holds")
	}
	if !acquire(t, s, "other", "b", time.Hour) {
		t.Error("b was refused another name")
	}
	if !acquire(t, s, "discord", "a", time.Hour) {
		t.Error("a's renewal was refused")
	}
	for _, bad := range []struct {
		name, owner string
		ttl         time.Duration
	}{{"", "a", time.Hour}, {"discord", "", time.Hour}, {"discord", "a", 0}, {"discord", "a", time.Microsecond}} {
		if held, err := s.AcquireLease(t.Context(), bad.name, bad.owner, bad.ttl); err == nil || held {
			t.Errorf("AcquireLease(%q, %q, %s) = %v, %v; want an error", bad.name, bad.owner, bad.ttl, held, err)
		}
	}
}

func testLeaseRenew(t *testing.T, s core.Store) {
	if !acquire(t, s, "discord", "a", 20*time.Millisecond) {
		t.Fatal("a free lease was refused")
	}
	// Renewed for an hour (or, on a machine slow enough for the first
	// term to have run out, taken anew): the first end no longer counts.
	if !acquire(t, s, "discord", "a", time.Hour) {
		t.Fatal("a's renewal was refused")
	}
	time.Sleep(50 * time.Millisecond)
	if acquire(t, s, "discord", "b", time.Hour) {
		t.Error("b took the lease after its first end, though a renewed it for an hour")
	}
}

func testLeaseExpiry(t *testing.T, s core.Store) {
	if !acquire(t, s, "discord", "a", time.Millisecond) {
		t.Fatal("a free lease was refused")
	}
	untilAcquired(t, s, "discord", "b", time.Hour)
	if acquire(t, s, "discord", "a", time.Hour) {
		t.Error("a renewed a lease that ran out and was taken over")
	}
	if err := s.ReleaseLease(t.Context(), "discord", "a"); err != nil {
		t.Fatal(err)
	}
	if acquire(t, s, "discord", "c", time.Hour) {
		t.Error("a's release freed b's lease")
	}
}

func testLeaseRelease(t *testing.T, s core.Store) {
	ctx := t.Context()
	if err := s.ReleaseLease(ctx, "never", "a"); err != nil {
		t.Errorf("releasing a lease no one holds: %v", err)
	}
	if !acquire(t, s, "discord", "a", time.Hour) {
		t.Fatal("a free lease was refused")
	}
	if err := s.ReleaseLease(ctx, "discord", "a"); err != nil {
		t.Fatal(err)
	}
	if !acquire(t, s, "discord", "b", time.Hour) {
		t.Error("b waited for a lease a had released")
	}
	if err := s.ReleaseLease(ctx, "discord", "c"); err != nil {
		t.Fatal(err)
	}
	if acquire(t, s, "discord", "c", time.Hour) {
		t.Error("c's release freed b's lease")
	}
}

// testLeaseRace: of many owners acquiring at once exactly one gets the
// lease, whether it was free or its holder's time ran out.
func testLeaseRace(t *testing.T, s core.Store) {
	// race has 20 owners named after round acquire name at once and
	// returns those that got it.
	race := func(name string, round int) (winners []string) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 20 {
			owner := fmt.Sprintf("owner-%d-%d", round, i)
			wg.Go(func() {
				held, err := s.AcquireLease(t.Context(), name, owner, time.Hour)
				if err != nil {
					t.Errorf("AcquireLease(%s): %v", owner, err)
				}
				if held {
					mu.Lock()
					defer mu.Unlock()
					winners = append(winners, owner)
				}
			})
		}
		wg.Wait()
		return winners
	}
	if w := race("free", 0); len(w) != 1 {
		t.Errorf("racing for a free lease: winners %q, want one", w)
	}
	// A lease about to run out: the racers may come too early and all be
	// refused, then they race again; never may two win.
	if !acquire(t, s, "expiring", "holder", time.Millisecond) {
		t.Fatal("a free lease was refused")
	}
	deadline := time.Now().Add(30 * time.Second)
	for round := 1; ; round++ {
		w := race("expiring", round)
		if len(w) > 1 {
			t.Fatalf("racing for a lease that ran out: winners %q, want one", w)
		}
		if len(w) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no racer ever took a lease that ran out")
		}
	}
}
