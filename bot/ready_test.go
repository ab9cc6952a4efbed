package main

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/workspace"
)

// TestReadyzStoreWritesAndFloor: /readyz turns 503 while the store cannot
// write (here: another process holds its write lock, which Ping does not
// notice) and while data_dir is below workspaces.min_free_bytes, and back
// to 200 after each.
func TestReadyzStoreWritesAndFloor(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Tools.Bash.Sandbox = "none"
	ctx := context.Background()
	sys, err := newSystem(ctx, cfg, slog.New(slog.DiscardHandler), systemOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	sys.heartbeatEvery = 20 * time.Millisecond
	var free atomic.Int64
	free.Store(cfg.Workspaces.MinFreeBytes * 10)
	sys.floor = workspace.NewFloor(workspace.FloorConfig{Dir: cfg.DataDir, MinFreeBytes: cfg.Workspaces.MinFreeBytes,
		Statfs: func(string) (int64, error) { return free.Load(), nil }})
	live, endLive := context.WithCancel(ctx)
	defer endLive()
	mux := http.NewServeMux()
	sys.opsRoutes(live, mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ready := func(want int, says string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Get(srv.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want && strings.Contains(string(b), says) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz = %d %q, want %d saying %q", resp.StatusCode, b, want, says)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	ready(http.StatusOK, "ready")

	other, err := sql.Open("sqlite", storePath(cfg)+"?_pragma=busy_timeout(100)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	ready(http.StatusServiceUnavailable, "store: cannot write")
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	ready(http.StatusOK, "ready")

	free.Store(cfg.Workspaces.MinFreeBytes - 1)
	ready(http.StatusServiceUnavailable, "data_dir: below workspaces.min_free_bytes")
	free.Store(cfg.Workspaces.MinFreeBytes)
	ready(http.StatusOK, "ready")
}
