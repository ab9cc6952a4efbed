package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
)

// dumpTables are the tables Dump reads, parents before the tables that
// refer to them, each in the order of its key (ids ascending, so that a
// job's parent and the job it retries come before it). schema_migrations
// is the store's own bookkeeping and leases say who holds what now: neither
// is data.
var dumpTables = []struct{ name, order string }{
	{"store_meta", "key"},
	{"tasks", "id"},
	{"comments", "id"},
	{"jobs", "id"},
	{"job_events", "id"},
	{"outbox", "id"},
	{"inbound_events", "key"},
	{"inbox", "id"},
	{"approvals", "id"},
	{"allow_rules", "id"},
	{"job_checkpoints", "job_id"},
	{"usage", "id"},
}

// Dump reads the store file at file without changing it (the file is
// opened read-only and never migrated) and hands fn every row of every
// table, as the columns are stored: table by table, parents first (see
// dumpTables), cols naming the columns of row. Values are int64, float64,
// string, []byte or nil (NULL); timestamps are unix milliseconds, a
// comment's files a JSON array in a string. fn may keep row. All rows come
// from one read transaction, a consistent snapshot even while another
// process writes. The file must exist and be at this binary's schema
// version (else an error saying to run `baton migrate` on it). An error
// from fn stops the dump and is returned as it is.
func Dump(ctx context.Context, file string, fn func(table string, cols []string, row []any) error) error {
	if _, err := os.Stat(file); err != nil {
		return fmt.Errorf("dump store %s: %w", file, err)
	}
	db, err := sql.Open("sqlite", readOnlyDSN(file))
	if err != nil {
		return fmt.Errorf("dump store %s: %w", file, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("dump store %s: %w", file, err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only: nothing to keep
	if err := checkVersion(ctx, tx); err != nil {
		return fmt.Errorf("dump store %s: %w", file, err)
	}
	for _, t := range dumpTables {
		if err := dumpTable(ctx, tx, t.name, t.order, fn); err != nil {
			return err
		}
	}
	return nil
}

// readOnlyDSN opens path read-only (mode=ro: never created, never
// written) as a URI, with the store's busy timeout.
func readOnlyDSN(path string) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc + "?mode=ro&_pragma=busy_timeout(5000)&_pragma=query_only(1)"
}

// checkVersion reports whether the file's schema is the one this binary
// writes: a dump of an older or newer schema would miss or misname
// columns.
func checkVersion(ctx context.Context, tx *sql.Tx) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	var have, want int
	for _, n := range names {
		prefix, _, _ := strings.Cut(path.Base(n), "_")
		if v, err := strconv.Atoi(prefix); err == nil {
			want = max(want, v)
		}
	}
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("read its schema version (is it a Baton store?): %w", err)
	}
	switch {
	case have < want:
		return fmt.Errorf("its schema is at version %d, this Baton's is %d: run `baton migrate` on it first", have, want)
	case have > want:
		return fmt.Errorf("its schema is at version %d, newer than this Baton's %d: use the Baton that made it", have, want)
	}
	return nil
}

func dumpTable(ctx context.Context, tx *sql.Tx, table, order string, fn func(string, []string, []any) error) error {
	rows, err := tx.QueryContext(ctx, `SELECT * FROM `+table+` ORDER BY `+order)
	if err != nil {
		return fmt.Errorf("dump %s: %w", table, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return fmt.Errorf("dump %s: %w", table, err)
	}
	for rows.Next() {
		row := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("dump %s: %w", table, err)
		}
		if err := fn(table, cols, row); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dump %s: %w", table, err)
	}
	return nil
}
