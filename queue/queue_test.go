package queue_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"log/slog"
	"strconv"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/queue"
	"github.com/baton-bot/baton/queue/queuetest"
	"github.com/baton-bot/baton/queue/redistest"
)

func TestMemoryConformance(t *testing.T) {
	queuetest.Run(t, func(t *testing.T, opts queue.Options) core.Queue {
		return newMemory(t, opts)
	})
}

func TestRedisConformance(t *testing.T) {
	queuetest.Run(t, func(t *testing.T, opts queue.Options) core.Queue {
		return newRedis(t, opts)
	})
}

func newMemory(t testing.TB, opts queue.Options) *queue.Memory {
	t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	q := queue.NewMemory(opts)
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func newRedis(t testing.TB, opts queue.Options) *queue.Redis {
	t.Helper()
	client, prefix := redistest.Client(t)
	opts.Prefix = prefix
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	q, err := queue.NewRedis(client, opts)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// TestRedisClusterConformance runs the suite on a three-master Redis
// Cluster: every script's keys must hash to one slot, or Redis refuses it
// (CROSSSLOT), and the aborts channel must reach subscribers on any node.
func TestRedisClusterConformance(t *testing.T) {
	cluster := redistest.StartCluster(t)
	client := cluster.Client(t)
	n := 0
	queuetest.Run(t, func(t *testing.T, opts queue.Options) core.Queue {
		n++
		// A name of its own puts each queue on a slot, and so a node, of
		// its own.
		opts.Prefix, opts.Name = "batontest", "q"+strconv.Itoa(n)
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
		q, err := queue.NewRedis(client, opts)
		if err != nil {
			t.Fatalf("NewRedis: %v", err)
		}
		t.Cleanup(func() { _ = q.Close() })
		return q
	})
}

// TestRedisClusterOneSlot: every key a queue leaves behind, job hashes
// included (scripts build those from a prefix), hashes to the slot of the
// queue's name, so that a cluster keeps the whole queue on one node.
func TestRedisClusterOneSlot(t *testing.T) {
	ctx := t.Context()
	client := redistest.StartCluster(t).Client(t)
	names := []string{"alpha", "beta", "gamma"}
	for _, name := range names {
		q, err := queue.NewRedis(client, queue.Options{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = q.Close() })
		for id := int64(1); id <= 4; id++ {
			if err := q.Enqueue(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		l, err := q.Claim(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Park(ctx, l, 1); err != nil {
			t.Fatal(err)
		}
		l, err = q.Claim(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Nack(ctx, l, time.Hour); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Claim(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := q.Abort(ctx, 4); err != nil {
			t.Fatal(err)
		}
	}

	var (
		mu   sync.Mutex
		keys = map[string][]string{} // guarded by mu; by queue name
	)
	err := client.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, "baton:*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			name, _, _ := strings.Cut(strings.TrimPrefix(k, "baton:{"), "}")
			mu.Lock()
			keys[name] = append(keys[name], k)
			mu.Unlock()
		}
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		want, err := client.ClusterKeySlot(ctx, name).Result()
		if err != nil {
			t.Fatal(err)
		}
		// pending, active, retry, parked, four job hashes at least.
		if len(keys[name]) < 8 {
			t.Errorf("queue %s: keys %v, want pending, active, retry, parked and four job hashes", name, keys[name])
		}
		for _, k := range keys[name] {
			slot, err := client.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if slot != want {
				t.Errorf("key %s is in slot %d, want %d (the slot of {%s})", k, slot, want, name)
			}
		}
	}
	if len(keys) != len(names) {
		t.Errorf("keys of queues %v, want only %v", slices.Collect(maps.Keys(keys)), names)
	}
}
