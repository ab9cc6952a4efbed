package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/google/go-cmp/cmp"
)

// newStore opens a store on a fresh file in a temporary directory.
func newStore(t testing.TB) *Store {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(t.Context(), filepath.Join(dir, "db", "baton.db"), Options{WorkspaceRoot: filepath.Join(dir, "ws")})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

var threadN atomic.Int64

// newTask creates a task on a fresh Slack thread.
func newTask(t testing.TB, s *Store) core.Task {
	t.Helper()
	ref := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: fmt.Sprintf("17000.%d", threadN.Add(1))}
	task, _, err := s.EnsureTask(t.Context(), core.Task{Thread: ref, OwnerUser: "U1", Title: "a task"})
	if err != nil {
		t.Fatalf("EnsureTask: %v", err)
	}
	return task
}

func TestOpenMigrateReopen(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "nested", "dir", "baton.db")
	s, err := Open(ctx, path, Options{WorkspaceRoot: dir})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	task := newTask(t, s)
	if _, err := s.AddComment(ctx, core.Comment{TaskID: task.ID, Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	task, err = s.Task(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	s, err = Open(ctx, path, Options{WorkspaceRoot: dir})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate after reopen: %v", err)
	}
	got, err := s.Task(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(task, got); diff != "" {
		t.Errorf("task after reopen (-want +got):\n%s", diff)
	}
	cs, err := s.RecentComments(ctx, task.ID, 10)
	if err != nil || len(cs) != 1 || cs[0].Text != "hello" {
		t.Errorf("comments after reopen = %v, %v; want the one comment", cs, err)
	}
	var n int
	if err := s.reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if n != len(files) {
		t.Errorf("schema_migrations rows = %d, want one per migration (%d)", n, len(files))
	}
	var mode string
	if err := s.reader.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	var fk int
	if err := s.writer.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil {
		t.Fatal(err)
	}
	if fk != 1 {
		t.Errorf("foreign_keys = %d, want 1", fk)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

func TestOpenRefusesNonFilePaths(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file:x.db", "x.db?mode=ro"} {
		if s, err := Open(t.Context(), p, Options{}); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want an error", p)
		}
	}
}

func TestReaderIsReadOnly(t *testing.T) {
	s := newStore(t)
	if _, err := s.reader.ExecContext(t.Context(), `DELETE FROM tasks`); err == nil {
		t.Error("a write through the reader pool succeeded")
	}
}

// lockFile opens a second connection to the store's file with no busy
// timeout and holds the write lock until the returned function is called.
func lockFile(t testing.TB, s *Store) (release func()) {
	t.Helper()
	var path string
	if err := s.reader.QueryRowContext(t.Context(), `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", dsn(path, 0, true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { tx.Rollback() }) }
	t.Cleanup(release)
	return release
}

// busyStore opens a store that meets locks at once (no busy timeout), so
// the retry of whole transactions is what handles them.
func busyStore(t testing.TB) *Store {
	t.Helper()
	s, err := open(t.Context(), filepath.Join(t.TempDir(), "baton.db"), Options{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.backoff = time.Millisecond
	return s
}

func TestBusyWriteIsRetried(t *testing.T) {
	s := busyStore(t)
	release := lockFile(t, s)
	var tries []int
	s.onBusy = func(try int) {
		tries = append(tries, try)
		if try == 2 {
			release()
		}
	}
	first, err := s.SeenInbound(t.Context(), "k", time.Now())
	if err != nil {
		t.Fatalf("SeenInbound while another connection held the lock: %v", err)
	}
	if !first {
		t.Error("first = false, want true")
	}
	if diff := cmp.Diff([]int{1, 2}, tries); diff != "" {
		t.Errorf("busy retries (-want +got):\n%s", diff)
	}
}

func TestBusyWriteGivesUp(t *testing.T) {
	s := busyStore(t)
	lockFile(t, s)
	_, err := s.SeenInbound(t.Context(), "k", time.Now())
	if err == nil || !busy(err) || !strings.Contains(err.Error(), "gave up after 6 tries") {
		t.Fatalf("err = %v, want a busy error after 6 tries", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	s.onBusy = func(int) { cancel() }
	_, err = s.SeenInbound(ctx, "k", time.Now())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestConcurrentStores runs two stores on one file, as two processes
// sharing it would, writing at once.
func TestConcurrentStores(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "baton.db")
	var stores []*Store
	for range 2 {
		s, err := Open(t.Context(), path, Options{WorkspaceRoot: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	task := newTask(t, stores[0])
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 4 {
		s := stores[i%2]
		wg.Go(func() {
			for k := range 50 {
				if err := s.AddOutbox(t.Context(), core.OutboxMessage{TaskID: task.ID, Kind: core.OutboxPost, Payload: fmt.Sprint(i, k)}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("AddOutbox: %v", err)
	}
	var n, maxSeq int64
	if err := stores[1].reader.QueryRowContext(t.Context(), `SELECT COUNT(*), MAX(seq) FROM outbox WHERE task_id = ?`, task.ID).Scan(&n, &maxSeq); err != nil {
		t.Fatal(err)
	}
	if n != 200 || maxSeq != 200 {
		t.Errorf("outbox has %d messages, max seq %d; want 200 and 200", n, maxSeq)
	}
}

// TestConcurrentOpenOnFreshFile opens one new database file from several
// stores at once, as a gateway and its workers starting together do: every
// Open succeeds and the migrations are applied once.
func TestConcurrentOpenOnFreshFile(t *testing.T) {
	for round := range 20 {
		dir := t.TempDir()
		path := filepath.Join(dir, "baton.db")
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				s, err := Open(t.Context(), path, Options{WorkspaceRoot: dir})
				if err != nil {
					errs <- err
					return
				}
				if _, _, err := s.EnsureTask(t.Context(), core.Task{Thread: core.ThreadRef{Platform: core.PlatformAPI, Thread: "1"}}); err != nil {
					errs <- err
				}
				errs <- s.Close()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}

// TestCheckpointBesideTheWriter: commits never checkpoint (the writer's
// wal_autocheckpoint is 0), and the store's own checkpoint loop still
// copies a large WAL into the database file while the store is open.
func TestCheckpointBesideTheWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "baton.db")
	s, err := open(t.Context(), path, Options{checkpointEvery: 20 * time.Millisecond}, busyTimeoutMS)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var auto int
	if err := s.writer.QueryRowContext(t.Context(), `PRAGMA wal_autocheckpoint`).Scan(&auto); err != nil {
		t.Fatal(err)
	}
	if auto != 0 {
		t.Errorf("writer's wal_autocheckpoint = %d, want 0: commits would checkpoint", auto)
	}
	before := fileSize(t, path)
	// About 16 MB: four thousand pages, four times SQLite's own threshold.
	err = s.tx(t.Context(), func(tx *txn) error {
		if _, err := tx.Tx.ExecContext(t.Context(), `CREATE TABLE scratch (b BLOB)`); err != nil {
			return err
		}
		for range 2000 {
			if _, err := tx.Tx.ExecContext(t.Context(), `INSERT INTO scratch VALUES (randomblob(8000))`); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for fileSize(t, path) < before+15<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("database file is %d bytes 10 s after a 16 MB commit (%d before): the WAL was not checkpointed", fileSize(t, path), before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
