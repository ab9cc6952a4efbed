package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/migration"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// indexProgressEvery is how often an online index build logs its
// progress (pg_stat_progress_create_index).
const indexProgressEvery = 10 * time.Second

// migrateBatch is the rows one transaction of an online migration's
// backfill changes.
const migrateBatch = 1000

// Migrate applies the embedded migrations not yet recorded in
// schema_migrations, in version order, on one connection that holds a
// session-level advisory lock of the schema for the whole run: processes
// starting together wait for one another, and each migration is applied
// once. Running it again is a no-op. A database already at a version newer
// than this binary's is refused with an error wrapping ErrNewerSchema that
// names both versions.
//
// An ordinary migration runs in one transaction with its record. An
// online one (marked "-- baton:online", see core/migration; 0007's
// retention indexes are) runs statement by statement outside any
// transaction, and is recorded once all have run. Its indexes are built
// with CREATE INDEX CONCURRENTLY, which lets writers go on while it reads
// a big table; each build is logged at its start (the table's estimated
// rows), every indexProgressEvery while it runs (its phase, blocks and
// tuples from pg_stat_progress_create_index) and at its end (how long it
// took). An index left INVALID by a build that was interrupted (a crash,
// a cancelled start) is dropped and built again: IF NOT EXISTS alone would
// keep it, unused by every query and still updated by every write.
//
// Processes waiting for the lock poll for it rather than block on it: a
// session blocked on the lock holds a snapshot, which CREATE INDEX
// CONCURRENTLY waits for, and the two would wait for each other.
func (s *Store) Migrate(ctx context.Context) error {
	return s.migrate(ctx, 0)
}

// migrate applies the migrations up to version upTo (0: all of them).
func (s *Store) migrate(ctx context.Context, upTo int) error {
	if err := s.migrateOn(ctx, upTo); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

func (s *Store) migrateOn(ctx context.Context, upTo int) (err error) {
	if s.closed.Load() {
		return fmt.Errorf("store %s: %w", s.server, core.ErrClosed)
	}
	all, err := schemaIn(s.schema)
	if err != nil {
		return err
	}
	latest := all[len(all)-1].Version
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	// A connection whose session could not be set back is not returned
	// to the pool.
	drop := func() { _ = conn.Conn().Close(context.WithoutCancel(ctx)) }
	// Migrations, and waiting for another process's, are not slow
	// statements.
	if _, err := conn.Exec(ctx, `SET statement_timeout = 0`); err != nil {
		drop()
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, rerr := conn.Exec(rctx, `RESET statement_timeout`); rerr != nil {
			drop()
		}
	}()
	if err := s.migrationLock(ctx, conn); err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, rerr := conn.Exec(rctx, `SELECT pg_advisory_unlock(`+migrationLockKey+`)`); rerr != nil {
			drop() // ending the session releases the lock
		}
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at BIGINT  NOT NULL
	)`); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return err
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return err
	}
	if newest := slices.Max(append(done, 0)); newest > latest {
		return fmt.Errorf("%w: the database is at schema version %d, this binary knows versions up to %d; run the Baton that migrated it, or a newer one",
			ErrNewerSchema, newest, latest)
	}
	for _, m := range all {
		if upTo > 0 && m.Version > upTo {
			break
		}
		if slices.Contains(done, m.Version) {
			continue
		}
		apply := s.migrateInTx
		if migration.Online(m.Body) {
			apply = s.migrateOnline
		}
		if err := apply(ctx, conn, m); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		s.log.InfoContext(ctx, "migration applied", "migration", m.Name)
	}
	return nil
}

// migrationLockKey is the advisory lock of the schema's migrations.
const migrationLockKey = `hashtextextended('baton.migrate:' || COALESCE(current_schema(), ''), 0)`

// migrationLock takes the schema's migration lock on conn, for its
// session, polling while another process holds it.
func (s *Store) migrationLock(ctx context.Context, conn *pgxpool.Conn) error {
	pause := 50 * time.Millisecond
	for logged := false; ; {
		var got bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+migrationLockKey+`)`).Scan(&got); err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
		if got {
			return nil
		}
		if !logged {
			s.log.InfoContext(ctx, "waiting for another process's migrations")
			logged = true
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for the migration lock: %w", ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// migrateInTx runs m whole in one transaction with its record.
func (s *Store) migrateInTx(ctx context.Context, conn *pgxpool.Conn, m schemaMigration) error {
	return pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		// A script: several statements, run as one simple query.
		if _, err := tx.Exec(ctx, m.Body); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
			m.Version, m.Name, ms(time.Now()))
		return err
	})
}

// migrateOnline runs m's statements one by one outside a transaction and
// records m once they have all run.
func (s *Store) migrateOnline(ctx context.Context, conn *pgxpool.Conn, m schemaMigration) error {
	steps, err := migration.Steps(m.Body)
	if err != nil {
		return err
	}
	log := s.log.With("migration", m.Name)
	start := time.Now()
	log.InfoContext(ctx, "migration running online, statement by statement", "statements", len(steps))
	for _, st := range steps {
		switch {
		case st.Index != "" && !st.Concurrently:
			return fmt.Errorf("index %s: an online migration builds its indexes CONCURRENTLY", st.Index)
		case st.Index != "":
			err = s.buildIndex(ctx, conn, log, st)
		case st.Batch:
			err = s.backfill(ctx, conn, log, st)
		default:
			_, err = conn.Exec(ctx, st.SQL)
		}
		if err != nil {
			return err
		}
	}
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)
		ON CONFLICT (version) DO NOTHING`, m.Version, m.Name, ms(time.Now())); err != nil {
		return err
	}
	log.InfoContext(ctx, "online migration done", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// indexValid reports whether the current schema has an index named name
// and whether it is valid.
func indexValid(ctx context.Context, q querier, name string) (exists, valid bool, err error) {
	err = q.QueryRow(ctx, `SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
		WHERE c.relname = $1 AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())`, name).Scan(&valid)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	return err == nil, valid, err
}

// buildIndex runs st, a CREATE INDEX CONCURRENTLY, on conn outside a
// transaction, logging its start, its progress and its end. A valid index
// of its name is left as it is; an invalid one is dropped first.
func (s *Store) buildIndex(ctx context.Context, conn *pgxpool.Conn, log *slog.Logger, st migration.Step) error {
	exists, valid, err := indexValid(ctx, conn, st.Index)
	if err != nil {
		return fmt.Errorf("index %s: %w", st.Index, err)
	}
	if valid {
		return nil
	}
	if exists {
		log.WarnContext(ctx, "dropping an index left invalid by an interrupted build, to build it again", "index", st.Index)
		var schema string
		if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
			return fmt.Errorf("index %s: %w", st.Index, err)
		}
		if _, err := conn.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+pgx.Identifier{schema, st.Index}.Sanitize()); err != nil {
			return fmt.Errorf("drop invalid index %s: %w", st.Index, err)
		}
	}
	var rows float64
	var size int64
	if err := conn.QueryRow(ctx, `SELECT c.reltuples, pg_relation_size(c.oid) FROM pg_class c WHERE c.oid = to_regclass($1)`, st.Table).Scan(&rows, &size); err != nil {
		return fmt.Errorf("index %s: read the size of %s: %w", st.Index, st.Table, err)
	}
	attrs := []any{"index", st.Index, "table", st.Table, "table_bytes", size}
	if rows >= 0 { // -1: never analyzed
		attrs = append(attrs, "rows_estimate", int64(rows))
	}
	log.InfoContext(ctx, "building index concurrently (writers go on)", attrs...)
	start := time.Now()
	stop := s.watchIndexBuild(ctx, log, st.Index, conn.Conn().PgConn().PID())
	_, err = conn.Exec(ctx, st.SQL)
	stop()
	if err != nil {
		// What the build leaves is an invalid index: the next Migrate
		// drops it and builds it again.
		return fmt.Errorf("index %s: %w", st.Index, err)
	}
	if _, valid, err := indexValid(ctx, conn, st.Index); err != nil || !valid {
		return fmt.Errorf("index %s: not valid after its build (%v)", st.Index, err)
	}
	log.InfoContext(ctx, "index built", "index", st.Index, "table", st.Table,
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

// watchIndexBuild logs, every s.progressEvery until stop is called, the
// progress of the index build the backend pid runs, read on another
// connection of the pool.
func (s *Store) watchIndexBuild(ctx context.Context, log *slog.Logger, index string, pid uint32) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(s.progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var phase string
			var blocksDone, blocksTotal, tuplesDone, tuplesTotal int64
			err := s.pool.QueryRow(ctx, `SELECT phase, blocks_done, blocks_total, tuples_done, tuples_total
				FROM pg_stat_progress_create_index WHERE pid = $1`, int64(pid)).Scan(&phase, &blocksDone, &blocksTotal, &tuplesDone, &tuplesTotal)
			if err != nil {
				continue // between phases, or the build is over
			}
			log.InfoContext(ctx, "index build progress", "index", index, "phase", phase,
				"blocks_done", blocksDone, "blocks_total", blocksTotal, "tuples_done", tuplesDone, "tuples_total", tuplesTotal)
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// backfill runs st, a backfill of at most @batch rows, until it changes
// none, each batch a transaction of its own, and logs its progress.
func (s *Store) backfill(ctx context.Context, conn *pgxpool.Conn, log *slog.Logger, st migration.Step) error {
	start := time.Now()
	var done, batches int64
	for {
		tag, err := conn.Exec(ctx, st.SQL, pgx.NamedArgs{migration.BatchParam: s.migrateBatch})
		if err != nil {
			return fmt.Errorf("backfill after %d rows: %w", done, err)
		}
		if tag.RowsAffected() == 0 {
			break
		}
		done, batches = done+tag.RowsAffected(), batches+1
		if s.onOnlineStep != nil {
			s.onOnlineStep()
		}
		if batches%100 == 0 {
			log.InfoContext(ctx, "backfill progress", "rows", done, "batches", batches,
				"elapsed", time.Since(start).Round(time.Millisecond))
		}
	}
	log.InfoContext(ctx, "backfill done", "rows", done, "batches", batches, "batch", s.migrateBatch,
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}
