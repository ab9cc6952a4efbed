package sqlite

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/baton-bot/baton/core"
)

// copyFile copies src to dst (a consistent copy: the store that wrote src
// is closed).
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func openAt(t *testing.T, path, root string, log *slog.Logger) *Store {
	t.Helper()
	s, err := Open(t.Context(), path, Options{WorkspaceRoot: root, Logger: log})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestWorkspaceNamesNeverRepeat: a store restored from an older copy hands
// out task ids again, but never a workspace it handed out before.
func TestWorkspaceNamesNeverRepeat(t *testing.T) {
	dir := t.TempDir()
	path, root := filepath.Join(dir, "baton.db"), filepath.Join(dir, "workspaces")
	s := openAt(t, path, root, nil)
	first := newTask(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	copyFile(t, path, filepath.Join(dir, "backup.db"))

	s = openAt(t, path, root, nil)
	lost := newTask(t, s) // recorded only in the file about to be lost
	id, err := s.StoreID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	copyFile(t, filepath.Join(dir, "backup.db"), path)

	s = openAt(t, path, root, nil)
	again := newTask(t, s)
	if again.ID != lost.ID {
		t.Fatalf("restored store gave id %d, want %d again (the premise of this test)", again.ID, lost.ID)
	}
	if again.Workspace == lost.Workspace || again.Workspace == first.Workspace {
		t.Errorf("task %d of the restored store got workspace %s; the lost task %d had %s", again.ID, again.Workspace, lost.ID, lost.Workspace)
	}
	if got, err := s.StoreID(t.Context()); err != nil || got != id {
		t.Errorf("StoreID of the restored copy = %q, %v; want %q (a copy keeps it)", got, err, id)
	}
	ws, err := s.Workspaces(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || !strings.Contains(strings.Join(ws, "\n"), again.Workspace) {
		t.Errorf("Workspaces = %q; want the two tasks' workspaces", ws)
	}

	other := openAt(t, filepath.Join(dir, "other.db"), root, nil)
	if oid, err := other.StoreID(t.Context()); err != nil || oid == id || len(oid) != 32 {
		t.Errorf("StoreID of a new store = %q, %v; want 32 hex digits other than %q", oid, err, id)
	}
}

// syncBuffer is a log sink for tests.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestStoreFileReplaced: once the file at the store's path is another
// (a copy renamed over it) or none (unlinked), Ping and every write fail
// with core.ErrStoreReplaced, nothing is written into the old file, and
// the store says so in its log once.
func TestStoreFileReplaced(t *testing.T) {
	for _, how := range []string{"renamed over", "unlinked"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "baton.db")
			var logs syncBuffer
			s := openAt(t, path, filepath.Join(dir, "ws"), slog.New(slog.NewTextHandler(&logs, nil)))
			task := newTask(t, s)
			if err := s.Ping(t.Context()); err != nil {
				t.Fatalf("Ping before: %v", err)
			}
			switch how {
			case "renamed over":
				copyFile(t, path, filepath.Join(dir, "copy.db"))
				if err := os.Rename(filepath.Join(dir, "copy.db"), path); err != nil {
					t.Fatal(err)
				}
			case "unlinked":
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				if err := s.Ping(t.Context()); !errors.Is(err, core.ErrStoreReplaced) {
					t.Errorf("Ping after the file was %s: %v, want ErrStoreReplaced", how, err)
				}
			}
			if _, err := s.AddComment(t.Context(), core.Comment{TaskID: task.ID, Text: "lost?"}); !errors.Is(err, core.ErrStoreReplaced) {
				t.Errorf("AddComment: %v, want ErrStoreReplaced", err)
			}
			if _, _, err := s.EnsureTask(t.Context(), core.Task{Thread: core.ThreadRef{Platform: core.PlatformSlack, Thread: "new"}}); !errors.Is(err, core.ErrStoreReplaced) {
				t.Errorf("EnsureTask: %v, want ErrStoreReplaced", err)
			}
			if got, _ := s.RecentComments(t.Context(), task.ID, 10); len(got) != 0 {
				t.Errorf("a comment was written after the file was %s: %+v", how, got)
			}
			if n := strings.Count(logs.String(), "deleted or replaced"); n != 1 {
				t.Errorf("logged the replacement %d times, want once; log:\n%s", n, logs.String())
			}
		})
	}
}
