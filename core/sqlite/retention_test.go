package sqlite

import (
	"bytes"
	"database/sql"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/storetest"
)

func autoVacuum(t *testing.T, s *Store) int {
	t.Helper()
	var mode int
	if err := s.reader.DB.QueryRowContext(t.Context(), `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	return mode
}

func freePages(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.reader.DB.QueryRowContext(t.Context(), `PRAGMA freelist_count`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// oldComments stores n comments of a year and a half ago, each a few
// kilobytes, on a task of their own.
func oldComments(t *testing.T, s *Store, n int) core.Task {
	t.Helper()
	task := newTask(t, s)
	for i := range n {
		if _, err := s.AddComment(t.Context(), core.Comment{TaskID: task.ID, Role: core.RoleUser,
			Text: strings.Repeat("x", 4000), CreatedAt: time.Now().AddDate(-1, -6, -i)}); err != nil {
			t.Fatal(err)
		}
	}
	return task
}

// TestPruneHandsPagesBack: a new store is made with auto_vacuum=INCREMENTAL,
// and the pages pruning frees go back to the file system rather than stay
// on the free list.
func TestPruneHandsPagesBack(t *testing.T) {
	s := newStore(t)
	if got := autoVacuum(t, s); got != autoVacuumIncremental {
		t.Fatalf("auto_vacuum = %d, want %d (INCREMENTAL)", got, autoVacuumIncremental)
	}
	oldComments(t, s, 200)
	for {
		n, err := s.Prune(t.Context(), core.Retention{Comments: 365 * 24 * time.Hour}, 50)
		if err != nil {
			t.Fatal(err)
		}
		if n.Total() == 0 {
			break
		}
	}
	if free := freePages(t, s); free != 0 {
		t.Errorf("%d free pages left after pruning, want none (each step hands up to %d back)", free, vacuumPages)
	}
}

// TestPruneOnAStoreMadeBefore: a store whose file was made without
// auto_vacuum opens, says so in the log, and prunes; its freed pages stay
// on the free list for new rows.
func TestPruneOnAStoreMadeBefore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "baton.db")
	plain, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Exec(`CREATE TABLE earlier (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	plain.Close()
	var logged bytes.Buffer
	s, err := Open(t.Context(), path, Options{WorkspaceRoot: filepath.Join(dir, "ws"), Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := autoVacuum(t, s); got != 0 {
		t.Fatalf("auto_vacuum = %d on a file made before, want 0 (SQLite keeps it)", got)
	}
	if !strings.Contains(logged.String(), "auto_vacuum=INCREMENTAL; VACUUM") {
		t.Errorf("no word in the log of how to convert the store:\n%s", logged.String())
	}
	oldComments(t, s, 50)
	got, err := s.Prune(t.Context(), core.Retention{Comments: 365 * 24 * time.Hour}, 100)
	if err != nil || got.Comments != 50 {
		t.Fatalf("Prune = %+v, %v; want the 50 old comments", got, err)
	}
	if freePages(t, s) == 0 {
		t.Error("no free pages after pruning a store without auto_vacuum: where did the pages go?")
	}
}

// TestPruneAhead runs storetest.PruneAhead: a clock set back never prunes
// "the future".
func TestPruneAhead(t *testing.T) {
	s := newStore(t)
	storetest.PruneAhead(t, s, func(t *testing.T, jobID int64, at time.Time) {
		err := s.tx(t.Context(), func(tx *txn) error {
			if _, err := tx.ExecContext(t.Context(), `UPDATE jobs SET finished_at = ? WHERE id = ?`, ms(at), jobID); err != nil {
				return err
			}
			_, err := tx.ExecContext(t.Context(), `UPDATE job_events SET at = ? WHERE job_id = ?`, ms(at), jobID)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
