package queue_test

import (
	"log/slog"
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
