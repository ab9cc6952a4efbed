package sqlite

import (
	"context"
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
