package postgres

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"log/slog"
	"net/url"
	"regexp"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/baton-bot/baton/core/migration"
	"github.com/jackc/pgx/v5"
)

// logBuffer is a log sink safe for the store's goroutines.
type logBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (w *logBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *logBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// versionBefore is the newest embedded migration older than the one
// named name.
func versionBefore(t *testing.T, name string) int {
	t.Helper()
	all, err := schema()
	if err != nil {
		t.Fatal(err)
	}
	prev := 0
	for _, m := range all {
		if m.Name == name {
			if !migration.Online(m.Body) {
				t.Fatalf("%s is not marked online", name)
			}
			return prev
		}
		prev = m.Version
	}
	t.Fatalf("no migration %s", name)
	return 0
}

// olderStore opens a store in a schema of its own at the version before
// the retention indexes, holding a task, a finished job with events
// events and a few comments; its connections carry the application name
// app. It returns the store, its URL and its log.
func olderStore(t *testing.T, events int) (*Store, string, *logBuffer) {
	t.Helper()
	u, err := url.Parse(newSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	q := u.Query()
	q.Set("application_name", "baton_migrate_"+hex.EncodeToString(b[:]))
	u.RawQuery = q.Encode()
	logs := &logBuffer{}
	s := openStore(t, u.String(), Options{Logger: slog.New(slog.NewTextHandler(logs, nil)),
		migrateUpTo: versionBefore(t, "0007_retention.sql")})
	task := newTask(t, s)
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, `INSERT INTO jobs (task_id, state, created_at, finished_at) VALUES ($1, 'succeeded', 1, 2)`, task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO job_events (job_id, at, kind) SELECT (SELECT max(id) FROM jobs), i % 1000, 'note' FROM generate_series(1, $1) i`, events); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO comments (task_id, role, created_at) SELECT $1, 'user', i FROM generate_series(1, 500) i`, task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE job_events`); err != nil {
		t.Fatal(err)
	}
	return s, u.String(), logs
}

// backendWaiting reports whether a backend of application name app (pid
// 0) or of pid waits for a lock.
func backendWaiting(t *testing.T, conn *pgx.Conn, app string, pid uint32) bool {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT COUNT(*) FROM pg_stat_activity
		WHERE (application_name = $1 OR pid = $2) AND wait_event_type = 'Lock'`, app, int64(pid)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestOnlineIndexesDoNotBlockWriters: a store copied from the version
// before the retention indexes, holding rows, is migrated while another
// connection writes to the table being indexed. The build waits for the
// transaction already writing to it (as any index build must), and
// meanwhile a new write to the table goes through rather than queue behind
// the build — CREATE INDEX CONCURRENTLY outside a transaction; a plain
// CREATE INDEX in the migration's transaction would hold it. Every index
// is valid at the end, and the log has each build's start and end.
func TestOnlineIndexesDoNotBlockWriters(t *testing.T) {
	s, storeURL, logs := olderStore(t, 50000)
	ctx := t.Context()
	u, _ := url.Parse(storeURL)
	app := u.Query().Get("application_name")
	cfg, err := pgx.ParseConfig(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = "baton_migrate_writer"
	connect := func() *pgx.Conn {
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	watcher, early, late := connect(), connect(), connect()

	// A transaction writing to job_events before the migration starts.
	tx, err := early.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `INSERT INTO job_events (job_id, at, kind) SELECT max(id), 1, 'early' FROM jobs`); err != nil {
		t.Fatal(err)
	}
	migrated := make(chan error, 1)
	go func() { migrated <- s.Migrate(ctx) }()
	// The migration's build waits for that transaction.
	for !backendWaiting(t, watcher, app, 0) {
		select {
		case err := <-migrated:
			t.Fatalf("Migrate returned (%v) while a transaction writing to job_events was open: it did not wait for it", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	// A new write to the table meanwhile.
	wrote := make(chan error, 1)
	go func() {
		_, err := late.Exec(ctx, `INSERT INTO job_events (job_id, at, kind) SELECT max(id), 2, 'late' FROM jobs`)
		wrote <- err
	}()
	blocked := false
wait:
	for {
		select {
		case err := <-wrote:
			if err != nil {
				t.Fatalf("write during the build: %v", err)
			}
			break wait
		case <-time.After(10 * time.Millisecond):
			if backendWaiting(t, watcher, "", late.PgConn().PID()) {
				blocked = true
				break wait
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if blocked {
		t.Error("a write to job_events waited for the index build")
		if err := <-wrote; err != nil {
			t.Error(err)
		}
	}
	if err := <-migrated; err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	for _, index := range []string{"job_events_at", "comments_created", "jobs_finished"} {
		exists, valid, err := indexValid(ctx, s.pool, index)
		if err != nil || !exists || !valid {
			t.Errorf("index %s: exists %v, valid %v (%v); want it built and valid", index, exists, valid, err)
		}
	}
	if n := countRows(t, s, `SELECT COUNT(*) FROM job_events WHERE kind IN ('early', 'late')`); n != 2 {
		t.Errorf("%d of the two writes beside the migration are stored", n)
	}
	out := logs.String()
	for _, want := range []struct{ index, table string }{
		{"job_events_at", "job_events"}, {"comments_created", "comments"}, {"jobs_finished", "jobs"},
	} {
		start := regexp.MustCompile(`msg="building index concurrently \(writers go on\)" component=store server=\S+ migration=0007_retention.sql index=` + want.index + ` table=` + want.table + ` table_bytes=\d+`)
		done := regexp.MustCompile(`msg="index built" component=store server=\S+ migration=0007_retention.sql index=` + want.index + ` table=` + want.table + ` took=\S+\n`)
		if !start.MatchString(out) || !done.MatchString(out) {
			t.Errorf("the log lacks the build of %s on %s, start and end:\n%s", want.index, want.table, out)
		}
	}
	if !regexp.MustCompile(`index=job_events_at table=job_events table_bytes=\d+ rows_estimate=5\d{4}\n`).MatchString(out) {
		t.Errorf("the log lacks job_events' estimated rows:\n%s", out)
	}
}

// TestOnlineIndexRebuildsAnInvalidOne: an index left INVALID by a build
// that failed (here a unique index over duplicates, as an interrupted
// CREATE INDEX CONCURRENTLY leaves one) is dropped and built again by
// Migrate, not kept by IF NOT EXISTS, and the log says so.
func TestOnlineIndexRebuildsAnInvalidOne(t *testing.T) {
	s, _, logs := olderStore(t, 5000)
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY job_events_at ON job_events (at)`); err == nil {
		t.Fatal("a unique index over duplicate times was built")
	}
	if exists, valid, err := indexValid(ctx, s.pool, "job_events_at"); err != nil || !exists || valid {
		t.Fatalf("after the failed build: exists %v, valid %v (%v); want an invalid index left", exists, valid, err)
	}
	s.progressEvery = time.Millisecond
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var valid, unique bool
	if err := s.pool.QueryRow(ctx, `SELECT i.indisvalid, i.indisunique FROM pg_index i WHERE i.indexrelid = to_regclass('job_events_at')`).Scan(&valid, &unique); err != nil {
		t.Fatal(err)
	}
	if !valid || unique {
		t.Errorf("job_events_at: valid %v, unique %v; want the migration's index, valid and not unique", valid, unique)
	}
	if out := logs.String(); !regexp.MustCompile(`msg="dropping an index left invalid by an interrupted build, to build it again" .*index=job_events_at`).MatchString(out) {
		t.Errorf("the log does not say the invalid index was dropped:\n%s", out)
	}
}

// TestOnlineBackfillInBatches: a backfill of an online migration changes
// its rows batch by batch, each batch committed alone (the rows it changed
// are free for another connection to lock after it), and leaves every row
// done, with the batches in the log.
func TestOnlineBackfillInBatches(t *testing.T) {
	const rows, batch = 2500, 1000
	logs := &logBuffer{}
	s := openStore(t, newSchema(t), Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx := t.Context()
	task := newTask(t, s)
	if _, err := s.pool.Exec(ctx, `INSERT INTO comments (task_id, role, text, created_at) SELECT $1, 'user', 'hi', i FROM generate_series(1, $2) i`, task.ID, rows); err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{"migrations/0999_backfill.sql": {Data: []byte(`-- baton:online
-- A test's backfill.
-- baton:batch
UPDATE comments SET text = 'backfilled'
WHERE id IN (SELECT id FROM comments WHERE text <> 'backfilled' ORDER BY id LIMIT @batch);
`)}}
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	for _, name := range names {
		b, err := fs.ReadFile(migrations, name)
		if err != nil {
			t.Fatal(err)
		}
		fsys[name] = &fstest.MapFile{Data: b}
	}
	s.schema, s.migrateBatch = fsys, batch
	other := adminConn(t)
	var steps int
	var held []error
	s.onOnlineStep = func() {
		steps++
		tx, err := other.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		var n int
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM (SELECT id FROM `+pgx.Identifier{schemaOf(t, s)}.Sanitize()+`.comments
			WHERE text = 'backfilled' FOR UPDATE NOWAIT) c`).Scan(&n); err != nil {
			held = append(held, err)
		} else if n != min(steps*batch, rows) {
			t.Errorf("after batch %d, %d rows backfilled", steps, n)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if steps != 3 || len(held) > 0 {
		t.Errorf("%d batches committed, rows still locked after them: %v; want 3 batches, none held", steps, held)
	}
	if n := countRows(t, s, `SELECT COUNT(*) FROM comments WHERE text <> 'backfilled'`); n != 0 {
		t.Errorf("%d rows not backfilled", n)
	}
	if out := logs.String(); !regexp.MustCompile(`msg="backfill done" component=store server=\S+ migration=0999_backfill.sql rows=2500 batches=3 batch=1000`).MatchString(out) {
		t.Errorf("the log lacks the backfill's end:\n%s", out)
	}
}

// schemaOf is the schema the store's connections use.
func schemaOf(t *testing.T, s *Store) string {
	t.Helper()
	var name string
	if err := s.pool.QueryRow(t.Context(), `SELECT current_schema()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}
