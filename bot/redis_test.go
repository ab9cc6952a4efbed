package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/workspace"
	"github.com/baton-bot/baton/queue"
	"github.com/baton-bot/baton/queue/redistest"
)

// redisSummary is what a URL or address list sets of a redisTarget;
// go-redis fills the rest with its defaults.
type redisSummary struct {
	Kind, Master, Username, Password, Name string
	Addrs                                  []string
	DB                                     int
	TLS                                    bool
}

func summarize(t redisTarget) redisSummary {
	switch {
	case t.cluster != nil:
		o := t.cluster
		return redisSummary{Kind: "cluster", Addrs: o.Addrs, Username: o.Username, Password: o.Password, TLS: o.TLSConfig != nil, Name: t.name}
	case t.failover != nil:
		o := t.failover
		return redisSummary{Kind: "sentinel", Addrs: o.SentinelAddrs, Master: o.MasterName, Username: o.Username, Password: o.Password, DB: o.DB, TLS: o.TLSConfig != nil, Name: t.name}
	default:
		o := t.single
		return redisSummary{Kind: "single", Addrs: []string{o.Addr}, Username: o.Username, Password: o.Password, DB: o.DB, TLS: o.TLSConfig != nil, Name: t.name}
	}
}

// TestParseRedis: what each form of redis.url and redis.cluster_addrs
// becomes.
func TestParseRedis(t *testing.T) {
	tests := []struct {
		name string
		cfg  RedisConfig
		want redisSummary
	}{
		{"one redis", RedisConfig{URL: "redis://:pw@10.0.0.1:6380/3"}, redisSummary{
			Kind: "single", Addrs: []string{"10.0.0.1:6380"}, Password: "pw", DB: 3, Name: "10.0.0.1:6380",
		}},
		{"one redis, tls", RedisConfig{URL: "rediss://u:pw@redis.example:6380"}, redisSummary{
			Kind: "single", Addrs: []string{"redis.example:6380"}, Username: "u", Password: "pw", TLS: true, Name: "redis.example:6380",
		}},
		{"sentinel", RedisConfig{URL: "redis+sentinel://u:pw@s1:26379,s2:26380/mymaster/2"}, redisSummary{
			Kind: "sentinel", Addrs: []string{"s1:26379", "s2:26380"}, Master: "mymaster", Username: "u", Password: "pw", DB: 2,
			Name: "sentinel master mymaster (s1:26379, s2:26380)",
		}},
		{"sentinel tls, db 0", RedisConfig{URL: "rediss+sentinel://s1:26379/mymaster"}, redisSummary{
			Kind: "sentinel", Addrs: []string{"s1:26379"}, Master: "mymaster", TLS: true,
			Name: "sentinel master mymaster (s1:26379)",
		}},
		{"cluster", RedisConfig{ClusterAddrs: []string{"10.0.0.1:7000", "10.0.0.2:7000"}}, redisSummary{
			Kind: "cluster", Addrs: []string{"10.0.0.1:7000", "10.0.0.2:7000"}, Name: "cluster 10.0.0.1:7000, 10.0.0.2:7000",
		}},
		{"cluster with credentials", RedisConfig{ClusterAddrs: []string{"10.0.0.1:7000"}, ClusterUsername: "baton", ClusterPassword: "pw", ClusterTLS: true}, redisSummary{
			Kind: "cluster", Addrs: []string{"10.0.0.1:7000"}, Username: "baton", Password: "pw", TLS: true, Name: "cluster 10.0.0.1:7000",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRedis(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(got)); diff != "" {
				t.Errorf("parseRedis(%+v) (-want +got):\n%s", tt.cfg, diff)
			}
		})
	}
}

// TestParseRedisHidesPassword: an error about redis.url never shows its
// password.
func TestParseRedisHidesPassword(t *testing.T) {
	for _, raw := range []string{
		"redis+sentinel://:s3cret@s1:26379",
		"redis+sentinel://:s3cret@s1/mymaster",
		"http://:s3cret@redis:6379",
		"redis://:s3cret@redis:6379/x",
	} {
		_, err := parseRedis(RedisConfig{URL: raw})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != "redis.url" {
			t.Errorf("parseRedis(%q) = %v, want a ConfigError naming redis.url", raw, err)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("parseRedis(%q): %v shows the password", raw, err)
		}
	}
}

// TestRedisClusterQueue: with redis.cluster_addrs, Baton's queue runs on
// the cluster: a job enqueued through one process's queue is claimed
// through another's.
func TestRedisClusterQueue(t *testing.T) {
	ctx := t.Context()
	cluster := redistest.StartClusterAuth(t, "cluster-s3cret")
	// The client learns the other nodes from the first.
	cfg := RedisConfig{ClusterAddrs: cluster.Addrs()[:1], ClusterPassword: "cluster-s3cret"}
	opts := queue.Options{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	if q, client, _, err := newRedisQueue(RedisConfig{ClusterAddrs: cfg.ClusterAddrs}, opts); err == nil {
		err = q.Enqueue(ctx, 41)
		_ = q.Close()
		_ = client.Close()
		if err == nil {
			t.Error("a cluster that requires a password took a job from a client without one")
		}
	}
	var qs []*queue.Redis
	for range 2 {
		q, client, addr, err := newRedisQueue(cfg, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = q.Close(); _ = client.Close() })
		if _, ok := client.(*redis.ClusterClient); !ok {
			t.Fatalf("client %T, want a cluster client", client)
		}
		if want := "cluster " + cluster.Addrs()[0]; addr != want {
			t.Errorf("addr = %q, want %q", addr, want)
		}
		qs = append(qs, q)
	}
	if err := qs[0].Enqueue(ctx, 42); err != nil {
		t.Fatal(err)
	}
	l, err := qs[1].Claim(ctx, 5*time.Second)
	if err != nil || l.JobID != 42 {
		t.Fatalf("Claim = job %d, %v; want job 42", l.JobID, err)
	}
	if err := qs[1].Ack(ctx, l); err != nil {
		t.Fatal(err)
	}
}

// TestRedisSentinelQueue: with a redis+sentinel:// URL the queue finds its
// master through Sentinel and works on it.
func TestRedisSentinelQueue(t *testing.T) {
	ctx := t.Context()
	master := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, master)
	cfg := RedisConfig{URL: "redis+sentinel://" + sentinel + "/" + redistest.SentinelMaster + "/0"}
	q, client, addr, err := newRedisQueue(cfg, queue.Options{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close(); _ = client.Close() })
	if want := "sentinel master " + redistest.SentinelMaster + " (" + sentinel + ")"; addr != want {
		t.Errorf("addr = %q, want %q", addr, want)
	}
	if err := q.Enqueue(ctx, 7); err != nil {
		t.Fatal(err)
	}
	// The job is on the master itself, not somewhere else.
	direct := master.Client(t)
	if n, err := direct.LLen(ctx, "baton:{jobs}:pending").Result(); err != nil || n != 1 {
		t.Fatalf("pending on the master = %d, %v; want 1", n, err)
	}
	l, err := q.Claim(ctx, 5*time.Second)
	if err != nil || l.JobID != 7 {
		t.Fatalf("Claim = job %d, %v; want job 7", l.JobID, err)
	}
}

// TestQueueNamedAfterTheStore: two stores sharing one Redis (a store
// replaced under it, or two runs of the load test) have queues of their
// own, so a store's job 1 never meets another store's job 1; the same
// store opened again finds its queue.
func TestQueueNamedAfterTheStore(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	open := func(dataDir string) *system {
		cfg := DefaultConfig()
		cfg.DataDir, cfg.Redis.URL = dataDir, "redis://"+rs.Addr()+"/0"
		cfg.LLM.APIKey = "sk-test"
		sys, err := newSystem(ctx, cfg, slog.New(slog.DiscardHandler), systemOptions{workspaces: workspace.Adopt})
		if err != nil {
			t.Fatal(err)
		}
		return sys
	}
	first, second := t.TempDir(), t.TempDir()
	a := open(first)
	if err := a.queue.Enqueue(ctx, 1); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b := open(second)
	defer b.Close()
	if l, err := b.queue.Claim(ctx, 200*time.Millisecond); !errors.Is(err, core.ErrNoJob) {
		t.Fatalf("a new store's queue handed out %+v, %v: another store's job", l, err)
	}
	again := open(first)
	defer again.Close()
	if l, err := again.queue.Claim(ctx, 5*time.Second); err != nil || l.JobID != 1 {
		t.Fatalf("the same store reopened: Claim = %+v, %v; want its job 1", l, err)
	}
}
