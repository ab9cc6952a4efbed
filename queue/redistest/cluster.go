package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of three masters and no replicas, owned by
// one test: three redis-server processes on 127.0.0.1, each with its own
// port, cluster bus port and directory, joined by redis-cli --cluster
// create. The processes and their directories go when the test ends.
type Cluster struct {
	nodes    []*Server
	password string
}

// StartCluster starts a three-master cluster for t and waits until every
// node reports cluster_state:ok. It skips t when redis-server or redis-cli
// is missing from PATH, or fails it when BATON_REQUIRE_REDIS=1.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	return startCluster(t, "")
}

// StartClusterAuth is StartCluster with every node requiring password
// (requirepass and masterauth) of the default user.
func StartClusterAuth(t testing.TB, password string) *Cluster {
	t.Helper()
	return startCluster(t, password)
}

func startCluster(t testing.TB, password string) *Cluster {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unavailable(t, "redis-server is not on PATH (this test starts its own Redis Cluster)")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		unavailable(t, "redis-cli is not on PATH (it creates the test's Redis Cluster)")
	}
	c := &Cluster{password: password}
	for i := range 3 {
		dir := filepath.Join(t.TempDir(), "node"+strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatalf("cluster node directory: %v", err)
		}
		s := &Server{bin: bin, dir: dir, port: freePort(t), extra: []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-port", strconv.Itoa(freePort(t)),
			"--cluster-node-timeout", "5000",
		}, password: password}
		if password != "" {
			s.extra = append(s.extra, "--requirepass", password, "--masterauth", password)
		}
		t.Cleanup(s.Stop)
		s.start(t)
		c.nodes = append(c.nodes, s)
	}

	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	create := exec.CommandContext(ctx, cli, args...)
	if password != "" {
		create.Env = append(os.Environ(), "REDISCLI_AUTH="+password) // not on the command line
	}
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, s := range c.nodes {
		c.waitOK(t, s)
	}
	return c
}

// waitOK waits until s reports cluster_state:ok, which it does once every
// slot is served and the nodes have met.
func (c *Cluster) waitOK(t testing.TB, s *Server) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: c.password, MaxRetries: -1})
	defer rc.Close()
	deadline := time.Now().Add(30 * time.Second)
	var info string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		v, err := rc.ClusterInfo(ctx).Result()
		cancel()
		if err == nil && strings.Contains(v, "cluster_state:ok") {
			return
		}
		info = fmt.Sprint(v, err)
		if time.Now().After(deadline) {
			t.Fatalf("cluster node %s is not ok: %s", s.Addr(), info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Addrs returns the masters' host:port addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		out[i] = s.Addr()
	}
	return out
}

// Client returns a cluster client of c, closed when t ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), Password: c.password, PoolSize: 64})
	t.Cleanup(func() { _ = rc.Close() })
	return rc
}
