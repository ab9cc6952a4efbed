package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/baton-bot/baton/core/migration"
)

// Defaults of an online migration's pacing (see core/migration); a Store's
// fields hold them so that tests can change them.
const (
	// migrateBatch is the rows one transaction of a backfill changes.
	migrateBatch = 1000
	// migrateProgressEvery is how often a backfill logs its progress.
	migrateProgressEvery = 5 * time.Second
)

// schemaMigration is one migration file.
type schemaMigration = migration.File

// schemaMigrations returns the migrations of fsys (migrations/*.sql) in
// version order.
func schemaMigrations(fsys fs.FS) ([]schemaMigration, error) { return migration.Files(fsys) }

// Migrate applies the embedded migrations not yet recorded in
// schema_migrations, in version order. Running it again is a no-op;
// concurrent runs (several processes starting) apply each migration once.
//
// An ordinary migration runs in one transaction with its record. An
// online one (marked "-- baton:online", see core/migration) runs
// statement by statement, each in a write transaction of its own, so that
// other processes sharing the file write between its statements and
// between the batches of a backfill; it is recorded once all have run.
// Each index it builds is logged before (the index, its table, the
// table's rows) and after (how long it took), and a backfill logs its
// rows as it goes. One CREATE INDEX still holds the write lock while it
// runs: SQLite builds an index in one transaction.
//
// Open migrates before it returns, so in this process nothing is served
// until every migration has run; what runs online is other processes'
// writes to the same file.
func (s *Store) Migrate(ctx context.Context) error {
	return s.migrate(ctx, 0)
}

// migrate applies the migrations up to version upTo (0: all of them).
func (s *Store) migrate(ctx context.Context, upTo int) error {
	err := s.tx(ctx, func(tx *txn) error {
		_, err := tx.Tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT    NOT NULL,
			applied_at INTEGER NOT NULL
		)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	all, err := schemaMigrations(s.schema)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// An online migration reads between its statements on a connection
	// of its own, closed after: a connection of the readers' pool would
	// keep the schema it read then, and EXPLAIN, which never checks for a
	// newer one, would plan without the indexes built after.
	look, err := sql.Open("sqlite", dsn(s.path, busyTimeoutMS, false))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer look.Close()
	look.SetMaxOpenConns(1)
	for _, m := range all {
		if upTo > 0 && m.Version > upTo {
			break
		}
		apply := s.migrateInTx
		if migration.Online(m.Body) {
			apply = s.migrateOnline
		}
		applied, err := apply(ctx, look, m)
		if err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
		if applied {
			s.log.InfoContext(ctx, "migration applied", "migration", m.Name)
		}
	}
	return nil
}

// migrateInTx runs m whole in one transaction with its record, unless it
// is recorded already.
func (s *Store) migrateInTx(ctx context.Context, _ *sql.DB, m schemaMigration) (applied bool, err error) {
	err = s.tx(ctx, func(tx *txn) error {
		applied = false
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		// A script: run as it is, never kept as a statement.
		if _, err := tx.Tx.ExecContext(ctx, m.Body); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, ms(time.Now())); err != nil {
			return err
		}
		applied = true
		return nil
	})
	return applied, err
}

// migrateOnline runs m's statements one by one, each in a transaction of
// its own, and records m once they have all run; another process that
// recorded it meanwhile leaves applied false. Its reads go to look.
func (s *Store) migrateOnline(ctx context.Context, look *sql.DB, m schemaMigration) (applied bool, err error) {
	var n int
	if err := look.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, nil
	}
	steps, err := migration.Steps(m.Body)
	if err != nil {
		return false, err
	}
	log := s.log.With("migration", m.Name)
	start := time.Now()
	log.InfoContext(ctx, "migration running online, statement by statement", "statements", len(steps))
	for _, st := range steps {
		switch {
		case st.Index != "":
			err = s.buildIndex(ctx, look, log, st)
		case st.Batch:
			err = s.backfill(ctx, log, st)
		default:
			err = s.tx(ctx, func(tx *txn) error {
				_, err := tx.Tx.ExecContext(ctx, st.SQL)
				return err
			})
		}
		if err != nil {
			return false, err
		}
		s.onlineStep()
	}
	err = s.tx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)
			ON CONFLICT (version) DO NOTHING`, m.Version, m.Name, ms(time.Now()))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		applied = n == 1
		return err
	})
	if err != nil {
		return false, err
	}
	log.InfoContext(ctx, "online migration done", "took", time.Since(start).Round(time.Millisecond))
	return applied, nil
}

// onlineStep tells a test that a statement or batch of an online
// migration has committed: the write lock is free.
func (s *Store) onlineStep() {
	if s.onOnlineStep != nil {
		s.onOnlineStep()
	}
}

// buildIndex runs st, a CREATE INDEX, in a transaction of its own, and
// logs the build; an index of that name that exists already is left as
// it is.
func (s *Store) buildIndex(ctx context.Context, look *sql.DB, log *slog.Logger, st migration.Step) error {
	var exists int
	if err := look.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = ?`, st.Index).Scan(&exists); err != nil {
		return fmt.Errorf("index %s: %w", st.Index, err)
	}
	if exists > 0 {
		return nil
	}
	var rows int64
	if err := look.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+st.Table).Scan(&rows); err != nil {
		return fmt.Errorf("index %s: count the rows of %s: %w", st.Index, st.Table, err)
	}
	log.InfoContext(ctx, "building index (it holds the write lock until built)", "index", st.Index, "table", st.Table, "rows", rows)
	start := time.Now()
	err := s.tx(ctx, func(tx *txn) error {
		_, err := tx.Tx.ExecContext(ctx, st.SQL)
		return err
	})
	if err != nil {
		return fmt.Errorf("index %s: %w", st.Index, err)
	}
	log.InfoContext(ctx, "index built", "index", st.Index, "table", st.Table, "rows", rows,
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

// backfill runs st, a backfill of at most @batch rows, until it changes
// none, each batch in a transaction of its own, and logs its progress.
func (s *Store) backfill(ctx context.Context, log *slog.Logger, st migration.Step) error {
	start, logged := time.Now(), time.Now()
	var done, batches int64
	for {
		var n int64
		err := s.tx(ctx, func(tx *txn) error {
			res, err := tx.Tx.ExecContext(ctx, st.SQL, sql.Named(migration.BatchParam, s.migrateBatch))
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return fmt.Errorf("backfill after %d rows: %w", done, err)
		}
		if n == 0 {
			break
		}
		done, batches = done+n, batches+1
		s.onlineStep()
		if time.Since(logged) >= s.progressEvery {
			log.InfoContext(ctx, "backfill progress", "rows", done, "batches", batches,
				"elapsed", time.Since(start).Round(time.Millisecond))
			logged = time.Now()
		}
	}
	log.InfoContext(ctx, "backfill done", "rows", done, "batches", batches, "batch", s.migrateBatch,
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}
