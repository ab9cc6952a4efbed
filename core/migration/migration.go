// Package migration reads Baton's schema migration files for the stores
// (core/sqlite, core/postgres): the files in version order (Files), which
// of them run online, and the steps an online one is made of.
//
// A migration file is a script of SQL statements. By default a store runs
// it whole in one transaction, which on a big table holds the write lock
// (SQLite) or a table lock that blocks writers (PostgreSQL's CREATE INDEX)
// for as long as the script takes. A file whose first lines hold the
// marker
//
//	-- baton:online
//
// runs online instead: its statements one by one, each on its own
// (in a transaction of its own, or none where the engine requires it:
// PostgreSQL's CREATE INDEX CONCURRENTLY), so that writers of other
// connections go on between statements, and a store logs each index it
// builds (the index, its table's rows, how long it took). A statement
// preceded by the line
//
//	-- baton:batch
//
// is a backfill: it must touch at most @batch rows (the store binds the
// batch size to that name) and none it touched before, and it is run again,
// each run in a transaction of its own, until it changes no row; the
// store logs each batch's progress.
//
// An online migration is recorded as applied only once every statement
// has run, so a process stopped in the middle runs the file again from
// its first statement: every statement must be idempotent (CREATE INDEX
// IF NOT EXISTS; a backfill's WHERE excludes the rows it did). In an
// online file a statement ends at a line ending in a semicolon; comment
// lines (--) between statements are dropped.
package migration

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Marker lines of a migration file.
const (
	OnlineMarker = "-- baton:online"
	BatchMarker  = "-- baton:batch"
)

// BatchParam is the name a backfill statement's batch size is bound to
// (@batch in the statement).
const BatchParam = "batch"

// Step is one statement of an online migration.
type Step struct {
	// SQL is the statement, without its final semicolon.
	SQL string
	// Batch marks a backfill, run again until it changes no row.
	Batch bool
	// Index and Table are the index a CREATE INDEX statement builds and
	// its table; empty for other statements.
	Index, Table string
	// Concurrently reports CREATE INDEX CONCURRENTLY (PostgreSQL).
	Concurrently bool
}

// Online reports whether the script carries OnlineMarker among its
// leading comment lines.
func Online(script string) bool {
	for line := range strings.Lines(script) {
		line = strings.TrimSpace(line)
		switch {
		case line == OnlineMarker:
			return true
		case line == "" || strings.HasPrefix(line, "--"):
			continue
		}
		return false
	}
	return false
}

var createIndex = regexp.MustCompile(`(?is)^CREATE\s+(?:UNIQUE\s+)?INDEX\s+(CONCURRENTLY\s+)?(?:IF\s+NOT\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_]*)\s+ON\s+(?:ONLY\s+)?([A-Za-z_][A-Za-z0-9_.]*)`)

// Steps splits an online script into its statements. It fails on a batch
// marker that no statement follows, a backfill without @batch, and
// a last statement without its semicolon.
func Steps(script string) ([]Step, error) {
	var (
		out   []Step
		cur   strings.Builder
		batch bool
	)
	for line := range strings.Lines(script) {
		trim := strings.TrimSpace(line)
		if cur.Len() == 0 {
			switch {
			case trim == BatchMarker:
				batch = true
				continue
			case trim == "" || strings.HasPrefix(trim, "--"):
				continue
			}
		}
		cur.WriteString(line)
		if !strings.HasSuffix(trim, ";") {
			continue
		}
		sql := strings.TrimSuffix(strings.TrimSpace(cur.String()), ";")
		cur.Reset()
		st := Step{SQL: sql, Batch: batch}
		batch = false
		if st.Batch && !strings.Contains(sql, "@"+BatchParam) {
			return nil, fmt.Errorf("backfill %q does not bound its rows with @%s", firstLine(sql), BatchParam)
		}
		if m := createIndex.FindStringSubmatch(sql); m != nil {
			st.Concurrently, st.Index, st.Table = m[1] != "", m[2], m[3]
		}
		out = append(out, st)
	}
	if strings.TrimSpace(cur.String()) != "" {
		return nil, fmt.Errorf("statement %q does not end with a semicolon", firstLine(cur.String()))
	}
	if batch {
		return nil, errors.New(BatchMarker + " is not followed by a statement")
	}
	return out, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + "…"
	}
	return s
}
