// Package sqlite is Baton's system of record on a SQLite file: it implements
// core.Store (tasks, comments, jobs and their history, the outbox and
// inbound dedup keys) with modernc.org/sqlite, a pure-Go driver.
//
// Open creates the file when needed, applies the embedded migrations and
// returns a ready Store. Every connection runs in WAL mode with a busy
// timeout and foreign keys on. Writes go through one writer connection in
// BEGIN IMMEDIATE transactions, so they are serialized within a process and
// take the database's write lock up front across processes; reads use a
// separate pool and never wait for writers. A write that still meets
// SQLITE_BUSY or SQLITE_LOCKED (another process holding the lock past the
// timeout) is retried as a whole a few times before failing with a clear
// error.
//
// The SQL stays portable (INTEGER unix-millisecond timestamps, TEXT, NULL
// for absent references, RETURNING) so that a PostgreSQL store can mirror
// it.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/baton-bot/baton/core"
	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var _ core.Store = (*Store)(nil)

//go:embed migrations/*.sql
var migrations embed.FS

// Options configure a Store.
type Options struct {
	// WorkspaceRoot is the directory that holds task workspaces; a task
	// created without a workspace gets WorkspaceRoot/<task id>.
	WorkspaceRoot string
	// Logger receives busy retries and migrations; nil discards.
	Logger *slog.Logger
}

// Store is core.Store on a SQLite file. It is safe for concurrent use,
// also by several processes sharing the file on one host.
type Store struct {
	writer *sql.DB // one connection: every write transaction
	reader *sql.DB // a pool for reads
	root   string
	log    *slog.Logger

	// Busy handling; tests shorten them.
	busyTries int
	backoff   time.Duration
	onBusy    func(try int) // called before each retry of a busy write; nil in production
}

// busyTimeoutMS is how long SQLite itself waits for a lock before a
// statement fails with SQLITE_BUSY.
const busyTimeoutMS = 5000

// Open opens (creating when needed) the database file at path, applies
// pending migrations and returns a ready Store. path is a plain file path;
// its parent directory is created.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	return open(ctx, path, opts, busyTimeoutMS)
}

func open(ctx context.Context, path string, opts Options, busyMS int) (*Store, error) {
	if path == "" || strings.ContainsRune(path, '?') || strings.HasPrefix(path, "file:") || path == ":memory:" {
		return nil, fmt.Errorf("open store: %q is not a plain file path", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	writer, err := sql.Open("sqlite", dsn(path, busyMS, true))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxIdleTime(0)
	writer.SetConnMaxLifetime(0)
	reader, err := sql.Open("sqlite", dsn(path, busyMS, false))
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	reader.SetMaxOpenConns(n)
	reader.SetMaxIdleConns(n)
	s := &Store{
		writer:    writer,
		reader:    reader,
		root:      opts.WorkspaceRoot,
		log:       log.With("component", "store"),
		busyTries: 6,
		backoff:   20 * time.Millisecond,
	}
	// The writer goes first: it creates the file and switches it to WAL,
	// which readers then find set.
	for _, db := range []*sql.DB{writer, reader} {
		if err := pingFresh(ctx, db); err != nil {
			s.Close()
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// pingFresh opens a first connection of db. Switching a new file to WAL
// takes an exclusive lock for which SQLite does not wait (its busy handler
// is not called), so processes starting together on a fresh file — a
// gateway and its workers — can be told the database is busy: that is
// retried for up to about ten seconds.
func pingFresh(ctx context.Context, db *sql.DB) error {
	delay := 10 * time.Millisecond
	for try := 1; ; try++ {
		err := db.PingContext(ctx)
		if err == nil || !busy(err) || try >= 40 {
			return err
		}
		t := time.NewTimer(delay + rand.N(delay))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
}

// dsn builds a modernc.org/sqlite data source name whose pragmas apply to
// every pooled connection.
func dsn(path string, busyMS int, write bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.Itoa(busyMS)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	if write {
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	return path + "?" + q.Encode()
}

// Close closes the database. Calls after the first return nil.
func (s *Store) Close() error {
	if err := errors.Join(s.reader.Close(), s.writer.Close()); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// Ping reports whether both the writer and the reader pool reach the file.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.writer.PingContext(ctx); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	if err := s.reader.PingContext(ctx); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	return nil
}

// Migrate applies the embedded migrations not yet recorded in
// schema_migrations, each in its own transaction. Running it again is a
// no-op; concurrent runs (several processes starting) apply each
// migration once.
func (s *Store) Migrate(ctx context.Context) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT    NOT NULL,
			applied_at INTEGER NOT NULL
		)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	sort.Strings(names)
	for _, name := range names {
		base := filepath.Base(name)
		prefix, _, _ := strings.Cut(base, "_")
		version, err := strconv.Atoi(prefix)
		if err != nil {
			return fmt.Errorf("migrate: %s: name must start with a version number", base)
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		var applied bool
		err = s.tx(ctx, func(tx *sql.Tx) error {
			applied = false
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				version, base, ms(time.Now())); err != nil {
				return err
			}
			applied = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("migrate %s: %w", base, err)
		}
		if applied {
			s.log.InfoContext(ctx, "migration applied", "migration", base)
		}
	}
	return nil
}

// tx runs fn in one write transaction (BEGIN IMMEDIATE) and commits it.
// When SQLite reports the database busy or locked, the whole transaction
// is retried with a short backoff; fn must therefore only touch the
// transaction and variables it resets itself.
func (s *Store) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	for try := 1; ; try++ {
		err := s.txOnce(ctx, fn)
		if err == nil || !busy(err) {
			return err
		}
		if try >= s.busyTries {
			return fmt.Errorf("database stays busy (another process holds the write lock), gave up after %d tries: %w", try, err)
		}
		s.log.WarnContext(ctx, "database busy, retrying write", "try", try, "err", err)
		if s.onBusy != nil {
			s.onBusy(try)
		}
		d := s.backoff << (try - 1)
		d += rand.N(d/2 + 1)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("database busy: %w", errors.Join(ctx.Err(), err))
		case <-t.C:
		}
	}
}

func (s *Store) txOnce(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// busy reports whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED (any
// extended code of them).
func busy(err error) bool {
	var e *modernc.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// constraint translates SQLite constraint failures into core's sentinels:
// a missing referenced row is ErrNotFound, a unique key taken ErrDuplicate.
// Other errors are returned as they are.
func constraint(err error) error {
	var e *modernc.Error
	if !errors.As(err, &e) {
		return err
	}
	switch e.Code() {
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return fmt.Errorf("%w: a referenced row does not exist (%w)", core.ErrNotFound, err)
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("%w: %w", core.ErrDuplicate, err)
	}
	return err
}

// notFound turns sql.ErrNoRows into core.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return core.ErrNotFound
	}
	return err
}

// querier is what *sql.DB and *sql.Tx share, so reads run on either.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// scanner is what *sql.Row and *sql.Rows share.
type scanner interface {
	Scan(dest ...any) error
}

// ms stores t as unix milliseconds; the zero time is 0.
func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// fromMS is the inverse of ms, in UTC.
func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// nullID stores an optional reference: 0 is NULL.
func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// now is the store's clock, truncated to what it keeps.
func now() time.Time {
	return time.Now().UTC().Truncate(time.Millisecond)
}
