// Package sqlite is Baton's system of record on a SQLite file: it implements
// core.Store (tasks, comments, jobs and their history, the outbox and
// inbound dedup keys) with modernc.org/sqlite, a pure-Go driver.
//
// Open creates the file when needed, applies the embedded migrations and
// returns a ready Store. A migration marked "-- baton:online" (see
// core/migration; 0013's indexes are) runs statement by statement, each
// in a write transaction of its own, logging each index it builds (its
// table's rows, how long it took) and backfilling in batches, so that
// other processes sharing the file write between them; this process
// serves nothing before Open returns.
//
// Every connection runs in WAL mode with a busy timeout and foreign keys
// on. Writes go through one writer connection in BEGIN IMMEDIATE
// transactions, so they are serialized within a process and take the
// database's write lock up front across processes; reads use a separate
// pool and never wait for writers.
//
// Writes that wait for the writer together are committed together (group
// commit): the writer runs each one in a savepoint of one transaction, in
// the order they came, and commits once. Each write still succeeds or fails
// on its own — a failed one is rolled back to its savepoint and reports its
// error alone — and returns only once the transaction holding it is
// committed, so nothing about a single write's atomicity, isolation or
// durability changes; a commit shares its cost among the writes it holds.
//
// Commits do not wait for the disk (synchronous=NORMAL: a commit is
// written to the WAL, and a crash of the process loses nothing). A write
// that must survive a power loss too — an inbox event, acknowledged once
// AddInbox, or StageInbox's durable, returns — is made durable after its
// commit by a syncer of its own (see walSyncer): it returns only once an
// fdatasync of the WAL begun after its commit has ended. The writer goes
// on with the next writes meanwhile, and one fdatasync serves every
// durable write committed before it began, so a slow disk delays only the
// durable writes, never the others (a job's claim among them).
//
// Commits never checkpoint: a loop on a connection of its own copies the
// WAL into the database file every second, beside the writer, so no write
// waits for a checkpoint's copy and fsync.
//
// A write that still meets SQLITE_BUSY or SQLITE_LOCKED (another process
// holding the lock past the timeout) is retried as a whole a few times
// before failing with a clear error.
//
// Queries run as prepared statements kept per connection (see stmtCache).
//
// The store remembers the identity (device and inode) of its file when it
// opens it. A file deleted or replaced under the running process (a backup
// restored over it, the data directory wiped) is noticed by Ping and before
// every group of writes: from then on Ping and every write fail with an
// error wrapping core.ErrStoreReplaced, and the store logs it once. The
// process must restart to open the file now at the path.
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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	// created without a workspace gets WorkspaceRoot/<task id>-<random
	// suffix> (see EnsureTask).
	WorkspaceRoot string
	// Logger receives busy retries and migrations; nil discards.
	Logger *slog.Logger

	checkpointEvery time.Duration // tests shorten it; 0 means checkpointEvery
	migrateUpTo     int           // tests stop Open's migrations at this version; 0: all
}

// Store is core.Store on a SQLite file. It is safe for concurrent use,
// also by several processes sharing the file on one host.
type Store struct {
	writer *sql.DB    // one connection: every write transaction
	wstmts *stmtCache // the writer's prepared statements
	reader *readDB    // a pool for reads
	root   string
	log    *slog.Logger

	path     string      // the database file
	file     os.FileInfo // its identity when the store opened it
	replaced atomic.Bool // latched once the file at path is found to be another

	writes   chan *write   // writes waiting for the writer loop
	closing  chan struct{} // closed by Close: the writer loop stops
	loopDone chan struct{} // closed when the writer loop has stopped
	stopOnce sync.Once

	ckpt     *sql.DB       // one connection: background WAL checkpoints
	ckptDone chan struct{} // closed when the checkpoint loop has stopped

	syncer *walSyncer // makes durable writes durable once committed

	// restartWAL is set by the checkpoint loop when the WAL has grown
	// past walRestartPages; the writer loop restarts it between two
	// groups of writes (see restartWALNow).
	restartWAL atomic.Bool
	busyMS     int // the connections' busy timeout

	// Busy handling; tests shorten them.
	busyTries int
	backoff   time.Duration
	onBusy    func(try int) // called before each retry of a busy write; nil in production

	// Migrations (see Migrate); tests change them.
	schema        fs.FS         // holds migrations/*.sql
	migrateBatch  int           // rows per transaction of a backfill
	progressEvery time.Duration // between a backfill's progress lines
	onOnlineStep  func()        // called after each committed step of an online migration; nil in production
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
	writer, err := openSingle(path, busyMS)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	reader, err := sql.Open("sqlite", dsn(path, busyMS, false))
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// The checkpointer needs a connection that may write the database
	// file, and one of its own so that it never waits for the writer.
	ckpt, err := openSingle(path, busyMS)
	if err != nil {
		writer.Close()
		reader.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	every := opts.checkpointEvery
	if every <= 0 {
		every = checkpointEvery
	}
	n := max(4, runtime.GOMAXPROCS(0))
	reader.SetMaxOpenConns(n)
	reader.SetMaxIdleConns(n)
	s := &Store{
		writer:    writer,
		wstmts:    newStmtCache(writer),
		reader:    &readDB{DB: reader, cache: newStmtCache(reader)},
		root:      opts.WorkspaceRoot,
		log:       log.With("component", "store"),
		busyTries: 6,
		backoff:   20 * time.Millisecond,
		writes:    make(chan *write, maxBatch),
		closing:   make(chan struct{}),
		loopDone:  make(chan struct{}),
		ckpt:      ckpt,
		ckptDone:  make(chan struct{}),
		path:      path,
		busyMS:    busyMS,

		schema:        migrations,
		migrateBatch:  migrateBatch,
		progressEvery: migrateProgressEvery,
	}
	s.syncer = newWALSyncer(path, s.log)
	go s.syncer.run()
	go s.writeLoop()
	go s.checkpointLoop(every)
	// The writer goes first: it creates the file and switches it to WAL,
	// which readers then find set.
	// Processes opening a fresh file together race for that switch, which
	// SQLite answers busy without waiting: the loser tries again.
	// A new file is given auto_vacuum before the readers open it, so that
	// they read the setting too.
	for _, step := range []func() error{
		func() error { return writer.PingContext(ctx) },
		func() error { return s.newFileVacuum(ctx) },
		func() error { return reader.PingContext(ctx) },
	} {
		if err := s.retryBusy(ctx, step); err != nil {
			s.Close()
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
	}
	// The file exists now: its identity is the one writes must go on
	// finding at path. The writer loop reads s.file only after a write
	// has been handed to it, which happens after this.
	if s.file, err = os.Stat(path); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := s.migrate(ctx, opts.migrateUpTo); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s.noteAutoVacuum(ctx)
	return s, nil
}

// checkFile reports whether the file at the store's path is still the
// one it opened: nil, or an error wrapping core.ErrStoreReplaced, for good
// once it was not. The first time it finds another file (or none) it logs
// an error.
func (s *Store) checkFile() error {
	if s.replaced.Load() {
		return fmt.Errorf("store %s: %w", s.path, core.ErrStoreReplaced)
	}
	fi, err := os.Stat(s.path)
	if err == nil && os.SameFile(fi, s.file) {
		return nil
	}
	why := "another file is at its path"
	if err != nil {
		why = err.Error()
	}
	if s.replaced.CompareAndSwap(false, true) {
		s.log.Error("the store's file was deleted or replaced under this process; refusing every write until Baton restarts",
			"path", s.path, "reason", why)
	}
	return fmt.Errorf("store %s: %w (%s)", s.path, core.ErrStoreReplaced, why)
}

// openSingle opens a pool of exactly one connection that may write, kept
// open for the store's life.
func openSingle(path string, busyMS int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(path, busyMS, true))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	return db, nil
}

// dsn builds a modernc.org/sqlite data source name whose pragmas apply to
// every pooled connection.
func dsn(path string, busyMS int, write bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.Itoa(busyMS)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	// A commit never copies the WAL into the database file itself: the
	// store's checkpoint loop does, beside the writer (see checkpointLoop).
	q.Add("_pragma", "wal_autocheckpoint(0)")
	q.Add("_pragma", "journal_size_limit("+strconv.Itoa(walSizeLimit)+")")
	if write {
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	return path + "?" + q.Encode()
}

// Close closes the database. Calls after the first return nil.
func (s *Store) Close() error {
	s.stopOnce.Do(func() { close(s.closing) })
	<-s.loopDone
	<-s.ckptDone
	s.wstmts.close()
	s.reader.cache.close()
	if err := errors.Join(s.ckpt.Close(), s.reader.Close(), s.writer.Close()); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// Ping reports whether both the writer and the reader pool reach the file,
// and that it is still the file the store opened (else an error wrapping
// core.ErrStoreReplaced).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.checkFile(); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	if err := s.writer.PingContext(ctx); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	if err := s.reader.PingContext(ctx); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	return nil
}

// Heartbeat makes the smallest write there is, the time in the heartbeat
// row of store_meta, through the same writer as every other write, and
// returns once it is committed: nil, or why the store cannot write (a full
// disk, a read-only or corrupt file, a lock held elsewhere past ctx).
// Ping reaches the file without writing, so only this tells a readiness
// check that writes go through.
func (s *Store) Heartbeat(ctx context.Context) error {
	err := s.tx(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO store_meta (key, value) VALUES ('heartbeat', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, strconv.FormatInt(time.Now().UnixMilli(), 10))
		return err
	})
	if err != nil {
		return fmt.Errorf("store heartbeat: %w", err)
	}
	return nil
}

// tx runs fn in one write transaction (BEGIN IMMEDIATE) and commits it.
// When SQLite reports the database busy or locked, the whole transaction
// is retried with a short backoff; fn must therefore only touch the
// transaction and variables it resets itself.
func (s *Store) tx(ctx context.Context, fn func(tx *txn) error) error {
	return s.retryBusy(ctx, func() error { return s.txOnce(ctx, fn, false) })
}

// durableTx is tx for a write that must survive a power loss once it
// returns nil: it returns after an fdatasync of the WAL that began once
// the write was committed.
func (s *Store) durableTx(ctx context.Context, fn func(tx *txn) error) error {
	return s.retryBusy(ctx, func() error { return s.txOnce(ctx, fn, true) })
}

// retryBusy calls f until it does not fail busy, at most busyTries times,
// with a growing backoff.
func (s *Store) retryBusy(ctx context.Context, f func() error) error {
	for try := 1; ; try++ {
		err := f()
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

// ErrClosed is returned by writes made after Close.
var ErrClosed = errors.New("store closed")

// write is one transaction body waiting for the writer loop.
type write struct {
	ctx     context.Context
	fn      func(tx *txn) error
	durable bool       // once committed, done waits for an fdatasync of the WAL (see walSyncer)
	done    chan error // receives the outcome once
}

// checkpointEvery is how often the checkpoint loop copies the WAL into the
// database file.
const checkpointEvery = time.Second

// walSizeLimit is the size, in bytes, the WAL file is cut back to when
// SQLite starts it over after a checkpoint.
const walSizeLimit = 64 << 20

// walRestartPages is the size of the WAL, in pages, past which the
// writer loop restarts it (about 16 MB of 4 KB pages).
const walRestartPages = 4096

// restartTimeoutMS bounds how long a WAL restart waits for readers of
// this and other processes to leave the WAL; one that has to wait longer
// is given up until the checkpoint loop asks again.
const restartTimeoutMS = 20

// checkpointLoop copies committed pages from the WAL into the database
// file every interval, on a connection of its own, until the store closes.
//
// Left to itself SQLite does this inside whichever commit makes the WAL
// pass a thousand pages, and every write queued behind that commit waits
// for the copy and its fsync: on a busy disk, tens to hundreds of
// milliseconds, long enough to hold a claim past its latency target. A
// PASSIVE checkpoint takes no write lock, so writes go on while it runs;
// SQLite starts the WAL over at the first write after one has copied
// everything. A checkpoint that finds another one running (another
// process sharing the file) is skipped until the next tick.
//
// A PASSIVE checkpoint copies the frames committed before it began, and
// SQLite starts the WAL over only once a checkpoint has copied every
// frame: under a steady stream of writes that never happens, and the WAL
// grew by hundreds of megabytes a minute (900 MB in a 30 s load test,
// every page lookup searching more of it, every commit allocating new
// blocks of the file). When a checkpoint leaves the WAL past
// walRestartPages, the loop asks the writer loop to restart it (see
// restartWALNow): the writer is paused only for the frames committed since
// the checkpoint began.
func (s *Store) checkpointLoop(every time.Duration) {
	defer close(s.ckptDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
		}
		if s.replaced.Load() {
			continue // copying into a file no one will read again
		}
		wal, err := s.checkpoint(context.Background())
		if err != nil && !busy(err) {
			s.log.Warn("WAL checkpoint failed", "err", err)
		}
		if wal > walRestartPages {
			s.restartWAL.Store(true)
		}
	}
}

// checkpoint runs one PASSIVE checkpoint, logs, at debug level, the
// WAL's size and how much of it is now in the database file, in pages,
// and returns the WAL's size.
func (s *Store) checkpoint(ctx context.Context) (walPages int, err error) {
	var blocked, wal, copied int
	err = s.ckpt.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&blocked, &wal, &copied)
	if err != nil {
		return 0, fmt.Errorf("checkpoint: %w", err)
	}
	if wal > 0 {
		s.log.Debug("WAL checkpoint", "wal_pages", wal, "copied_pages", copied)
	}
	return wal, nil
}

// restartWALNow runs a RESTART checkpoint on the writer connection, which
// the writer loop holds between two groups of writes: it copies the
// frames the last PASSIVE checkpoint left, syncs the database file, and
// waits (at most restartTimeoutMS) for readers to leave the WAL, so that
// the next commit writes the WAL from its start again, in blocks the
// file already has (journal_size_limit cuts it back to walSizeLimit).
// A restart that could not finish is logged at debug level and left to
// the next request.
func (s *Store) restartWALNow(ctx context.Context) {
	start := time.Now()
	var blocked, wal, copied int
	err := s.withBusyTimeout(ctx, restartTimeoutMS, func() error {
		return s.writer.QueryRowContext(ctx, `PRAGMA wal_checkpoint(RESTART)`).Scan(&blocked, &wal, &copied)
	})
	if err != nil && !busy(err) {
		s.log.Warn("WAL restart failed", "err", err)
		return
	}
	s.log.Debug("WAL restart", "done", err == nil && blocked == 0, "wal_pages", wal, "copied_pages", copied,
		"writer_paused", time.Since(start))
}

// withBusyTimeout runs f with the writer connection's busy timeout set to
// ms, and sets it back after.
func (s *Store) withBusyTimeout(ctx context.Context, ms int, f func() error) error {
	if _, err := s.writer.ExecContext(ctx, `PRAGMA busy_timeout = `+strconv.Itoa(ms)); err != nil {
		return err
	}
	err := f()
	if _, rerr := s.writer.ExecContext(ctx, `PRAGMA busy_timeout = `+strconv.Itoa(s.busyMS)); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// maxBatch bounds the writes committed together.
const maxBatch = 64

// txOnce hands fn to the writer loop and waits for its outcome: committed
// (nil), or fn's error, or the transaction's. Once handed over, fn is not
// abandoned: the call returns after the writer is done with it. A durable
// write's nil comes once the WAL holding its commit is on disk; when that
// sync fails, the write is committed but its error says it may not
// survive a power loss.
func (s *Store) txOnce(ctx context.Context, fn func(tx *txn) error, durable bool) error {
	select {
	case <-s.closing:
		return ErrClosed
	default:
	}
	w := &write{ctx: ctx, fn: fn, durable: durable, done: make(chan error, 1)}
	select {
	case s.writes <- w:
	case <-s.closing:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-w.done:
		return err
	case <-s.loopDone:
		// The loop answered every write it took before it stopped; one
		// handed over as it stopped was never taken.
		select {
		case err := <-w.done:
			return err
		default:
			return ErrClosed
		}
	}
}

// writeLoop runs the writes handed to txOnce, taking with each one the
// writes already waiting behind it, until Close. Writes still waiting then
// fail with ErrClosed; durable writes already committed are answered by
// the syncer before the loop is done.
func (s *Store) writeLoop() {
	defer close(s.loopDone)
	defer s.syncer.stop()
	batch := make([]*write, 0, maxBatch)
	for {
		select {
		case w := <-s.writes:
			batch = append(batch[:0], w)
		case <-s.closing:
			for {
				select {
				case w := <-s.writes:
					w.done <- ErrClosed
				default:
					return
				}
			}
		}
	more:
		for len(batch) < maxBatch {
			select {
			case w := <-s.writes:
				batch = append(batch, w)
			default:
				break more
			}
		}
		s.runBatch(batch)
		clear(batch)
		s.wstmts.preparePending(context.Background())
		if s.restartWAL.Swap(false) && !s.replaced.Load() {
			s.restartWALNow(context.Background())
		}
	}
}

// runBatch commits the writes of batch, in order, in one transaction: each
// in a savepoint, rolled back alone when it fails. When the transaction
// itself breaks (it cannot begin, a savepoint cannot be released or rolled
// back, SQLite rolled the whole transaction back), each write runs again in
// a transaction of its own, which is what a write alone always gets.
func (s *Store) runBatch(batch []*write) {
	live := batch[:0:0]
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.done <- err
			continue
		}
		live = append(live, w)
	}
	if len(live) == 0 {
		return
	}
	// One stat a group: nothing is committed into a file that is no
	// longer the store's.
	if err := s.checkFile(); err != nil {
		for _, w := range live {
			w.done <- err
		}
		return
	}
	switch len(live) {
	case 1:
		s.answer(live[:1], []error{s.runAlone(live[0])})
		return
	}
	errs, err := s.runTogether(live)
	if err != nil {
		if busy(err) {
			// Another process holds the lock: every write reports it and
			// its caller retries after a backoff.
			for _, w := range live {
				w.done <- err
			}
			return
		}
		s.log.Warn("a group of writes failed together; running them one by one", "writes", len(live), "err", err)
		errs = make([]error, len(live))
		for i, w := range live {
			if errs[i] = w.ctx.Err(); errs[i] == nil {
				errs[i] = s.runAlone(w)
			}
		}
	}
	s.answer(live, errs)
}

// answer tells each write of a committed group its outcome: at once, but
// for a durable write that succeeded, which the syncer answers once the
// WAL is on disk.
func (s *Store) answer(batch []*write, errs []error) {
	var durable []*write
	for i, w := range batch {
		if w.durable && errs[i] == nil {
			durable = append(durable, w)
			continue
		}
		w.done <- errs[i]
	}
	if len(durable) > 0 {
		s.syncer.add(durable)
	}
}

// runAlone runs one write in a transaction of its own.
func (s *Store) runAlone(w *write) error {
	tx, err := s.writer.BeginTx(w.ctx, nil)
	if err != nil {
		return err
	}
	if err := w.fn(&txn{Tx: tx, cache: s.wstmts}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// runTogether runs the writes in savepoints of one transaction and commits
// it. It returns each write's own error (a failed write changed nothing),
// or an error of the transaction as a whole, after which nothing of it is
// committed.
func (s *Store) runTogether(batch []*write) ([]error, error) {
	// The transaction is not tied to any one caller's context: a caller
	// that gives up must not roll back the others' writes.
	ctx := context.Background()
	sqltx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	tx := &txn{Tx: sqltx, cache: s.wstmts}
	errs := make([]error, len(batch))
	for i, w := range batch {
		if _, err := tx.ExecContext(ctx, `SAVEPOINT w`); err != nil {
			_ = tx.Rollback()
			return nil, fmt.Errorf("savepoint: %w", err)
		}
		if errs[i] = w.fn(tx); errs[i] != nil {
			if busy(errs[i]) {
				_ = tx.Rollback()
				return nil, errs[i]
			}
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO w`); err != nil {
				_ = tx.Rollback()
				return nil, fmt.Errorf("roll back to savepoint: %w (after %w)", err, errs[i])
			}
		}
		// Releasing checks too that the transaction is still open: SQLite
		// rolls a whole transaction back on some errors (I/O, full disk,
		// an interrupted statement), which a write may have swallowed.
		if _, err := tx.ExecContext(ctx, `RELEASE w`); err != nil {
			_ = tx.Rollback()
			return nil, fmt.Errorf("release savepoint: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return errs, nil
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
