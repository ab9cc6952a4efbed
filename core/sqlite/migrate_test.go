package sqlite

import (
	"database/sql"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/baton-bot/baton/core/migration"
)

// reset empties the buffer.
func (b *syncBuffer) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.Reset()
}

// versionBefore is the newest embedded migration older than the one
// named name.
func versionBefore(t *testing.T, name string) int {
	t.Helper()
	all, err := schemaMigrations(migrations)
	if err != nil {
		t.Fatal(err)
	}
	prev := 0
	for _, m := range all {
		if m.Name == name {
			return prev
		}
		prev = m.Version
	}
	t.Fatalf("no migration %s", name)
	return 0
}

// lockProbe writes through a connection of its own that does not wait
// for the write lock: it fails when another connection holds it.
func lockProbe(t *testing.T, path string) func() error {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path, 0, true))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	n := 0
	return func() error {
		n++
		_, err := db.ExecContext(t.Context(), `INSERT INTO store_meta (key, value) VALUES (?, 'x')`, fmt.Sprintf("probe-%d", n))
		return err
	}
}

// TestOnlineIndexesOnAnOlderStore: a store copied from the version before
// the retention indexes, holding rows, is migrated online — each index in
// a transaction of its own, with the write lock free between them (a
// writer that does not wait gets through after each), and the log names
// every index built with its table's rows and how long it took.
func TestOnlineIndexesOnAnOlderStore(t *testing.T) {
	const events, comments = 20000, 3000
	path := filepath.Join(t.TempDir(), "baton.db")
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s, err := Open(t.Context(), path, Options{Logger: log, migrateUpTo: versionBefore(t, "0013_retention.sql")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !migration.Online(mustRead(t, migrations, "migrations/0013_retention.sql")) {
		t.Fatal("0013_retention.sql is not marked online")
	}
	task := newTask(t, s)
	err = s.tx(t.Context(), func(tx *txn) error {
		if _, err := tx.Tx.ExecContext(t.Context(), `INSERT INTO jobs (task_id, state, created_at, finished_at) VALUES (?, 'succeeded', 1, 2)`, task.ID); err != nil {
			return err
		}
		if _, err := tx.Tx.ExecContext(t.Context(), `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO job_events (job_id, at, kind) SELECT (SELECT max(id) FROM jobs), i, 'note' FROM n`, events); err != nil {
			return err
		}
		_, err := tx.Tx.ExecContext(t.Context(), `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO comments (task_id, role, text, created_at) SELECT ?, 'user', 'hi', i FROM n`, comments, task.ID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	probe := lockProbe(t, path)
	var steps int
	var blocked []error
	s.onOnlineStep = func() {
		steps++
		if err := probe(); err != nil {
			blocked = append(blocked, err)
		}
	}
	logs.reset()

	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if steps != 5 || len(blocked) > 0 {
		t.Errorf("%d steps committed, writers blocked between them: %v; want 5 indexes, each alone, none blocked", steps, blocked)
	}
	out := logs.String()
	for _, want := range []struct{ index, table, rows string }{
		{"outbox_job", "outbox", "0"},
		{"job_events_at", "job_events", fmt.Sprint(events)},
		{"comments_created", "comments", fmt.Sprint(comments)},
		{"jobs_finished", "jobs", "1"},
		{"jobs_retry", "jobs", "1"},
	} {
		start := regexp.MustCompile(`msg="building index[^"]*" component=store migration=0013_retention.sql index=` + want.index + ` table=` + want.table + ` rows=` + want.rows + `\n`)
		done := regexp.MustCompile(`msg="index built" component=store migration=0013_retention.sql index=` + want.index + ` table=` + want.table + ` rows=` + want.rows + ` took=\S+\n`)
		if !start.MatchString(out) || !done.MatchString(out) {
			t.Errorf("the log lacks the build of %s on %s (%s rows), start and end:\n%s", want.index, want.table, want.rows, out)
		}
		var n int
		if err := s.reader.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = ?`, want.index).Scan(&n); err != nil || n != 1 {
			t.Errorf("index %s: %d (%v), want it built", want.index, n, err)
		}
	}
	if !strings.Contains(out, `msg="migration applied" component=store migration=0013_retention.sql`) {
		t.Errorf("the log lacks the migration's record:\n%s", out)
	}
	// Run again: nothing to build, nothing logged.
	logs.reset()
	if err := s.Migrate(t.Context()); err != nil || logs.String() != "" {
		t.Errorf("second Migrate: %v, logged %q; want a silent no-op", err, logs.String())
	}
}

func mustRead(t *testing.T, fsys fs.FS, name string) string {
	t.Helper()
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOnlineBackfillInBatches: a backfill of an online migration changes
// its rows batch by batch, each batch committed alone with the write lock
// free after it, logs its progress, and leaves every row done.
func TestOnlineBackfillInBatches(t *testing.T) {
	const rows, batch = 2500, 1000
	path := filepath.Join(t.TempDir(), "baton.db")
	var logs syncBuffer
	s, err := Open(t.Context(), path, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	task := newTask(t, s)
	err = s.tx(t.Context(), func(tx *txn) error {
		_, err := tx.Tx.ExecContext(t.Context(), `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO comments (task_id, role, text, created_at) SELECT ?, 'user', 'hi', i FROM n`, rows, task.ID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{"migrations/0999_backfill.sql": {Data: []byte(`-- baton:online
-- A test's backfill.
-- baton:batch
UPDATE comments SET text = 'backfilled'
WHERE id IN (SELECT id FROM comments WHERE text <> 'backfilled' LIMIT @batch);
`)}}
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	for _, name := range names {
		fsys[name] = &fstest.MapFile{Data: []byte(mustRead(t, migrations, name))}
	}
	s.schema, s.migrateBatch, s.progressEvery = fsys, batch, 0
	probe := lockProbe(t, path)
	var steps int
	var blocked []error
	s.onOnlineStep = func() {
		steps++
		if err := probe(); err != nil {
			blocked = append(blocked, err)
		}
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Three batches (1000, 1000, 500), then the statement as a whole.
	if steps != 4 || len(blocked) > 0 {
		t.Errorf("%d commits, writers blocked after them: %v; want 3 batches and the statement, none blocked", steps, blocked)
	}
	var left int
	if err := s.reader.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM comments WHERE text <> 'backfilled'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d rows not backfilled (%v)", left, err)
	}
	out := logs.String()
	if got := strings.Count(out, `msg="backfill progress"`); got != 3 {
		t.Errorf("%d progress lines, want one per batch (3):\n%s", got, out)
	}
	if !strings.Contains(out, `msg="backfill done" component=store migration=0999_backfill.sql rows=2500 batches=3 batch=1000`) {
		t.Errorf("the log lacks the backfill's end:\n%s", out)
	}
}
