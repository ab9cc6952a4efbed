package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// holdWriter keeps the writer loop busy until the returned release is
// called, so that the writes started meanwhile wait and then run as one
// group.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	held, free := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.tx(t.Context(), func(tx *txn) error {
			close(held)
			<-free
			return nil
		})
	}()
	<-held
	return func() {
		close(free)
		if err := <-done; err != nil {
			t.Errorf("holding write: %v", err)
		}
	}
}

// waitQueued waits until n writes wait for the writer.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(s.writes) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", len(s.writes), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// insertKey is a write storing an inbound key, then failing with fail
// when it is not nil (after its insert, which must then be undone).
func insertKey(key string, fail error) func(tx *txn) error {
	return func(tx *txn) error {
		if _, err := tx.ExecContext(context.Background(), `INSERT INTO inbound_events (key, seen_at) VALUES (?, 1)`, key); err != nil {
			return err
		}
		return fail
	}
}

func storedKeys(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.reader.QueryContext(t.Context(), `SELECT key FROM inbound_events ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return keys
}

// TestGroupedWritesFailAlone runs writes as one group: the ones that fail
// change nothing and report their own error; the others commit; a caller
// that gave up while waiting writes nothing.
func TestGroupedWritesFailAlone(t *testing.T) {
	s := newStore(t)
	release := holdWriter(t, s)
	errBoom := errors.New("boom")
	cancelled, cancel := context.WithCancel(t.Context())
	type call struct {
		key  string
		ctx  context.Context
		fail error
	}
	calls := []call{
		{"a", t.Context(), nil},
		{"b", t.Context(), errBoom},
		{"c", cancelled, nil},
		{"a", t.Context(), nil}, // a duplicate key: a constraint error of its own
		{"d", t.Context(), nil},
	}
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() { errs[i] = s.txOnce(c.ctx, insertKey(c.key, c.fail), false) })
		waitQueued(t, s, i+1) // keep the order
	}
	cancel()
	release()
	wg.Wait()

	if errs[0] != nil || errs[4] != nil {
		t.Errorf("the good writes failed: %v, %v", errs[0], errs[4])
	}
	if !errors.Is(errs[1], errBoom) {
		t.Errorf("failing write: err = %v, want %v", errs[1], errBoom)
	}
	if !errors.Is(errs[2], context.Canceled) {
		t.Errorf("cancelled write: err = %v, want context.Canceled", errs[2])
	}
	if errs[3] == nil {
		t.Error("duplicate key: err = nil, want a constraint error")
	}
	if diff := cmp.Diff([]string{"a", "d"}, storedKeys(t, s)); diff != "" {
		t.Errorf("stored keys (-want +got):\n%s", diff)
	}
}

// TestBrokenGroupRunsWritesAlone breaks a group's transaction from inside
// one write (as SQLite does on some errors): every other write still
// commits, alone.
func TestBrokenGroupRunsWritesAlone(t *testing.T) {
	s := newStore(t)
	release := holdWriter(t, s)
	breaker := func(tx *txn) error {
		_, err := tx.Tx.ExecContext(context.Background(), `ROLLBACK`)
		return err
	}
	fns := []func(tx *txn) error{insertKey("a", nil), breaker, insertKey("b", nil)}
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = s.txOnce(t.Context(), fn, false) })
		waitQueued(t, s, i+1)
	}
	release()
	wg.Wait()
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("the good writes failed: %v, %v", errs[0], errs[2])
	}
	if errs[1] == nil {
		t.Error("the write that broke its transaction: err = nil")
	}
	if diff := cmp.Diff([]string{"a", "b"}, storedKeys(t, s)); diff != "" {
		t.Errorf("stored keys (-want +got):\n%s", diff)
	}
	// The store goes on writing.
	if err := s.tx(t.Context(), insertKey("c", nil)); err != nil {
		t.Fatal(err)
	}
}

// TestWritesAfterClose fail with ErrClosed.
func TestWritesAfterClose(t *testing.T) {
	s := newStore(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.tx(t.Context(), insertKey("a", nil)); !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
}

// TestManyGroupedWrites stores from many goroutines at once; every write
// lands once.
func TestManyGroupedWrites(t *testing.T) {
	s := newStore(t)
	var wg sync.WaitGroup
	const n = 500
	errs := make(chan error, n)
	var firsts atomic.Int64
	for i := range n {
		wg.Go(func() {
			first, err := s.SeenInbound(t.Context(), fmt.Sprint(i%250), time.Now())
			if err != nil {
				errs <- err
			}
			if first {
				firsts.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := len(storedKeys(t, s)); got != 250 || firsts.Load() != 250 {
		t.Errorf("%d keys stored, %d reported first; want 250 and 250", got, firsts.Load())
	}
}
