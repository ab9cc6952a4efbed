package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name StartSentinel's sentinel watches.
const SentinelMaster = "batonmaster"

// StartSentinel starts a redis-server in sentinel mode for t, watching
// master under the name SentinelMaster (quorum 1), and returns its
// host:port once it knows the master. It stops when t ends.
func StartSentinel(t testing.TB, master *Server) string {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	text := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\n", SentinelMaster, master.port)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatalf("write sentinel.conf: %v", err)
	}
	s := &Server{bin: master.bin, dir: dir, port: freePort(t), conf: conf, extra: []string{"--sentinel"}}
	t.Cleanup(s.Stop)
	s.start(t)

	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer sc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		addr, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
		cancel()
		if err == nil && len(addr) == 2 && addr[1] == strconv.Itoa(master.port) {
			return s.Addr()
		}
		if time.Now().After(deadline) {
			t.Fatalf("sentinel on %s does not know master %s: %v %v", s.Addr(), SentinelMaster, addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
