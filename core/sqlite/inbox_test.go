package sqlite

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

// readOnly makes every write of s fail as on a read-only file, until the
// returned restore is called.
func readOnly(t *testing.T, s *Store) (restore func()) {
	t.Helper()
	// The writer pool holds one connection: the pragma holds for every
	// write until it is lifted.
	if _, err := s.writer.ExecContext(t.Context(), `PRAGMA query_only = 1`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := s.writer.ExecContext(context.Background(), `PRAGMA query_only = 0`); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHeartbeatFollowsWrites: the heartbeat fails while the store cannot
// write, though Ping still reaches the file, and passes again after.
func TestHeartbeatFollowsWrites(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	if err := s.Heartbeat(ctx); err != nil {
		t.Fatalf("Heartbeat on a healthy store: %v", err)
	}
	restore := readOnly(t, s)
	if err := s.Heartbeat(ctx); err == nil {
		t.Error("Heartbeat passed while the store cannot write")
	}
	if _, _, err := s.AddInbox(ctx, core.InboxEvent{Platform: core.PlatformSlack, Key: "Ev1", Payload: []byte("{}"), ReceivedAt: time.Now(), DueAt: time.Now()}); err == nil {
		t.Error("AddInbox passed while the store cannot write")
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping = %v; it reaches the file without writing", err)
	}
	restore()
	if err := s.Heartbeat(ctx); err != nil {
		t.Errorf("Heartbeat after the store can write again: %v", err)
	}
}

// TestAddInboxWaitsForTheDisk: an inbox event, which the caller then
// acknowledges, is answered only once an fdatasync of the WAL begun after
// its commit has ended, while the writes that need not wait for the disk
// go on meanwhile; when the sync fails, AddInbox fails.
func TestAddInboxWaitsForTheDisk(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	entered, release := make(chan *os.File), make(chan error)
	s.syncer.fdatasync = func(f *os.File) error {
		entered <- f
		return <-release
	}
	add := func(key string) chan error {
		res := make(chan error, 1)
		go func() {
			_, _, err := s.AddInbox(ctx, core.InboxEvent{Platform: core.PlatformSlack, Key: key, Payload: []byte("{}"), ReceivedAt: time.Now(), DueAt: time.Now()})
			res <- err
		}()
		return res
	}

	added := add("Ev1")
	var f *os.File
	select {
	case f = <-entered: // Ev1 is committed and its sync has begun
	case err := <-added:
		t.Fatalf("AddInbox returned (%v) without syncing the WAL", err)
	}
	if want := s.path + "-wal"; f.Name() != want {
		t.Errorf("synced %s, want the WAL %s", f.Name(), want)
	}
	if err := s.Heartbeat(ctx); err != nil {
		t.Fatalf("a write that need not wait for the disk, while the sync runs: %v", err)
	}
	select {
	case err := <-added:
		t.Fatalf("AddInbox returned (%v) before the WAL was synced", err)
	default:
	}
	release <- nil
	if err := <-added; err != nil {
		t.Fatalf("AddInbox after the sync: %v", err)
	}

	failed := add("Ev2")
	<-entered
	release <- errors.New("EIO")
	if err := <-failed; err == nil || !strings.Contains(err.Error(), "EIO") {
		t.Errorf("AddInbox when the sync failed = %v, want the sync's error", err)
	}
}

// TestStageInboxBeforeTheDisk: a staged event is stored and seen by
// readers while the WAL's sync still runs, and its durable returns only
// once that sync has ended, with the sync's error when it failed.
func TestStageInboxBeforeTheDisk(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	entered, release := make(chan struct{}), make(chan error)
	s.syncer.fdatasync = func(*os.File) error {
		entered <- struct{}{}
		return <-release
	}
	stage := func(key string) (core.InboxEvent, func(context.Context) error) {
		t.Helper()
		e, first, durable, err := s.StageInbox(ctx, core.InboxEvent{Platform: core.PlatformSlack, Key: key, Payload: []byte("{}"), ReceivedAt: time.Now(), DueAt: time.Now()})
		if err != nil || !first {
			t.Fatalf("StageInbox(%s) = first %v, %v", key, first, err)
		}
		return e, durable
	}
	e, durable := stage("Ev1")
	<-entered // the sync began: StageInbox returned without waiting for it
	var n int
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM inbox WHERE id = ?`, e.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("readers find %d events of id %d (%v), want the staged one", n, e.ID, err)
	}
	done := make(chan error, 1)
	go func() { done <- durable(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("durable returned (%v) before the WAL was synced", err)
	default:
	}
	release <- nil
	if err := <-done; err != nil {
		t.Fatalf("durable after the sync: %v", err)
	}

	_, durable = stage("Ev2")
	<-entered
	release <- errors.New("EIO")
	if err := durable(ctx); err == nil || !strings.Contains(err.Error(), "EIO") {
		t.Errorf("durable when the sync failed = %v, want the sync's error", err)
	}
}
