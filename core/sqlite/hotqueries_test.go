package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core"
)

// fullScan matches a plan step that reads a whole table or a whole index:
// SQLite's SCAN (a SEARCH reads only the entries a condition picks), with
// "USING INDEX i" or "USING COVERING INDEX i" or without. A subquery's
// result, a virtual table such as json_each and a constant row are not
// stored tables.
var fullScan = regexp.MustCompile(`^SCAN [^(\s]`)

// notStored matches the SCAN steps over what is not a stored table.
var notStored = regexp.MustCompile(`VIRTUAL TABLE|CONSTANT ROW`)

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

// plan returns the steps of q's query plan with args, or with every
// parameter NULL when none are given.
func plan(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
	if args == nil {
		args = params(q)
	}
	rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return nil, fmt.Errorf("explain: %w", err)
	}
	defer rows.Close()
	var steps []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return nil, err
		}
		if testing.Verbose() {
			fmt.Printf("\t%s\n", detail)
		}
		steps = append(steps, detail)
	}
	return steps, rows.Err()
}

// scans returns the plan steps of q that scan a whole table.
func scans(ctx context.Context, db *sql.DB, q string) ([]string, error) {
	steps, err := plan(ctx, db, q)
	var bad []string
	for _, s := range steps {
		if fullScan.MatchString(s) && !notStored.MatchString(s) {
			bad = append(bad, s)
		}
	}
	return bad, err
}

// takes reports whether one of q's plan steps begins with access.
func takes(ctx context.Context, db *sql.DB, q, access string) (bool, []string, error) {
	steps, err := plan(ctx, db, q)
	return slices.ContainsFunc(steps, func(s string) bool { return strings.HasPrefix(s, access) }), steps, err
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
			if q.by == "" {
				return
			}
			ok, steps, err := takes(t.Context(), s.reader.DB, q.sql, q.by)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				t.Errorf("%s does not take %q: plan %q\n%s", q.name, q.by, steps, q.sql)
			}
		})
	}
}

// TestAccessCheckerFlagsASearchByState: the access check can fail — the
// hand-back of claims as it was once written, whose search by state reads
// every pending message, does not take the primary key.
func TestAccessCheckerFlagsASearchByState(t *testing.T) {
	s := newStore(t)
	for _, c := range []struct {
		sql string
		ok  bool
	}{
		{`UPDATE outbox SET claimed_by = '' WHERE claimed_by = ?1 AND state = 'pending' AND id IN (SELECT value FROM json_each(?2))`, false},
		{qOutboxRelease, true},
	} {
		ok, steps, err := takes(t.Context(), s.reader.DB, c.sql, "SEARCH outbox USING INTEGER PRIMARY KEY")
		if err != nil {
			t.Fatal(err)
		}
		if ok != c.ok {
			t.Errorf("takes the primary key = %v, want %v (plan %q) for\n%s", ok, c.ok, steps, c.sql)
		}
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
		{`SELECT o.id FROM outbox o WHERE o.payload = ? ORDER BY o.task_id, o.seq`, true}, // a whole index read in order
		{`SELECT id FROM jobs WHERE id IN (SELECT value FROM json_each(?))`, false},
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

// TestScanCheckerFlagsAHotQueryThatLostItsIndex: a hot query whose index is
// gone — as when a query is changed to filter on what no index covers —
// is flagged.
func TestScanCheckerFlagsAHotQueryThatLostItsIndex(t *testing.T) {
	if bad, err := scans(t.Context(), newStore(t).reader.DB, qJobEvents); err != nil || len(bad) > 0 {
		t.Fatalf("JobEvents with its index: scans %q, %v; want none", bad, err)
	}
	// Another store: a connection that planned the query before was seen
	// to answer with its old plan after the index went.
	s := newStore(t)
	err := s.tx(t.Context(), func(tx *txn) error {
		_, err := tx.Tx.ExecContext(t.Context(), `DROP INDEX job_events_job`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := scans(t.Context(), s.reader.DB, qJobEvents)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) == 0 {
		t.Error("JobEvents without its index is not flagged")
	}
}

// planText returns the steps of SQLite's plan for q with args, joined.
func planText(t *testing.T, db *sql.DB, q string, args []any) string {
	t.Helper()
	steps, err := plan(t.Context(), db, q, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(steps, "; ")
}

// TestJobsOfATaskReadThroughItsIndex: a task's jobs in a state (the
// engine's look-up of a task's previous answer, at each job's start) and a
// parent's are read through the index on the task or the parent, not
// through the jobs of that state, which on a store of a year are a million
// finished ones (SQLite 3.40's choice without the hint; the last case
// tells whether the driver's SQLite still needs it).
func TestJobsOfATaskReadThroughItsIndex(t *testing.T) {
	s := newStore(t)
	for _, c := range []struct {
		name  string
		f     core.JobFilter
		index string
	}{
		{"task and state", core.JobFilter{TaskID: 1, States: []core.JobState{core.JobSucceeded}, Limit: 1}, "jobs_task"},
		{"task", core.JobFilter{TaskID: 1}, "jobs_task"},
		{"parent and state", core.JobFilter{ParentJobID: 1, States: []core.JobState{core.JobQueued}}, "jobs_parent"},
		{"states", core.JobFilter{States: []core.JobState{core.JobQueued, core.JobRunning}}, "jobs_state"},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, args := jobsQuery(c.f)
			if p := planText(t, s.reader.DB, q, args); !strings.Contains(p, "INDEX "+c.index+" ") {
				t.Errorf("Jobs(%+v) plan: %s; want a search of %s\n%s", c.f, p, c.index, q)
			}
		})
	}
	t.Run("unhinted", func(t *testing.T) {
		q, args := jobsQuery(core.JobFilter{TaskID: 1, States: []core.JobState{core.JobSucceeded}, Limit: 1})
		q = strings.Replace(q, " INDEXED BY jobs_task", "", 1)
		if p := planText(t, s.reader.DB, q, args); !strings.Contains(p, "jobs_state") {
			t.Logf("without the hint this SQLite plans %s", p)
		}
	})
}
