package queue_test

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/postgres"
	"github.com/baton-bot/baton/core/postgres/pgtest"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/baton-bot/baton/core/storefill"
	"github.com/baton-bot/baton/core/worker"
	"github.com/baton-bot/baton/queue"
	"github.com/baton-bot/baton/queue/redistest"
)

// BenchmarkDrain drains b.N pre-loaded no-op jobs through Baton's production
// worker path (worker.Pool: claim with a lease, heartbeats running, fenced
// ack) and through asynq's Server at the same concurrency, on the same Redis
// server in the same run. It reports jobs/s and the Redis commands each job
// cost (from INFO commandstats, background work included).
//
// The store=sqlite and store=postgres cases drain jobs of a store through
// the same pool with worker.Executor, whose engine finishes each job at
// once: each job costs the queue's claim and ack and the store's two
// fenced transactions (StartJob, FinishJob). Beside each, River drains as
// many no-op jobs of the same kind of store (a SQLite file of its own, a
// PostgreSQL schema of its own) at the same concurrency; its case reports
// baton/river, the ratio of the two jobs/s. Both report ins/s, the rate at
// which their jobs were stored (one commit each, 8 writers), which is not
// timed. The PostgreSQL cases skip without a server
// (BATON_TEST_POSTGRES_URL), or fail with BATON_REQUIRE_POSTGRES=1. With
// -drain.fill Baton's store cases run on stores filled first with that
// many tenths of a busy year (storefill), one of each kind for both worker
// counts:
//
//	go test ./queue/ -run '^$' -bench Drain -benchtime 20000x
//	go test ./queue/ -run '^$' -bench 'Drain/impl=baton/store' -benchtime 20000x -drain.fill 10
func BenchmarkDrain(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	for _, workers := range []int{10, 50} {
		b.Run(fmt.Sprintf("impl=baton/workers=%d", workers), func(b *testing.B) {
			drainBaton(b, rdb, workers)
		})
		b.Run(fmt.Sprintf("impl=asynq/workers=%d", workers), func(b *testing.B) {
			drainAsynq(b, srv.Addr(), rdb, workers)
		})
	}
	filled := map[string]core.Store{} // by kind, with -drain.fill: one store for both worker counts
	parent := b                       // owns the filled stores: each case's cleanups run after each of its runs
	for _, workers := range []int{10, 50} {
		for _, store := range []string{"sqlite", "postgres"} {
			var baton float64 // jobs/s of the last run of Baton's case
			b.Run(fmt.Sprintf("impl=baton/store=%s/workers=%d", store, workers), func(b *testing.B) {
				st := filled[store]
				switch {
				case *drainFill == 0:
					st = openStore(b, store)
				case st == nil:
					st = openFilledStore(b, parent, store, storefill.Scale(*drainFill))
					filled[store] = st
				}
				flush(b, rdb)
				loadStart := time.Now()
				loadStore(b, st, rdb, b.N)
				loaded := time.Since(loadStart)
				resetStats(b, rdb)
				b.ResetTimer()
				elapsed := drainStore(b, st, rdb, b.N, workers)
				b.StopTimer()
				cmds := commandCalls(b, rdb)
				baton = float64(b.N) / elapsed.Seconds()
				b.ReportMetric(baton, "jobs/s")
				b.ReportMetric(float64(b.N)/loaded.Seconds(), "ins/s")
				b.ReportMetric(float64(cmds)/float64(b.N), "cmds/job")
			})
			b.Run(fmt.Sprintf("impl=river/store=%s/workers=%d", store, workers), func(b *testing.B) {
				r := openRiver(b, store)
				loadStart := time.Now()
				r.load(b, b.N)
				loaded := time.Since(loadStart)
				b.ResetTimer()
				elapsed := r.drain(b, b.N, workers)
				b.StopTimer()
				river := float64(b.N) / elapsed.Seconds()
				b.ReportMetric(river, "jobs/s")
				b.ReportMetric(float64(b.N)/loaded.Seconds(), "ins/s")
				if baton > 0 {
					b.ReportMetric(baton/river, "baton/river")
				}
			})
		}
	}
}

// TestDrainStore drains a few jobs of each store as BenchmarkDrain does,
// through Baton and through River, so that the benchmark's store cases
// keep working: every job ends succeeded (River: completed) in the store,
// and Baton's queue holds nothing.
func TestDrainStore(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			st := openStore(t, store)
			flush(t, rdb)
			loadStore(t, st, rdb, 40)
			drainStore(t, st, rdb, 40, 8)
			n, err := st.CountJobs(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			for _, c := range n {
				total += c
			}
			if n[core.JobSucceeded] != 40 || total != 40 {
				t.Errorf("jobs by state after the drain: %v, want 40 succeeded", n)
			}
		})
		t.Run("river/"+store, func(t *testing.T) {
			r := openRiver(t, store)
			r.load(t, 40)
			r.drain(t, 40, 8)
			if completed, total := r.count(t); completed != 40 || total != 40 {
				t.Errorf("River's jobs after the drain: %d completed of %d, want 40 of 40", completed, total)
			}
		})
	}
}

// drainFill fills the stores of BenchmarkDrain's store cases first.
var drainFill = flag.Int("drain.fill", 0, "fill the store cases' stores with this many tenths of a busy year (storefill.Scale; 10: 1M jobs, 300k tasks, 10M events) before draining; one filled store of each kind serves both worker counts")

// openStore opens an empty store of kind (sqlite or postgres), closed
// when tb ends.
func openStore(tb testing.TB, kind string) core.Store {
	tb.Helper()
	return openFilledStore(tb, tb, kind, storefill.Sizes{})
}

// openFilledStore opens a store of kind filled with sizes (storefill),
// failing tb when it cannot; the store and its file or schema belong to
// owner (tb or a test above it), which closes and removes them when it
// ends.
func openFilledStore(tb, owner testing.TB, kind string, sizes storefill.Sizes) core.Store {
	tb.Helper()
	var (
		st   core.Store
		fill func() error
		err  error
	)
	ctx := context.WithoutCancel(tb.Context()) // the store outlives tb when owner is a parent
	switch kind {
	case "sqlite":
		path := filepath.Join(owner.TempDir(), "baton.db")
		st, err = sqlite.Open(ctx, path, sqlite.Options{WorkspaceRoot: owner.TempDir()})
		fill = func() error { return storefill.SQLite(ctx, path, sizes) }
	case "postgres":
		schema, serr := pgtest.NewSchema(ctx, pgtest.Server(tb), "bench")
		if serr != nil {
			tb.Fatalf("a schema for the %s store: %v", kind, serr)
		}
		owner.Cleanup(func() { _ = schema.Drop(context.Background()) })
		st, err = postgres.Open(ctx, schema.URL, postgres.Options{WorkspaceRoot: owner.TempDir()})
		fill = func() error { return storefill.Postgres(ctx, schema.URL, sizes) }
	}
	if err != nil {
		tb.Fatalf("open %s store: %v", kind, err)
	}
	owner.Cleanup(func() { _ = st.Close() })
	if !sizes.Empty() {
		start := time.Now()
		if err := fill(); err != nil {
			tb.Fatalf("fill the %s store: %v", kind, err)
		}
		tb.Logf("filled the %s store with %s in %s", kind, sizes, time.Since(start).Round(time.Second))
	}
	return st
}

// loadStore stores n jobs, each of a task of its own as an inbound
// message makes them, and enqueues them.
func loadStore(tb testing.TB, st core.Store, rdb *redis.Client, n int) {
	tb.Helper()
	ctx := tb.Context()
	q := newQueue(tb, rdb)
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		errs = make(chan error, 8)
	)
	for range 8 { // the stores commit concurrent writes together
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				ts := fmt.Sprintf("1700000000.%06d", i)
				in, err := st.Ingest(ctx, core.Inbound{
					Keys: []string{"msg:C1:" + ts}, At: time.Now(),
					Task:    core.Task{Thread: core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: ts}, OwnerUser: "slack:U1", Title: "drain"},
					Comment: core.Comment{PlatformMsgID: ts, AuthorID: "slack:U1", Role: core.RoleUser, Text: "drain"},
					Job:     &core.Job{Piece: "chat", Instruction: "drain", TriggerMsgID: ts},
				})
				if err == nil {
					err = q.Enqueue(ctx, in.Job.ID)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatalf("load the store: %v", err)
	}
}

// drainStore runs a pool of workers with worker.Executor on st until the n
// jobs loaded have succeeded, and returns how long it took.
func drainStore(tb testing.TB, st core.Store, rdb *redis.Client, n, workers int) time.Duration {
	tb.Helper()
	ctx := context.Background()
	q := newQueue(tb, rdb)
	done := worker.EngineFunc(func(context.Context, *worker.Run) (core.Finish, error) {
		return core.Finish{To: core.JobSucceeded, ResultSummary: "done"}, nil
	})
	x := worker.NewExecutor(st, q, done, worker.ExecutorConfig{})
	var handled atomic.Int64
	finished := make(chan struct{})
	var once sync.Once
	h := worker.HandlerFunc(func(ctx context.Context, l core.Lease) worker.Result {
		r := x.Handle(ctx, l)
		if handled.Add(1) == int64(n) {
			once.Do(func() { close(finished) })
		}
		return r
	})
	pool := worker.NewPool(q, h, worker.PoolConfig{Concurrency: workers, ClaimWait: 100 * time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	start := time.Now()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = pool.Run(runCtx)
	}()
	select {
	case <-finished:
	case <-time.After(5 * time.Minute):
		tb.Fatalf("%d of %d jobs handled within 5 minutes", handled.Load(), n)
	}
	elapsed := time.Since(start)
	waitSettled(tb, q)
	stop()
	<-stopped // a pool still claiming would take the next run's jobs
	return elapsed
}

// newQueue is the Redis queue of the drain benchmarks.
func newQueue(tb testing.TB, rdb *redis.Client) *queue.Redis {
	tb.Helper()
	q, err := queue.NewRedis(rdb, queue.Options{Prefix: "bench"})
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// waitSettled waits until the queue holds nothing active or pending: acks
// are settled after the handler returns.
func waitSettled(tb testing.TB, q *queue.Redis) {
	tb.Helper()
	for {
		st, err := q.Stats(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		if st.Active == 0 && st.Pending == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func drainBaton(b *testing.B, rdb *redis.Client, workers int) {
	ctx := context.Background()
	flush(b, rdb)
	q := newQueue(b, rdb)
	for i := range b.N {
		if err := q.Enqueue(ctx, int64(i+1)); err != nil {
			b.Fatal(err)
		}
	}
	var done atomic.Int64
	finished := make(chan struct{})
	var once sync.Once
	noop := worker.HandlerFunc(func(ctx context.Context, l core.Lease) worker.Result {
		if done.Add(1) == int64(b.N) {
			once.Do(func() { close(finished) })
		}
		return worker.Result{Action: worker.Ack}
	})
	pool := worker.NewPool(q, noop, worker.PoolConfig{Concurrency: workers, ClaimWait: 100 * time.Millisecond})
	resetStats(b, rdb)
	runCtx, stop := context.WithCancel(ctx)
	b.ResetTimer()
	start := time.Now()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = pool.Run(runCtx)
	}()
	<-finished
	elapsed := time.Since(start)
	b.StopTimer()
	waitSettled(b, q) // before counting commands
	cmds := commandCalls(b, rdb)
	stop()
	<-stopped // a pool still claiming would take the next run's jobs
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(cmds)/float64(b.N), "cmds/job")
}

func drainAsynq(b *testing.B, addr string, rdb *redis.Client, workers int) {
	flush(b, rdb)
	opt := asynq.RedisClientOpt{Addr: addr}
	client := asynq.NewClient(opt)
	defer client.Close()
	for range b.N {
		if _, err := client.Enqueue(asynq.NewTask("noop", nil), asynq.MaxRetry(0)); err != nil {
			b.Fatal(err)
		}
	}
	var done atomic.Int64
	finished := make(chan struct{})
	var once sync.Once
	mux := asynq.NewServeMux()
	mux.HandleFunc("noop", func(context.Context, *asynq.Task) error {
		if done.Add(1) == int64(b.N) {
			once.Do(func() { close(finished) })
		}
		return nil
	})
	server := asynq.NewServer(opt, asynq.Config{Concurrency: workers, LogLevel: asynq.FatalLevel})
	resetStats(b, rdb)
	b.ResetTimer()
	start := time.Now()
	if err := server.Start(mux); err != nil {
		b.Fatal(err)
	}
	<-finished
	elapsed := time.Since(start)
	b.StopTimer()
	server.Shutdown()
	cmds := commandCalls(b, rdb)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(cmds)/float64(b.N), "cmds/job")
}

func flush(b testing.TB, rdb *redis.Client) {
	b.Helper()
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
}

func resetStats(b *testing.B, rdb *redis.Client) {
	b.Helper()
	if err := rdb.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
}

// commandCalls sums the calls of every command since the last reset, less
// the INFO and CONFIG calls of the benchmark itself.
func commandCalls(b *testing.B, rdb *redis.Client) int64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		// cmdstat_get:calls=12,usec=...
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		if name == "cmdstat_info" || name == "cmdstat_config|resetstat" || name == "cmdstat_config" {
			continue
		}
		for _, field := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
		}
	}
	return total
}
