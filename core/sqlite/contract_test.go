package sqlite

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/storetest"
	"github.com/google/go-cmp/cmp"
)

// TestContract runs core.Store's contract suite, each test on a store of
// its own: a fresh file and workspace root (see newStore).
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) core.Store { return newStore(t) })
}

// What follows checks what the contract cannot see through core.Store.

// TestWorkspaceRoot: a task created without a workspace gets one under
// Options.WorkspaceRoot (the contract suite checks the name under it).
func TestWorkspaceRoot(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "ws")
	s, err := Open(t.Context(), filepath.Join(dir, "baton.db"), Options{WorkspaceRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	task := newTask(t, s)
	if filepath.Dir(task.Workspace) != root || !strings.HasPrefix(filepath.Base(task.Workspace), strconv.FormatInt(task.ID, 10)+"-") {
		t.Errorf("workspace %q: want %s/<id>-<suffix>", task.Workspace, root)
	}
}

// TestOutboxFailRecorded: a message given up on keeps its try count, its
// last error and its last next try (Outbox reads it; the contract suite
// sees only that it is no longer due and counted failed).
func TestOutboxFailRecorded(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	now := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	task := newTask(t, s)
	if err := s.AddOutbox(ctx, core.OutboxMessage{TaskID: task.ID, Kind: core.OutboxPost, Payload: "p"}); err != nil {
		t.Fatal(err)
	}
	due, err := s.DueOutbox(ctx, core.PlatformSlack, now, 0)
	if err != nil || len(due) != 1 {
		t.Fatalf("due = %+v, %v", due, err)
	}
	id := due[0].ID
	if err := s.OutboxRetry(ctx, id, now.Add(time.Second), "429"); err != nil {
		t.Fatal(err)
	}
	if err := s.OutboxFail(ctx, id, "channel gone"); err != nil {
		t.Fatal(err)
	}
	failed, err := s.Outbox(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := core.OutboxMessage{ID: id, TaskID: task.ID, Seq: 1, Kind: core.OutboxPost, Payload: "p",
		State: core.OutboxFailed, Tries: 2, NextTryAt: now.Add(time.Second), LastError: "channel gone", CreatedAt: failed.CreatedAt}
	if diff := cmp.Diff(want, failed); diff != "" {
		t.Errorf("failed message (-want +got):\n%s", diff)
	}
	if _, err := s.Outbox(ctx, 999); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("Outbox(999): %v, want ErrNotFound", err)
	}
}
