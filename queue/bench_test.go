package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/queue"
	"github.com/baton-bot/baton/queue/redistest"
)

// commands returns how many commands the server ran so far, scripts'
// inner calls included.
func commands(tb testing.TB, c *redis.Client) int64 {
	tb.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var n int64
	for line := range strings.Lines(info) {
		_, rest, ok := strings.Cut(line, ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			tb.Fatalf("commandstats line %q: %v", line, err)
		}
		n += v
	}
	return n
}

// BenchmarkRedisDrain measures claim + ack of ready no-op jobs by
// concurrent workers, and the Redis commands each job costs (inner script
// calls included; INFO commandstats counts them).
func BenchmarkRedisDrain(b *testing.B) {
	for _, workers := range []int{10, 50} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			srv := redistest.Start(b)
			client := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: workers + 10})
			b.Cleanup(func() { _ = client.Close() })
			q, err := queue.NewRedis(client, queue.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = q.Close() })
			ctx := context.Background()

			before := commands(b, client)
			for id := int64(1); id <= int64(b.N); id++ {
				if err := q.Enqueue(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			enqueued := commands(b, client)

			b.ResetTimer()
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for {
						l, err := q.Claim(ctx, 0)
						if errors.Is(err, core.ErrNoJob) {
							return
						}
						if err != nil {
							b.Error(err)
							return
						}
						if err := q.Ack(ctx, l); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			drained := commands(b, client)
			b.ReportMetric(float64(enqueued-before-1)/float64(b.N), "enqueue-cmds/job")
			// Each worker's final, empty claim is included.
			b.ReportMetric(float64(drained-enqueued-1)/float64(b.N), "cmds/job")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
