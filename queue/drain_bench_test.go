package queue_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/baton-bot/baton/core"
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
//	go test ./queue/ -run '^$' -bench Drain -benchtime 20000x
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
}

func drainBaton(b *testing.B, rdb *redis.Client, workers int) {
	ctx := context.Background()
	flush(b, rdb)
	q, err := queue.NewRedis(rdb, queue.Options{Prefix: "bench"})
	if err != nil {
		b.Fatal(err)
	}
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
	// Acks are settled after the handler returns: wait until the queue holds
	// nothing active before counting commands.
	for {
		st, err := q.Stats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if st.Active == 0 && st.Pending == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
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

func flush(b *testing.B, rdb *redis.Client) {
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
