// Package redistest gives tests a real Redis: the one REDIS_URL names, or a
// redis-server started from PATH for the test. When neither is available
// tests are skipped with a message, or fail when BATON_REQUIRE_REDIS=1.
//
// Tests that restart, flush or kill Redis must use Start, never a shared
// Redis; other tests use Client, which gives each test its own key prefix.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process owned by one test, listening on
// 127.0.0.1 on a port of its own, keeping nothing on disk. Its methods are
// safe for concurrent use.
type Server struct {
	bin  string
	dir  string
	port int
	// conf is a config file to start from (a sentinel's, which Sentinel
	// rewrites); empty for none.
	conf string
	// extra are more redis-server arguments (a cluster node's, a sentinel's).
	extra []string
	// password is the server's requirepass; empty for none.
	password string

	mu  sync.Mutex
	cmd *exec.Cmd // guarded by mu; nil when not running
}

// unavailable skips t, or fails it when BATON_REQUIRE_REDIS=1.
func unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("BATON_REQUIRE_REDIS") == "1" {
		t.Fatalf("redis required (BATON_REQUIRE_REDIS=1) but %s", why)
	}
	t.Skipf("skipping: %s", why)
}

// Start starts a redis-server from PATH for t and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unavailable(t, "redis-server is not on PATH (this test starts its own Redis)")
	}
	s := &Server{bin: bin, dir: t.TempDir(), port: freePort(t)}
	t.Cleanup(s.Stop)
	s.start(t)
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) start(t testing.TB) {
	t.Helper()
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--logfile", "redis.log",
	}
	if s.conf != "" {
		args = append([]string{s.conf}, args...)
	}
	cmd := exec.Command(s.bin, append(args, s.extra...)...)
	cmd.Dir = s.dir
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()

	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: s.password, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(s.dir + "/redis.log")
			t.Fatalf("redis-server on %s did not answer: %v\n%s", s.Addr(), err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Addr returns the server's host:port.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Client returns a client of the server, closed when t ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 64})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Flush deletes every key of the server.
func (s *Server) Flush(t testing.TB) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		t.Fatalf("flush redis: %v", err)
	}
}

// Restart kills the server and starts it again on the same port, empty.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill(t)
	s.start(t)
}

// Kill stops the server at once with SIGKILL, as a crash would.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("kill redis-server: %v", err)
	}
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Stop shuts the server down; it does nothing when it is not running.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Client returns a client for t and a key prefix unique to t. It connects
// to REDIS_URL when set, else to a Server started for t. When the prefix
// is on a shared Redis, its keys are deleted when t ends.
func Client(t testing.TB) (*redis.Client, string) {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	prefix := fmt.Sprintf("batontest:%s:%s", name, hex.EncodeToString(b[:]))

	url := os.Getenv("REDIS_URL")
	if url == "" {
		if _, err := exec.LookPath("redis-server"); err != nil {
			unavailable(t, "REDIS_URL is not set and redis-server is not on PATH")
		}
		return Start(t).Client(t), prefix
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("REDIS_URL: %v", err)
	}
	if opts.PoolSize < 64 {
		opts.PoolSize = 64
	}
	c := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		t.Fatalf("REDIS_URL %s does not answer: %v", opts.Addr, err)
	}
	t.Cleanup(func() {
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			_ = c.Del(ctx, iter.Val()).Err()
		}
	})
	return c, prefix
}
