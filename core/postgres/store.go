// Package postgres is Baton's system of record on a PostgreSQL server: it
// implements core.Store (tasks, comments, jobs and their history, the
// outbox, the inbox, approvals and inbound dedup keys) with the same
// contract as core/sqlite, so that gateways and workers on several hosts
// share one store. It speaks to the server with github.com/jackc/pgx/v5
// through a pgxpool.Pool.
//
// Open parses the URL, connects (retrying as Options say), applies the
// embedded migrations and returns a ready Store. A migration marked
// "-- baton:online" (see core/migration and Migrate; 0007's indexes are)
// runs outside a transaction, its indexes built CONCURRENTLY so that the
// other processes sharing the database go on writing, with each build's
// progress in the log.
//
// The tables live in the connection's current schema; a search_path
// parameter in the URL picks another (postgres://host/db?search_path=baton).
//
// Every write is one transaction at READ COMMITTED. What core/sqlite gets
// from its single writer, this store gets from row locks held until
// commit:
//
//   - a write on behalf of a job (a claim, progress, a finish, an abort, a
//     resume, a decision) first locks the job's row and reads it under the
//     lock; the fence compares the attempt and state read there;
//   - an outbox message takes the next Seq of its task by incrementing the
//     task's counter, which locks the task's row: the writers of one task's
//     outbox queue up, those of other tasks do not;
//   - Ingest locks the thread's task before it looks for an active job, so
//     that two messages of one thread never both create one;
//   - dedup rests on unique constraints and INSERT … ON CONFLICT DO NOTHING
//     (inbound keys, platform message ids, threads, inbox keys);
//   - ClaimInbox takes due events, and ClaimOutbox due outbox messages,
//     with FOR UPDATE SKIP LOCKED.
//
// A transaction that fails with a serialization failure or a deadlock
// (SQLSTATE 40001, 40P01), or whose connection is lost before it commits,
// is run again as a whole a few times, as core/sqlite retries a busy
// database. One whose COMMIT was sent and not answered is not: it may have
// committed, and the caller sees the error.
//
// Timestamps are BIGINT unix milliseconds (0 for none), as in SQLite: the
// two stores keep the same instants to the same precision. PostgreSQL's
// text holds neither NUL bytes nor invalid UTF-8, so strings are stored
// with each of those replaced by U+FFFD (SQLite keeps them as they are);
// the opaque bytes of inbox payloads and checkpoints are BYTEA, kept
// exactly.
//
// The URL's password never appears in an error or a log line of the store.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/migration"
	"github.com/baton-bot/baton/core/workspace"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	_ core.Store      = (*Store)(nil)
	_ workspace.Owner = (*Store)(nil)
)

//go:embed migrations/*.sql
var migrations embed.FS

// ErrNewerSchema reports a database migrated by a newer Baton than this
// one: this binary does not know its schema and refuses to use it.
var ErrNewerSchema = errors.New("the database's schema is newer than this Baton")

// ErrAccessDenied reports that the server refused the connection's
// credentials or does not have its database: retrying will not help.
var ErrAccessDenied = errors.New("the PostgreSQL server refused access")

// Options configure a Store. The zero value is usable.
type Options struct {
	// MaxConns bounds the pool's connections; 0 is pgxpool's default (the
	// larger of 4 and the number of CPUs).
	MaxConns int32
	// StatementTimeout makes the server cancel a statement that runs
	// longer (statement_timeout); 0 keeps the server's setting.
	// Migrations are not bound by it.
	StatementTimeout time.Duration
	// ConnectRetries is how many more times Open tries to reach the server
	// after a first failure, waiting a growing pause between tries; 0:
	// Open fails at the first. Refused credentials are not retried.
	ConnectRetries int
	// ConnectTimeout bounds each connection attempt, Open's and the
	// pool's later ones; 0 means 10 seconds.
	ConnectTimeout time.Duration
	// WorkspaceRoot is the directory that holds task workspaces; a task
	// created without a workspace gets one under it (workspace.Dir).
	WorkspaceRoot string
	// Logger receives connection and transaction retries and migrations;
	// nil discards.
	Logger *slog.Logger

	migrateUpTo int // tests stop Open's migrations at this version; 0: all
}

// defaultConnectTimeout is Options.ConnectTimeout's zero value.
const defaultConnectTimeout = 10 * time.Second

// Store is core.Store on a PostgreSQL database. It is safe for concurrent
// use, also by many processes on many hosts sharing the database.
type Store struct {
	pool   *pgxpool.Pool
	root   string
	log    *slog.Logger
	server string      // user@host:port/database, for messages: never the password
	closed atomic.Bool // set by Close: writes fail with core.ErrClosed

	// Retries of a failed transaction; tests change them.
	tries   int
	backoff time.Duration
	onRetry func(try int, err error) // called before each retry; nil in production

	// Migrations (see Migrate); tests change them.
	schema        fs.FS         // holds migrations/*.sql
	progressEvery time.Duration // between an index build's progress lines
	migrateBatch  int           // rows per transaction of a backfill
	onOnlineStep  func()        // called after each committed batch of a backfill; nil in production
}

// Open connects to the database at url (postgres://… or key=value
// settings, as pgx reads them), applies pending migrations and returns a
// ready Store. An unreachable server is tried again opts.ConnectRetries
// times; the error then names the server (never the password) and wraps
// the last failure, and ErrAccessDenied when the server refused the
// credentials or has no such database. A database whose schema is newer
// than this binary's is refused with an error wrapping ErrNewerSchema.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	red := redactor{secrets: passwordsIn(url)}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, red.error(fmt.Errorf("open postgres store: %w", err))
	}
	// The password may also come from PGPASSWORD or a password file.
	red.secrets = append(red.secrets, cfg.ConnConfig.Password)
	timeout := opts.ConnectTimeout
	if timeout <= 0 {
		timeout = defaultConnectTimeout
	}
	cfg.ConnConfig.ConnectTimeout = timeout
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	rp := cfg.ConnConfig.RuntimeParams
	if opts.StatementTimeout > 0 {
		rp["statement_timeout"] = strconv.FormatInt(max(1, opts.StatementTimeout.Milliseconds()), 10)
	}
	if rp["application_name"] == "" {
		rp["application_name"] = "baton"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	server := fmt.Sprintf("%s@%s:%d/%s", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, red.error(fmt.Errorf("open postgres store %s: %w", server, err))
	}
	s := &Store{
		pool:    pool,
		root:    opts.WorkspaceRoot,
		log:     log.With("component", "store", "server", server),
		server:  server,
		tries:   7,
		backoff: 20 * time.Millisecond,

		schema:        migrations,
		progressEvery: indexProgressEvery,
		migrateBatch:  migrateBatch,
	}
	if err := s.connect(ctx, opts.ConnectRetries, timeout, red); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.migrate(ctx, opts.migrateUpTo); err != nil {
		pool.Close()
		return nil, red.error(fmt.Errorf("open postgres store %s: %w", server, err))
	}
	return s, nil
}

// connect pings the server until it answers, at most retries+1 times.
func (s *Store) connect(ctx context.Context, retries int, timeout time.Duration, red redactor) error {
	pause := 250 * time.Millisecond
	for try := 1; ; try++ {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := s.pool.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		denied := refused(err)
		if denied {
			err = fmt.Errorf("%w: %w", ErrAccessDenied, err)
		}
		if denied || try > retries || ctx.Err() != nil {
			return red.error(fmt.Errorf("open postgres store %s: connect (%d tries): %w", s.server, try, err))
		}
		s.log.WarnContext(ctx, "PostgreSQL not reachable, trying again", "try", try, "err", red.error(err).Error())
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return red.error(fmt.Errorf("open postgres store %s: connect (%d tries): %w", s.server, try, errors.Join(ctx.Err(), err)))
		case <-t.C:
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// refused reports whether err is the server refusing the credentials
// (class 28) or not having the database (3D000).
func refused(err error) bool {
	var e *pgconn.PgError
	return errors.As(err, &e) && (strings.HasPrefix(e.Code, "28") || e.Code == "3D000")
}

// Close closes the pool, waiting for connections in use to be returned.
// Writes after it fail with an error wrapping core.ErrClosed. Calls after
// the first return nil.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.pool.Close()
	}
	return nil
}

// Ping reports whether the server answers on a connection of the pool.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping store %s: %w", s.server, err)
	}
	return nil
}

// Heartbeat makes the smallest write there is, the time in the heartbeat
// row of store_meta, and returns once it is committed: nil, or why the
// store cannot write (the server unreachable, read-only, out of space).
// Ping only reaches the server, so only this tells a readiness check that
// writes go through.
func (s *Store) Heartbeat(ctx context.Context) error {
	err := s.tx(ctx, func(tx db) error {
		_, err := tx.exec(ctx, `INSERT INTO store_meta (key, value) VALUES ('heartbeat', $1)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, strconv.FormatInt(time.Now().UnixMilli(), 10))
		return err
	})
	if err != nil {
		return fmt.Errorf("store heartbeat: %w", err)
	}
	return nil
}

// schemaMigration is one migration file.
type schemaMigration = migration.File

// schema returns the embedded migrations in version order.
func schema() ([]schemaMigration, error) { return schemaIn(migrations) }

// schemaIn returns the migrations of fsys (migrations/*.sql) in version
// order.
func schemaIn(fsys fs.FS) ([]schemaMigration, error) { return migration.Files(fsys) }

// SchemaVersion is the newest schema version this binary knows.
func SchemaVersion() int {
	ms, err := schema()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

// tx runs fn in one READ COMMITTED transaction and commits it. A
// serialization failure, a deadlock or a connection lost before the
// commit runs the whole transaction again, a few times with a growing
// backoff; fn must therefore only touch the transaction and variables it
// resets itself.
func (s *Store) tx(ctx context.Context, fn func(tx db) error) error {
	for try := 1; ; try++ {
		if s.closed.Load() {
			return fmt.Errorf("store %s: %w", s.server, core.ErrClosed)
		}
		err, again := s.txOnce(ctx, fn)
		if err == nil || !again || ctx.Err() != nil {
			return err
		}
		if try >= s.tries {
			return fmt.Errorf("transaction failed %d times, gave up: %w", try, err)
		}
		s.log.WarnContext(ctx, "transaction failed, running it again", "try", try, "err", err)
		if s.onRetry != nil {
			s.onRetry(try, err)
		}
		d := s.backoff << (try - 1)
		d += rand.N(d/2 + 1)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("transaction: %w", errors.Join(ctx.Err(), err))
		case <-t.C:
		}
	}
}

// txOnce runs fn in a transaction once. again reports whether nothing of
// it can have been committed and running it again may succeed.
func (s *Store) txOnce(ctx context.Context, fn func(tx db) error) (err error, again bool) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err, true // nothing was sent in a transaction
	}
	if err := fn(db{tx}); err != nil {
		// A transaction whose connection is gone was rolled back by the
		// server.
		lost := tx.Conn().IsClosed()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = tx.Rollback(rctx)
		cancel()
		return err, lost || transient(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return err, transient(err) || pgconn.SafeToRetry(err)
	}
	return nil, false
}

// transient reports whether err is a serialization failure or a deadlock:
// the server rolled the transaction back, and it may pass when run again.
func transient(err error) bool {
	var e *pgconn.PgError
	return errors.As(err, &e) && (e.Code == "40001" || e.Code == "40P01")
}

// constraint translates PostgreSQL constraint failures into core's
// sentinels: a missing referenced row is ErrNotFound, a unique key taken
// ErrDuplicate. Other errors are returned as they are.
func constraint(err error) error {
	var e *pgconn.PgError
	if !errors.As(err, &e) {
		return err
	}
	switch e.Code {
	case "23503": // foreign_key_violation
		return fmt.Errorf("%w: a referenced row does not exist (%w)", core.ErrNotFound, err)
	case "23505": // unique_violation
		return fmt.Errorf("%w: %w", core.ErrDuplicate, err)
	}
	return err
}

// notFound turns pgx.ErrNoRows into core.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return core.ErrNotFound
	}
	return err
}

// querier is what pgx.Tx and *pgxpool.Pool share.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error)
}

// db runs statements on the pool or in a transaction, passing text
// arguments as PostgreSQL can store them (see storable).
type db struct{ q querier }

// read is the pool, for reads of one statement.
func (s *Store) read() db { return db{s.pool} }

func (d db) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := d.q.Exec(ctx, sql, texts(args)...)
	return tag.RowsAffected(), err
}

func (d db) query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return d.q.Query(ctx, sql, texts(args)...)
}

func (d db) row(ctx context.Context, sql string, args ...any) pgx.Row {
	return d.q.QueryRow(ctx, sql, texts(args)...)
}

// scanner is what pgx.Row and pgx.Rows share.
type scanner interface {
	Scan(dest ...any) error
}

// collect scans every row of rows with scan.
func collect[T any](rows pgx.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// storable reports whether PostgreSQL's text can hold s as it is: valid
// UTF-8 without NUL bytes.
func storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// text returns s as PostgreSQL's text can hold it: every invalid byte
// sequence and NUL byte replaced by U+FFFD.
func text(s string) string {
	if storable(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// texts returns args with every string (and string of a []string) made
// storable; args itself when they all are.
func texts(args []any) []any {
	bad := func(a any) bool {
		switch v := a.(type) {
		case string:
			return !storable(v)
		case []string:
			return slices.ContainsFunc(v, func(s string) bool { return !storable(s) })
		}
		return false
	}
	if !slices.ContainsFunc(args, bad) {
		return args
	}
	out := slices.Clone(args)
	for i, a := range out {
		switch v := a.(type) {
		case string:
			out[i] = text(v)
		case []string:
			c := make([]string, len(v))
			for j, s := range v {
				c[j] = text(s)
			}
			out[i] = c
		}
	}
	return out
}

// placeholders numbers the arguments of a statement built piece by piece.
type placeholders struct{ args []any }

// add appends v and returns its placeholder ($n).
func (p *placeholders) add(v any) string {
	p.args = append(p.args, v)
	return "$" + strconv.Itoa(len(p.args))
}

// redactor keeps secrets out of error messages.
type redactor struct{ secrets []string }

// error returns err with every secret masked in its message; errors.Is
// and errors.As still see what it wraps.
func (r redactor) error(err error) error {
	if err == nil {
		return nil
	}
	var secrets []string
	for _, s := range r.secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			secrets = append(secrets, s)
		}
	}
	if len(secrets) == 0 {
		return err
	}
	return &redactedError{err: err, secrets: secrets}
}

// redactedError is an error whose message hides secrets.
type redactedError struct {
	err     error
	secrets []string
}

func (e *redactedError) Error() string {
	msg := e.err.Error()
	for _, s := range e.secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return msg
}

func (e *redactedError) Unwrap() error { return e.err }

// passwordKV finds a password in key=value connection settings.
var passwordKV = regexp.MustCompile(`password\s*=\s*'?([^'\s]+)`)

// passwordsIn returns what could be passwords in a connection string,
// before pgx parses it. It backs up pgx, whose error for a string it
// cannot parse hides the password too, on a best-effort basis.
func passwordsIn(conn string) []string {
	var out []string
	if u, err := url.Parse(conn); err == nil {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw, url.QueryEscape(pw))
		}
		out = append(out, u.Query().Get("password"))
	}
	for _, m := range passwordKV.FindAllStringSubmatch(conn, -1) {
		out = append(out, m[1])
	}
	return out
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
