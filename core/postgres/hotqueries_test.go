package postgres

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// param matches a parameter, $N.
var param = regexp.MustCompile(`\$(\d+)`)

// seqScans returns the plan lines of q that read a whole table. The plan
// is the generic one (the parameters unknown, as a prepared statement
// runs), asked with enable_seqscan off: PostgreSQL then scans a table
// sequentially only where no index serves the query, however few rows the
// test's tables hold.
func seqScans(ctx context.Context, s *Store, q string) ([]string, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	n := 0
	for _, m := range param.FindAllStringSubmatch(q, -1) {
		k, _ := strconv.Atoi(m[1])
		n = max(n, k)
	}
	nulls := strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ")
	for _, stmt := range []string{`SET enable_seqscan = off`, `SET plan_cache_mode = force_generic_plan`,
		`DEALLOCATE ALL`, `PREPARE hot AS ` + q} {
		if _, err := conn.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Fields(stmt)[0], err)
		}
	}
	defer conn.Exec(context.WithoutCancel(ctx), `RESET ALL; DEALLOCATE ALL`, pgx.QueryExecModeSimpleProtocol)
	exec := `EXPLAIN EXECUTE hot`
	if n > 0 {
		exec += `(` + nulls + `)`
	}
	rows, err := conn.Query(ctx, exec, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, fmt.Errorf("explain: %w", err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return nil, err
		}
		if testing.Verbose() {
			fmt.Printf("\t%s\n", line)
		}
		lines = append(lines, line)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return fullScans(lines), nil
}

// fullScans returns the plan nodes that read a whole table: a sequential
// scan, or an index scan with no condition on the index (every entry of
// it read, the rows filtered after) — what enable_seqscan off makes of a
// query no index serves.
func fullScans(lines []string) []string {
	var bad []string
	node := func(l string) bool {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "->"))
		return strings.Contains(l, "(cost=")
	}
	for i, l := range lines {
		t := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "->"))
		switch {
		case strings.HasPrefix(t, "Seq Scan on "):
			bad = append(bad, t)
		case strings.HasPrefix(t, "Index Scan ") || strings.HasPrefix(t, "Index Only Scan "):
			cond := false
			for _, d := range lines[i+1:] {
				if node(d) {
					break
				}
				cond = cond || strings.Contains(d, "Index Cond:")
			}
			if !cond {
				bad = append(bad, t)
			}
		}
	}
	return bad
}

// TestHotQueriesUseIndexes: every query on a hot path (hotQueries) is
// answered from an index — PostgreSQL's plan for it has no sequential scan
// — so that its cost does not grow with a store of a year's tasks.
func TestHotQueriesUseIndexes(t *testing.T) {
	s := newStore(t)
	for _, q := range hotQueries {
		t.Run(q.name, func(t *testing.T) {
			bad, err := seqScans(t.Context(), s, q.sql)
			if err != nil {
				t.Fatal(err)
			}
			if q.live != "" {
				bad = slices.DeleteFunc(bad, func(l string) bool { return strings.Contains(l, " using "+q.live+" ") })
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
		{`SELECT id FROM jobs WHERE instruction = $1`, true},
		{`SELECT o.id FROM outbox o WHERE o.payload = $1`, true},
		{`SELECT o.id FROM outbox o WHERE o.payload = $1 ORDER BY o.id DESC LIMIT 5`, true}, // a whole index read in order
		{qJobByID, false},
	} {
		bad, err := seqScans(t.Context(), s, c.sql)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(bad) > 0; got != c.scan {
			t.Errorf("scan flagged = %v, want %v (plan lines %q) for\n%s", got, c.scan, bad, c.sql)
		}
	}
}

// TestScanCheckerFlagsAHotQueryThatLostItsIndex: a hot query whose index is
// gone — as when a query is changed to filter on what no index covers —
// is flagged.
func TestScanCheckerFlagsAHotQueryThatLostItsIndex(t *testing.T) {
	s := newStore(t)
	if bad, err := seqScans(t.Context(), s, qJobEvents); err != nil || len(bad) > 0 {
		t.Fatalf("JobEvents with its index: scans %q, %v; want none", bad, err)
	}
	if _, err := s.pool.Exec(t.Context(), `DROP INDEX job_events_job`); err != nil {
		t.Fatal(err)
	}
	bad, err := seqScans(t.Context(), s, qJobEvents)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) == 0 {
		t.Error("JobEvents without its index is not flagged")
	}
}
