package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ErrNotEmpty reports an Import into a database that already holds
// Baton's data: a copy never merges into another store.
var ErrNotEmpty = errors.New("the database already holds Baton's data")

// Source hands fn every row of another store's tables, table by table,
// parents before the tables that refer to them and each table in id
// order (core/sqlite's Dump is one). cols names the columns of row, the
// same for every row of a table. Values are int64, float64, string,
// []byte or nil (NULL); timestamps are unix milliseconds; a TEXT[] column
// (a comment's files) comes as a JSON array in a string. An error of fn
// must be returned as it is.
type Source func(ctx context.Context, fn func(table string, cols []string, row []any) error) error

// importTables are the tables Import fills, in the order a Source hands
// them over. Every one is checked empty first.
var importTables = []string{"tasks", "comments", "jobs", "job_events", "outbox", "inbound_events",
	"inbox", "approvals", "allow_rules", "job_checkpoints", "usage"}

// derived are the columns of importTables a Source does not have:
// Import computes them.
var derived = map[string][]string{"tasks": {"outbox_seq"}}

// Copied is how many rows of one table Import wrote.
type Copied struct {
	Table string
	Rows  int64
}

// Import copies every row src hands over into the store, keeping ids,
// states, times and sequence numbers as they are, all in one
// transaction: nothing is written when any of it fails. It returns the
// rows written per table, every table of the schema listed (in
// importTables' order).
//
// The tables are locked against other writers and must all be empty,
// else it fails with an error wrapping ErrNotEmpty that names a table
// holding rows. A table or column src has and this schema does not is an
// error (nothing is dropped on the way); a column this schema has and src
// does not is one too, unless Import derives it: each task's outbox
// counter is its highest outbox Seq. The id identities are set past the
// highest copied id, so that rows created afterwards never collide. The
// store id of src (its store_meta row store_id) replaces this store's, so
// the workspaces directory of the copied store remains this store's
// (workspace.Claim); other store_meta rows are not copied.
//
// src may be called more than once: a transaction the server rolled back
// (a lost connection, a serialization failure) runs again as a whole.
func (s *Store) Import(ctx context.Context, src Source) ([]Copied, error) {
	var counts []Copied
	err := s.tx(ctx, func(tx db) error {
		counts = counts[:0]
		// A copy of any size is not a slow statement.
		if _, err := tx.exec(ctx, `SET LOCAL statement_timeout = 0`); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `LOCK TABLE store_meta, `+strings.Join(importTables, ", ")+` IN EXCLUSIVE MODE`); err != nil {
			return fmt.Errorf("lock the tables: %w", err)
		}
		for _, t := range importTables {
			var full bool
			if err := tx.row(ctx, `SELECT EXISTS (SELECT 1 FROM `+t+`)`).Scan(&full); err != nil {
				return fmt.Errorf("look into %s: %w", t, err)
			}
			if full {
				return fmt.Errorf("%w: table %s has rows", ErrNotEmpty, t)
			}
		}
		types, err := columnTypes(ctx, tx)
		if err != nil {
			return err
		}
		im := &importer{ctx: ctx, tx: tx, types: types, counts: map[string]int64{}}
		if err := src(ctx, im.add); err != nil {
			return err
		}
		if err := im.flush(); err != nil {
			return err
		}
		for _, t := range importTables {
			if _, ok := types[t]["id"]; !ok || im.counts[t] == 0 {
				continue
			}
			if _, err := tx.exec(ctx, `SELECT setval(pg_get_serial_sequence($1, 'id'), (SELECT max(id) FROM `+t+`))`, t); err != nil {
				return fmt.Errorf("set the ids of %s past the copied ones: %w", t, err)
			}
		}
		if _, err := tx.exec(ctx, `UPDATE tasks SET outbox_seq = o.seq
			FROM (SELECT task_id, max(seq) AS seq FROM outbox GROUP BY task_id) o WHERE tasks.id = o.task_id`); err != nil {
			return fmt.Errorf("set the tasks' outbox counters: %w", err)
		}
		if im.storeID != "" {
			if _, err := tx.exec(ctx, `UPDATE store_meta SET value = $1 WHERE key = 'store_id'`, im.storeID); err != nil {
				return fmt.Errorf("keep the store id: %w", err)
			}
		}
		for _, t := range importTables {
			counts = append(counts, Copied{Table: t, Rows: im.counts[t]})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("import into %s: %w", s.server, err)
	}
	return counts, nil
}

// columnTypes returns the data type (information_schema's data_type) of
// every column of every table of the current schema.
func columnTypes(ctx context.Context, tx db) (map[string]map[string]string, error) {
	rows, err := tx.query(ctx, `SELECT table_name, column_name, data_type FROM information_schema.columns
		WHERE table_schema = current_schema()`)
	if err != nil {
		return nil, fmt.Errorf("read the schema: %w", err)
	}
	defer rows.Close()
	out := map[string]map[string]string{}
	for rows.Next() {
		var table, col, typ string
		if err := rows.Scan(&table, &col, &typ); err != nil {
			return nil, fmt.Errorf("read the schema: %w", err)
		}
		if out[table] == nil {
			out[table] = map[string]string{}
		}
		out[table][col] = typ
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the schema: %w", err)
	}
	return out, nil
}

// importBatch is how many rows one COPY writes.
const importBatch = 1000

// importer writes the rows a Source hands over, a batch at a time.
type importer struct {
	ctx     context.Context // the transaction's
	tx      db
	types   map[string]map[string]string
	counts  map[string]int64
	seen    []string // the tables handed over so far, in order
	table   string   // the table of batch
	cols    []string
	batch   [][]any
	storeID string
}

// add takes one row of table.
func (im *importer) add(table string, cols []string, row []any) error {
	if table == "store_meta" {
		return im.meta(cols, row)
	}
	if table != im.table {
		if err := im.flush(); err != nil {
			return err
		}
		if err := im.begin(table, cols); err != nil {
			return err
		}
	}
	if len(row) != len(im.cols) {
		return fmt.Errorf("import %s: a row of %d values for %d columns", table, len(row), len(im.cols))
	}
	out := make([]any, len(row))
	for i, v := range row {
		c, err := convert(v, im.types[table][im.cols[i]])
		if err != nil {
			return fmt.Errorf("import %s row %d, column %s: %w", table, im.counts[table]+int64(len(im.batch))+1, im.cols[i], err)
		}
		out[i] = c
	}
	im.batch = append(im.batch, out)
	if len(im.batch) >= importBatch {
		return im.flush()
	}
	return nil
}

// begin starts on table, checking that its columns are this schema's.
func (im *importer) begin(table string, cols []string) error {
	if !slices.Contains(importTables, table) {
		return fmt.Errorf("import: table %s has no place in this schema", table)
	}
	if slices.Contains(im.seen, table) {
		return fmt.Errorf("import: table %s handed over twice", table)
	}
	types := im.types[table]
	for _, c := range cols {
		if _, ok := types[c]; !ok {
			return fmt.Errorf("import: column %s.%s has no place in this schema", table, c)
		}
	}
	for c := range types {
		if !slices.Contains(cols, c) && !slices.Contains(derived[table], c) {
			return fmt.Errorf("import: the source has no column %s.%s", table, c)
		}
	}
	im.seen = append(im.seen, table)
	im.table, im.cols = table, slices.Clone(cols)
	return nil
}

// meta keeps the store id of a store_meta row.
func (im *importer) meta(cols []string, row []any) error {
	k, v := slices.Index(cols, "key"), slices.Index(cols, "value")
	if k < 0 || v < 0 || len(row) != len(cols) {
		return errors.New("import store_meta: want columns key and value")
	}
	if key, _ := row[k].(string); key == "store_id" {
		id, ok := row[v].(string)
		if !ok || id == "" {
			return fmt.Errorf("import store_meta: unusable store id %v", row[v])
		}
		im.storeID = id
	}
	return nil
}

// flush writes the batch with COPY.
func (im *importer) flush() error {
	if len(im.batch) == 0 {
		return nil
	}
	n, err := im.tx.q.CopyFrom(im.ctx, pgx.Identifier{im.table}, im.cols, pgx.CopyFromRows(im.batch))
	if err != nil {
		return fmt.Errorf("import %s: %w", im.table, err)
	}
	im.counts[im.table] += n
	im.batch = im.batch[:0]
	return nil
}

// convert turns a value of a Source into one column type typ takes.
func convert(v any, typ string) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch typ {
	case "bytea":
		switch x := v.(type) {
		case []byte:
			return x, nil
		case string:
			return []byte(x), nil
		}
	case "text":
		switch x := v.(type) {
		case string:
			return text(x), nil
		case []byte:
			return text(string(x)), nil
		case int64:
			return strconv.FormatInt(x, 10), nil
		}
	case "bigint", "integer":
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			if x == float64(int64(x)) {
				return int64(x), nil
			}
		}
	case "double precision":
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		}
	case "ARRAY":
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case []byte:
			s = string(x)
		default:
			return nil, fmt.Errorf("want a JSON array, got %T", v)
		}
		var list []string
		if err := json.Unmarshal([]byte(s), &list); err != nil {
			return nil, fmt.Errorf("want a JSON array of strings: %w", err)
		}
		if list == nil {
			list = []string{}
		}
		for i := range list {
			list[i] = text(list[i])
		}
		return list, nil
	}
	return nil, fmt.Errorf("cannot store a %T in a %s column", v, typ)
}
