package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// fullScan matches a plan step that reads a whole table: "SCAN t" with no
// index ("SCAN t USING INDEX i" and "USING COVERING INDEX" read an index;
// a virtual table such as json_each and a constant row are not stored
// tables).
var fullScan = regexp.MustCompile(`^SCAN ([^(\s]\S*)( AS \S+)?$`)

// numbered matches a numbered parameter, ?N.
var numbered = regexp.MustCompile(`\?(\d+)`)

// params returns NULL for each parameter of q: the plan does not depend
// on the values.
func params(q string) []any {
	n := strings.Count(q, "?")
	if m := numbered.FindAllStringSubmatch(q, -1); m != nil {
		n = 0
		for _, x := range m {
			k, _ := strconv.Atoi(x[1])
			n = max(n, k)
		}
	}
	return make([]any, n)
}

// scans returns the plan steps of q that scan a whole table.
func scans(ctx context.Context, db *sql.DB, q string) ([]string, error) {
	rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, params(q)...)
	if err != nil {
		return nil, fmt.Errorf("explain: %w", err)
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return nil, err
		}
		if testing.Verbose() {
			fmt.Printf("\t%s\n", detail)
		}
		if fullScan.MatchString(detail) {
			bad = append(bad, detail)
		}
	}
	return bad, rows.Err()
}

// TestHotQueriesUseIndexes: every query on a hot path (hotQueries) is
// answered from an index — SQLite's plan for it scans no whole table — so
// that its cost does not grow with a store of a year's tasks.
func TestHotQueriesUseIndexes(t *testing.T) {
	s := newStore(t)
	for _, q := range hotQueries {
		t.Run(q.name, func(t *testing.T) {
			bad, err := scans(t.Context(), s.reader.DB, q.sql)
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) > 0 {
				t.Errorf("%s scans a whole table: %q\n%s", q.name, bad, q.sql)
			}
		})
	}
}

// TestScanCheckerFlagsUnindexedQueries: the check above can fail — a query
// on an unindexed column, as a hot query changed to scan would be, is
// flagged, and the same table read through an index is not.
func TestScanCheckerFlagsUnindexedQueries(t *testing.T) {
	s := newStore(t)
	for _, c := range []struct {
		sql  string
		scan bool
	}{
		{`SELECT id FROM jobs WHERE instruction = ?`, true},
		{`SELECT o.id FROM outbox o WHERE o.payload = ? ORDER BY o.id`, true},
		{`SELECT ` + jobCols + ` FROM jobs WHERE task_id = ? ORDER BY id DESC LIMIT 1`, false},
		{qJobByID, false},
	} {
		bad, err := scans(t.Context(), s.reader.DB, c.sql)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(bad) > 0; got != c.scan {
			t.Errorf("scan flagged = %v, want %v (plan steps %q) for\n%s", got, c.scan, bad, c.sql)
		}
	}
}
