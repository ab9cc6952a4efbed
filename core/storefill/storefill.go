// Package storefill fills a Baton store with a year of finished work,
// written directly in SQL (not through the engine), so that benchmarks and
// load tests can measure the hot paths on a store as large as a busy
// team's. It is the one owner of that fill for each store: SQLite fills a
// SQLite file, Postgres a PostgreSQL database (its search_path), both
// already migrated by the store (core/sqlite.Open, core/postgres.Open).
//
//	err := storefill.SQLite(ctx, path, storefill.Scale(10)) // a busy year
//
// The work is what the default retention keeps at steady state, so that a
// serve's pruning finds nothing to remove: tasks, their comments and
// finished jobs spread over the last 360 days (retention keeps a year),
// and the jobs' events on the jobs of the last 80 days (it keeps 90). Every
// task, comment and job is finished and belongs to a thread named fill.N;
// nothing is left queued, pending or claimed.
package storefill

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the "sqlite" driver, as core/sqlite uses
)

// Sizes is how much finished work a fill writes.
type Sizes struct {
	// Tasks are finished tasks, each with 3 comments (two from a person,
	// one from the bot).
	Tasks int
	// Jobs are succeeded jobs, spread over the tasks in order, each with
	// one sent message in the outbox.
	Jobs int
	// Events are job events on the jobs of the last 80 days.
	Events int
}

// Scale returns k tenths of a busy year: 30,000·k tasks, 100,000·k jobs
// and 1,000,000·k job events. Scale(10) is the year of a team's Baton: 1M
// finished jobs, 300k tasks, 10M events.
func Scale(k int) Sizes {
	return Sizes{Tasks: 30_000 * k, Jobs: 100_000 * k, Events: 1_000_000 * k}
}

// String is the sizes in words, as benchmark names and reports use them.
func (s Sizes) String() string {
	return fmt.Sprintf("%d tasks, %d jobs, %d events", s.Tasks, s.Jobs, s.Events)
}

// Empty reports whether s writes nothing.
func (s Sizes) Empty() bool { return s.Tasks == 0 && s.Jobs == 0 && s.Events == 0 }

// validate rejects sizes whose rows would have nothing to belong to.
func (s Sizes) validate() error {
	switch {
	case s.Tasks < 0 || s.Jobs < 0 || s.Events < 0:
		return errors.New("fill: negative sizes")
	case s.Jobs > 0 && s.Tasks == 0:
		return errors.New("fill: jobs need tasks")
	case s.Events > 0 && s.Jobs == 0:
		return errors.New("fill: events need jobs")
	}
	return nil
}

const (
	// span is the time the tasks and jobs are spread over, ending an hour
	// before the fill.
	span = 360*24*time.Hour - time.Hour
	// eventDays is how far back the jobs with events go.
	eventDays = 80
	// chunk is the most rows one transaction inserts: each commits on its
	// own, so that SQLite's WAL stays small and a fill can be followed.
	chunk = 500_000
)

// The fill's statements, in the order they run, each inserting the rows
// @lo ≤ i < @hi of its table from a series of i (FROM {series}). Times are in
// unix milliseconds: row i of n is at @start + i·@span/n. A row refers to
// its task or job by position: the fill's tasks have the ids @taskBase+1 …
// @taskBase+tasks, its jobs @jobBase+1 …, each inserted in one statement
// per chunk with no other writer (verified after each table). The same SQL
// runs on both stores; only the series and the placeholders differ.
var steps = []struct {
	table string
	rows  func(Sizes) int
	sql   string
}{
	{"tasks", func(s Sizes) int { return s.Tasks }, `INSERT INTO tasks (platform, team, channel, thread, owner_user, title, created_at, updated_at)
		SELECT 'slack', 'T1', 'C' || (i % 50), 'fill.' || (@taskBase + i), 'slack:U' || (i % 200), 'a finished task',
			@start + i * @span / @tasks, @start + i * @span / @tasks + 60000
		FROM {series}`},
	{"comments", func(s Sizes) int { return 3 * s.Tasks }, `INSERT INTO comments (task_id, platform_msg_id, author_id, role, text, created_at)
		SELECT @taskBase + 1 + i / 3, 'fill.' || i,
			CASE i % 3 WHEN 1 THEN '' ELSE 'slack:U' || (i / 3 % 200) END,
			CASE i % 3 WHEN 1 THEN 'bot' ELSE 'user' END,
			CASE i % 3 WHEN 1 THEN 'The report is ready: three findings, one of them urgent.' ELSE 'please look at the report' END,
			@start + (i / 3) * @span / @tasks + (i % 3) * 20000
		FROM {series}`},
	{"jobs", func(s Sizes) int { return s.Jobs }, `INSERT INTO jobs (task_id, piece, instruction, state, attempt, created_at, started_at, finished_at, queued_at, result_summary, trigger_msg_id)
		SELECT @taskBase + 1 + i * @tasks / @jobs, 'chat', 'look at the report', 'succeeded', 1,
			@start + i * @span / @jobs, @start + i * @span / @jobs + 1000, @start + i * @span / @jobs + 30000, @start + i * @span / @jobs,
			'The report is ready.', 'fill.' || i
		FROM {series}`},
	{"job_events", func(s Sizes) int { return s.Events }, `INSERT INTO job_events (job_id, at, kind, movement, detail)
		SELECT @jobBase + 1 + @eventJob + i * (@jobs - @eventJob) / @events,
			@start + (@eventJob + i * (@jobs - @eventJob) / @events) * @span / @jobs + 1000 + (i % 29) * 1000,
			CASE i % 10 WHEN 0 THEN 'movement' ELSE 'tool' END, 'implement', 'Read input/report.md'
		FROM {series}`},
	{"outbox", func(s Sizes) int { return s.Jobs }, `INSERT INTO outbox (task_id, job_id, attempt, seq, kind, payload, state, platform_msg_id, created_at)
		SELECT @taskBase + 1 + i * @tasks / @jobs, @jobBase + 1 + i, 1, i + 1, 'post', '{"text":"The report is ready."}', 'sent',
			'fill.' || i, @start + i * @span / @jobs + 30000
		FROM {series}`},
}

// dialect is how one store's SQL differs from the other's.
type dialect struct {
	series      string             // the FROM of the numbers @lo ≤ i < @hi
	placeholder func(n int) string // the nth (1-based) parameter
	exec        func(q string, args []any) error
	query       func(q string, dest ...any) error
}

var param = regexp.MustCompile(`@(\w+)`)

// bind turns q's @names into d's placeholders, numbered in order of first
// use, and returns the arguments in that order.
func (d dialect) bind(q string, vals map[string]int64) (string, []any, error) {
	q = strings.ReplaceAll(q, "{series}", d.series)
	var (
		names []string
		err   error
	)
	out := param.ReplaceAllStringFunc(q, func(m string) string {
		name := m[1:]
		if _, ok := vals[name]; !ok {
			err = fmt.Errorf("fill: no value for @%s", name)
		}
		for i, n := range names {
			if n == name {
				return d.placeholder(i + 1)
			}
		}
		names = append(names, name)
		return d.placeholder(len(names))
	})
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = vals[n]
	}
	return out, args, err
}

// fill runs the steps on d.
func fill(ctx context.Context, d dialect, s Sizes, now time.Time) error {
	if err := s.validate(); err != nil {
		return err
	}
	var taskBase, jobBase int64
	if err := d.query(`SELECT COALESCE(MAX(id), 0) FROM tasks`, &taskBase); err != nil {
		return fmt.Errorf("fill: read the last task id: %w", err)
	}
	if err := d.query(`SELECT COALESCE(MAX(id), 0) FROM jobs`, &jobBase); err != nil {
		return fmt.Errorf("fill: read the last job id: %w", err)
	}
	vals := map[string]int64{
		"taskBase": taskBase, "jobBase": jobBase,
		"tasks": int64(s.Tasks), "jobs": int64(s.Jobs), "events": int64(s.Events),
		"eventJob": int64(s.Jobs - s.Jobs*eventDays/360),
		"start":    now.Add(-time.Hour - span).UnixMilli(), "span": span.Milliseconds(),
	}
	for _, st := range steps {
		n := st.rows(s)
		for lo := 0; lo < n; lo += chunk {
			vals["lo"], vals["hi"] = int64(lo), int64(min(lo+chunk, n))
			q, args, err := d.bind(st.sql, vals)
			if err == nil {
				err = d.exec(q, args)
			}
			if err != nil {
				return fmt.Errorf("fill %s (rows %d to %d of %d): %w", st.table, lo, vals["hi"], n, err)
			}
		}
		if err := checkIDs(d, st.table, taskBase, jobBase, s); err != nil {
			return err
		}
	}
	return nil
}

// checkIDs verifies that the tasks or jobs just inserted have the ids the
// next steps refer to them by (no other writer took ids in between).
func checkIDs(d dialect, table string, taskBase, jobBase int64, s Sizes) error {
	base, n := taskBase, int64(s.Tasks)
	switch table {
	case "tasks":
	case "jobs":
		base, n = jobBase, int64(s.Jobs)
	default:
		return nil
	}
	var count, last int64
	if err := d.query(`SELECT COUNT(*), COALESCE(MAX(id), 0) FROM `+table+` WHERE id > `+strconv.FormatInt(base, 10), &count, &last); err != nil {
		return fmt.Errorf("fill: count the %s: %w", table, err)
	}
	if count != n || (n > 0 && last != base+n) {
		return fmt.Errorf("fill: %d %s with ids %d to %d, want %d from %d: another writer took ids during the fill", count, table, base+1, last, n, base+1)
	}
	return nil
}

// SQLite fills the SQLite store at path, which core/sqlite has migrated,
// with s's work, each table in transactions of at most 500,000 rows, and
// truncates the WAL at the end. The store may be open in other processes
// (they wait for the write lock as for any writer) but none may write
// tasks or jobs during the fill: the fill refers to the rows it inserted
// by their ids, and fails if another writer took some.
func SQLite(ctx context.Context, path string, s Sizes) error {
	q := url.Values{}
	for _, p := range []string{"busy_timeout(30000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(NORMAL)", "cache_size(-65536)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return fmt.Errorf("fill: open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	d := dialect{
		series:      `(WITH RECURSIVE n(i) AS (SELECT @lo UNION ALL SELECT i + 1 FROM n WHERE i < @hi - 1) SELECT i FROM n)`,
		placeholder: func(n int) string { return "?" + strconv.Itoa(n) },
		exec: func(q string, args []any) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
			return tx.Commit()
		},
		query: func(q string, dest ...any) error { return db.QueryRowContext(ctx, q).Scan(dest...) },
	}
	if err := fill(ctx, d, s, time.Now()); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("fill: checkpoint %s: %w", path, err)
	}
	return nil
}

// Postgres fills the PostgreSQL store at url (its search_path the
// store's schema), which core/postgres has migrated, with s's work, each
// table in transactions of at most 500,000 rows, then vacuums and analyzes
// the tables filled, as autovacuum would have long since done on a store
// that grew to that size (and would otherwise start doing in the middle
// of a measurement), and checkpoints. As with SQLite, nobody may write
// tasks or jobs during the fill.
func Postgres(ctx context.Context, url string, s Sizes) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("fill: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// The fill's commits need not wait for the disk (the fill is checked
	// and checkpointed as a whole at the end), and its rows refer to one
	// another by construction: a superuser skips the foreign keys'
	// triggers, 11M checks of rows just written (others keep them).
	if _, err := conn.Exec(ctx, `SET synchronous_commit = off`); err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	_, _ = conn.Exec(ctx, `SET session_replication_role = replica`)
	d := dialect{
		series:      `generate_series(@lo::bigint, @hi::bigint - 1) AS n(i)`,
		placeholder: func(n int) string { return "$" + strconv.Itoa(n) },
		exec: func(q string, args []any) error {
			_, err := conn.Exec(ctx, q, args...)
			return err
		},
		query: func(q string, dest ...any) error { return conn.QueryRow(ctx, q).Scan(dest...) },
	}
	if err := fill(ctx, d, s, time.Now()); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `VACUUM (ANALYZE) tasks, comments, jobs, job_events, outbox`); err != nil {
		return fmt.Errorf("fill: vacuum: %w", err)
	}
	// A checkpoint writes the fill's gigabytes out now rather than over
	// the next minutes, beside (and slowing) the commits a measurement
	// makes; it needs a superuser or pg_checkpoint, without which the
	// server's own checkpoints do it later.
	_, _ = conn.Exec(ctx, `CHECKPOINT`)
	return nil
}
