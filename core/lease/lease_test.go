package lease

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// memStore is core.LeaseStore in memory, by this process's clock, with
// faults a test switches on.
type memStore struct {
	mu      sync.Mutex
	owner   map[string]string // guarded by mu, like every field below
	until   map[string]time.Time
	fail    error          // every call fails with it
	hang    bool           // acquisitions wait for their context to end
	noFree  bool           // releases do nothing, as a killed process releases nothing
	acquire map[string]int // calls by owner
}

func newMemStore() *memStore {
	return &memStore{owner: map[string]string{}, until: map[string]time.Time{}, acquire: map[string]int{}}
}

func (m *memStore) AcquireLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	m.acquire[owner]++
	if m.hang {
		m.mu.Unlock()
		<-ctx.Done()
		return false, ctx.Err()
	}
	defer m.mu.Unlock()
	if m.fail != nil {
		return false, m.fail
	}
	now := time.Now()
	if o, ok := m.owner[name]; ok && o != owner && now.Before(m.until[name]) {
		return false, nil
	}
	m.owner[name], m.until[name] = owner, now.Add(ttl)
	return true, nil
}

func (m *memStore) ReleaseLease(ctx context.Context, name, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	if !m.noFree && m.owner[name] == owner {
		delete(m.owner, name)
	}
	return nil
}

func (m *memStore) set(f func(m *memStore)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
}

func (m *memStore) holder(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Now().After(m.until[name]) {
		return ""
	}
	return m.owner[name]
}

// terms counts the terms of the holders of one test: how many ran, how many
// run now, and the most that ever ran at once.
type terms struct {
	mu       sync.Mutex
	started  map[string]int // guarded by mu, like every field below
	running  map[string]bool
	overlaps int
}

func newTerms() *terms { return &terms{started: map[string]int{}, running: map[string]bool{}} }

// term is a term of owner that runs until its context ends.
func (ts *terms) term(owner string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		ts.mu.Lock()
		for o, r := range ts.running {
			if r && o != owner {
				ts.overlaps++
			}
		}
		ts.started[owner]++
		ts.running[owner] = true
		ts.mu.Unlock()
		<-ctx.Done()
		ts.mu.Lock()
		defer ts.mu.Unlock()
		ts.running[owner] = false
		return nil
	}
}

func (ts *terms) overlapped() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.overlaps
}

func (ts *terms) state(owner string) (started int, running bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.started[owner], ts.running[owner]
}

// eventually waits until cond holds, for up to 30 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// start runs a Holder of "discord" for owner on st until the returned stop
// is called; stop waits for Run and returns its error.
func start(t *testing.T, st *memStore, ts *terms, owner string, ttl, every time.Duration) (*Holder, func() error) {
	t.Helper()
	h, err := New(st, Config{Name: "discord", Owner: owner, TTL: ttl, Every: every})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx, ts.term(owner)) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() { stop() })
	return h, stop
}

// TestOneHolderAndHandOver: of two holders one runs its term; when it
// stops it releases the lease and the other takes over without waiting for
// the hour-long TTL.
func TestOneHolderAndHandOver(t *testing.T) {
	st, ts := newMemStore(), newTerms()
	a, stopA := start(t, st, ts, "a", time.Hour, 20*time.Millisecond)
	eventually(t, "a holds the lease", a.Held)
	b, _ := start(t, st, ts, "b", time.Hour, 20*time.Millisecond)
	eventually(t, "b tried twice", func() bool { st.mu.Lock(); defer st.mu.Unlock(); return st.acquire["b"] >= 2 })
	if b.Held() || st.holder("discord") != "a" {
		t.Fatalf("b holds %v, the store says %q holds the lease; want a alone", b.Held(), st.holder("discord"))
	}
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	if _, running := ts.state("a"); running || a.Held() {
		t.Error("a's term still runs after Run returned")
	}
	eventually(t, "b takes over", b.Held)
	if n := ts.overlapped(); n != 0 {
		t.Errorf("terms overlapped %d times", n)
	}
}

// TestTakeOverFromTheDead: a holder that stops without releasing (killed)
// is replaced once its lease ran out.
func TestTakeOverFromTheDead(t *testing.T) {
	st, ts := newMemStore(), newTerms()
	a, stopA := start(t, st, ts, "a", 200*time.Millisecond, 20*time.Millisecond)
	eventually(t, "a holds the lease", a.Held)
	b, _ := start(t, st, ts, "b", 200*time.Millisecond, 20*time.Millisecond)
	st.set(func(m *memStore) { m.noFree = true })
	stopA()
	eventually(t, "b takes over", b.Held)
	if n := ts.overlapped(); n != 0 {
		t.Errorf("terms overlapped %d times", n)
	}
}

// TestStepDown: a holder whose renewal is refused (another owns the
// lease), fails, or is not answered ends its term at once and takes the
// lease again once it can.
func TestStepDown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(m *memStore)
		heal  func(m *memStore)
	}{
		{"refused", func(m *memStore) { m.owner["discord"], m.until["discord"] = "thief", time.Now().Add(time.Hour) },
			func(m *memStore) { delete(m.owner, "discord") }},
		{"failed", func(m *memStore) { m.fail = errors.New("connection refused") }, func(m *memStore) { m.fail = nil }},
		{"unanswered", func(m *memStore) { m.hang = true }, func(m *memStore) { m.hang = false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ts := newMemStore(), newTerms()
			a, _ := start(t, st, ts, "a", time.Hour, 20*time.Millisecond)
			eventually(t, "a holds the lease", a.Held)
			st.set(tc.fault)
			eventually(t, "a's term ends", func() bool { _, running := ts.state("a"); return !running && !a.Held() })
			st.set(tc.heal)
			eventually(t, "a holds the lease again", func() bool { n, running := ts.state("a"); return n == 2 && running })
		})
	}
}

// TestUnansweredRenewalEndsTheTermInTime: a renewal the store never
// answers ends the term one interval after it began, before the lease
// taken by the last answered renewal can run out.
func TestUnansweredRenewalEndsTheTermInTime(t *testing.T) {
	st, ts := newMemStore(), newTerms()
	const ttl, every = 3 * time.Second, time.Second
	a, _ := start(t, st, ts, "a", ttl, every)
	eventually(t, "a holds the lease", a.Held)
	var until time.Time
	st.set(func(m *memStore) { m.hang, until = true, m.until["discord"] })
	eventually(t, "a's term ends", func() bool { _, running := ts.state("a"); return !running })
	if now := time.Now(); !now.Before(until) {
		t.Errorf("the term ended %s after the lease ran out", now.Sub(until))
	}
}

// TestTermEndsRun: a term that returns by itself ends Run with its error,
// and the lease is released.
func TestTermEndsRun(t *testing.T) {
	st := newMemStore()
	h, err := New(st, Config{Name: "discord", Owner: "a", TTL: time.Hour, Every: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("the token was refused")
	if err := h.Run(t.Context(), func(context.Context) error { return refused }); !errors.Is(err, refused) {
		t.Errorf("Run = %v, want the term's error", err)
	}
	if got := st.holder("discord"); got != "" || h.Held() {
		t.Errorf("after Run %q holds the lease (held %v); want it released", got, h.Held())
	}
}

func TestNewRefuses(t *testing.T) {
	for _, cfg := range []Config{{}, {Name: "discord", TTL: time.Second, Every: time.Second}} {
		if _, err := New(newMemStore(), cfg); err == nil {
			t.Errorf("New(%+v) passed", cfg)
		}
	}
	h, err := New(newMemStore(), Config{Name: "discord"})
	if err != nil || h.cfg.TTL != DefaultTTL || h.cfg.Every != DefaultEvery || h.cfg.Owner == "" {
		t.Errorf("New with defaults = %+v, %v", h.cfg, err)
	}
}
