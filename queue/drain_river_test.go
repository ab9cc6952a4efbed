package queue_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/baton-bot/baton/core/postgres/pgtest"
)

// River is the durable Go job queue a user would otherwise pick: its jobs
// live in the database, so it needs no Redis. The drain benchmark runs it
// beside Baton's store cases, on the same kinds of store.

// noopArgs is the drain's job: it carries a number only so that no two
// jobs are alike.
type noopArgs struct {
	N int64 `json:"n"`
}

func (noopArgs) Kind() string { return "noop" }

// riverQueue is River on one store, its tables migrated.
type riverQueue interface {
	// load inserts n jobs, each committed on its own as an inbound event
	// would insert it, from 8 goroutines as loadStore does.
	load(tb testing.TB, n int)
	// drain runs a client with workers no-op workers until n jobs have
	// completed (their completion committed), and returns how long it
	// took from the client's start.
	drain(tb testing.TB, n, workers int) time.Duration
	// count returns the jobs completed and the jobs in any state.
	count(tb testing.TB) (completed, total int)
}

// riverOn is River through driver, with its tables in schema ("" for
// SQLite's main database).
type riverOn[TTx any] struct {
	driver riverdriver.Driver[TTx]
	schema string
}

// openRiver migrates River's tables into an empty store of kind (sqlite:
// a file in a temporary directory, with the pragmas of Baton's SQLite
// store; postgres: a schema of its own, with the pool's default size as
// Baton's PostgreSQL store has it), closed when tb ends.
func openRiver(tb testing.TB, kind string) riverQueue {
	tb.Helper()
	switch kind {
	case "sqlite":
		return openRiverSQLite(tb)
	case "postgres":
		return openRiverPostgres(tb)
	}
	tb.Fatalf("no River store %q", kind)
	return nil
}

func openRiverSQLite(tb testing.TB) riverQueue {
	tb.Helper()
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)") // as Baton's store: a commit survives a crash of the process
	db, err := sql.Open("sqlite", "file:"+filepath.Join(tb.TempDir(), "river.db")+"?"+q.Encode())
	if err != nil {
		tb.Fatal(err)
	}
	// River's SQLite driver asks for a single connection: with more,
	// its concurrent work fails with SQLITE_BUSY.
	db.SetMaxOpenConns(1)
	tb.Cleanup(func() { _ = db.Close() })
	r := &riverOn[*sql.Tx]{driver: riversqlite.New(db)}
	r.migrate(tb)
	return r
}

func openRiverPostgres(tb testing.TB) riverQueue {
	tb.Helper()
	u := pgtest.URL(tb)
	parsed, err := url.Parse(u)
	if err != nil {
		tb.Fatal(err)
	}
	schema := parsed.Query().Get("search_path")
	pool, err := pgxpool.New(tb.Context(), u)
	if err != nil {
		tb.Fatalf("open River's pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	r := &riverOn[pgx.Tx]{driver: riverpgxv5.New(pool), schema: schema}
	r.migrate(tb)
	return r
}

func (r *riverOn[TTx]) migrate(tb testing.TB) {
	tb.Helper()
	m, err := rivermigrate.New(r.driver, &rivermigrate.Config{Schema: r.schema, Logger: riverLog()})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := m.Migrate(tb.Context(), rivermigrate.DirectionUp, nil); err != nil {
		tb.Fatalf("migrate River's tables: %v", err)
	}
}

// riverLog passes on River's warnings and errors (a dropped subscription
// event would show there) and nothing else.
func riverLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func (r *riverOn[TTx]) load(tb testing.TB, n int) {
	tb.Helper()
	ctx := tb.Context()
	client, err := river.NewClient(r.driver, &river.Config{Schema: r.schema, Logger: riverLog()})
	if err != nil {
		tb.Fatal(err)
	}
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		errs = make(chan error, 8)
	)
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if _, err := client.Insert(ctx, noopArgs{N: i}, &river.InsertOpts{MaxAttempts: 1}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatalf("insert River's jobs: %v", err)
	}
}

func (r *riverOn[TTx]) drain(tb testing.TB, n, workers int) time.Duration {
	tb.Helper()
	ws := river.NewWorkers()
	river.AddWorker(ws, river.WorkFunc(func(context.Context, *river.Job[noopArgs]) error { return nil }))
	client, err := river.NewClient(r.driver, &river.Config{
		// River's own benchmark (riverbench) fetches with these: its
		// defaults (100 ms, 1 s) wait between fetches far longer than a
		// no-op job takes.
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
		Schema:            r.schema,
		Logger:            riverLog(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	// The completer sends an event once a batch of completions has
	// committed: counting events counts durable completions.
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n + 1,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancel()
	ctx := context.Background()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		tb.Fatalf("start River: %v", err)
	}
	defer func() {
		stopCtx, stop := context.WithTimeout(ctx, time.Minute)
		defer stop()
		if err := client.Stop(stopCtx); err != nil {
			tb.Errorf("stop River: %v", err)
		}
	}()
	timeout := time.After(5 * time.Minute)
	for done := 0; done < n; {
		select {
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				tb.Fatalf("River's job %d: %s", ev.Job.ID, ev.Kind)
			}
			done++
		case <-timeout:
			tb.Fatalf("%d of %d River jobs completed within 5 minutes", done, n)
		}
	}
	return time.Since(start)
}

func (r *riverOn[TTx]) count(tb testing.TB) (completed, total int) {
	tb.Helper()
	exec := r.driver.GetExecutor()
	for _, state := range rivertype.JobStates() {
		c, err := exec.JobCountByState(tb.Context(), &riverdriver.JobCountByStateParams{Schema: r.schema, State: state})
		if err != nil {
			tb.Fatal(fmt.Errorf("count River's %s jobs: %w", state, err))
		}
		total += c
		if state == rivertype.JobStateCompleted {
			completed = c
		}
	}
	return completed, total
}
