package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/baton-bot/baton/core/worker"
	"github.com/baton-bot/baton/queue"
	"github.com/baton-bot/baton/queue/redistest"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer // guarded by mu
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWorkerRunsJobsFromRedis starts `baton worker` in-process on a Redis
// of its own, dispatches a job as a gateway would, and stops the worker as
// SIGTERM would.
func TestWorkerRunsJobsFromRedis(t *testing.T) {
	srv := redistest.Start(t)
	llmSrv := llmtest.NewServer(t)
	llmSrv.Script(llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"done by the worker"}`))
	data := t.TempDir()
	conf := writeConfig(t, "tools:\n  bash:\n    sandbox: none\n")
	env := map[string]string{"REDIS_URL": "redis://" + srv.Addr() + "/0", "BATON_DATA_DIR": data, "OPENAI_BASE_URL": llmSrv.URL(), "OPENAI_API_KEY": "sk-x"}

	st, err := sqlite.Open(context.Background(), filepath.Join(data, "baton.db"), sqlite.Options{WorkspaceRoot: filepath.Join(data, "workspaces")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, stop := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		m := NewMain()
		m.Stdout, m.Stderr, m.Env = &bytes.Buffer{}, &stderr, mapEnv(env)
		done <- m.Run(ctx, []string{"worker", "--config", conf})
	}()

	q, err := queue.NewRedis(srv.Client(t), queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	task, _, err := st.EnsureTask(context.Background(), core.Task{Thread: core.ThreadRef{Platform: core.PlatformAPI, Thread: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := worker.Dispatch{Store: st, Queue: q}.Create(context.Background(), core.Job{TaskID: task.ID, Piece: "chat", Instruction: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := st.Job(context.Background(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == core.JobSucceeded {
			if got.ResultSummary != "done by the worker" {
				t.Errorf("summary = %q", got.ResultSummary)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job still %s; worker log:\n%s", got.State, stderr.String())
		}
		select {
		case err := <-done:
			t.Fatalf("worker ended early with %v; log:\n%s", err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("worker ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop after its context ended")
	}
	if !strings.Contains(stderr.String(), "worker stopped") {
		t.Errorf("no clean stop in the log:\n%s", stderr.String())
	}
}

// TestWorkerWaitsForRedis: a Redis that does not answer at start is retried
// with a clear message, never replaced by the in-process queue.
func TestWorkerWaitsForRedis(t *testing.T) {
	var stderr syncBuffer
	m := NewMain()
	m.Stdout, m.Stderr = &bytes.Buffer{}, &stderr
	m.Env = mapEnv(map[string]string{"REDIS_URL": "redis://127.0.0.1:1/0", "BATON_DATA_DIR": t.TempDir(), "OPENAI_API_KEY": "sk-test"})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	err := m.Run(ctx, []string{"worker", "--config", writeConfig(t, "tools:\n  bash:\n    sandbox: none\n")})
	if err == nil || !strings.Contains(err.Error(), "connect to Redis at 127.0.0.1:1") {
		t.Errorf("err = %v, want a clear connection error", err)
	}
	if n := strings.Count(stderr.String(), "Redis is not answering; retrying"); n < 2 {
		t.Errorf("%d retries logged, want several:\n%s", n, stderr.String())
	}
}

// TestWorkerAdminAddr: with admin.addr set, `baton worker` serves health
// and metrics there, /readyz false while Redis does not answer and true
// once it does; a failing listener stops it.
func TestWorkerAdminAddr(t *testing.T) {
	srv := redistest.Start(t)
	conf := writeConfig(t, "admin:\n  addr: 127.0.0.1:0\ntools:\n  bash:\n    sandbox: none\n")
	get := func(url string) (int, string) { t.Helper(); return httpGet(t, url) }

	t.Run("redis down", func(t *testing.T) {
		r := runBackground(t, map[string]string{"REDIS_URL": "redis://127.0.0.1:1/0", "BATON_DATA_DIR": t.TempDir(), "OPENAI_API_KEY": "sk-test"}, "worker", "--config", conf)
		defer r.stop()
		admin := "http://" + r.logged(t, `admin endpoints on" addr=(\S+)`)
		if code, _ := get(admin + "/healthz"); code != http.StatusOK {
			t.Errorf("/healthz = %d, want 200", code)
		}
		if code, body := get(admin + "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "queue") {
			t.Errorf("/readyz = %d %q, want 503 naming the queue while Redis does not answer", code, body)
		}
	})

	t.Run("redis up", func(t *testing.T) {
		r := runBackground(t, map[string]string{"REDIS_URL": "redis://" + srv.Addr() + "/0", "BATON_DATA_DIR": t.TempDir(), "OPENAI_API_KEY": "sk-test"}, "worker", "--config", conf)
		defer r.stop()
		admin := "http://" + r.logged(t, `admin endpoints on" addr=(\S+)`)
		r.logged(t, `(worker started)`)
		if code, body := get(admin + "/readyz"); code != http.StatusOK {
			t.Errorf("/readyz = %d %q, want 200", code, body)
		}
		if code, body := get(admin + "/metrics"); code != http.StatusOK || !strings.Contains(body, "baton_queue_up") {
			t.Errorf("/metrics = %d, want 200 with baton_queue_up:\n%s", code, body)
		}
		r.stop()
		if code := <-r.done; code != 0 {
			t.Errorf("worker exit %d:\n%s", code, r.stderr.String())
		}
	})

	t.Run("listener fails", func(t *testing.T) {
		m := NewMain()
		m.listener = func(key, addr string) (net.Listener, error) {
			ln, err := listen(key, addr)
			if err != nil {
				return nil, err
			}
			return &brokenListener{Listener: ln}, nil
		}
		r := runBackgroundWith(t, m, map[string]string{"REDIS_URL": "redis://" + srv.Addr() + "/0", "BATON_DATA_DIR": t.TempDir(), "OPENAI_API_KEY": "sk-test"}, "worker", "--config", conf)
		defer r.stop()
		admin := "http://" + r.logged(t, `admin endpoints on" addr=(\S+)`)
		if resp, err := http.Get(admin + "/healthz"); err == nil { // the one connection it takes
			resp.Body.Close()
		}
		select {
		case code := <-r.done:
			if log := r.stderr.String(); code != exitInternal || !strings.Contains(log, "the listener broke") {
				t.Errorf("exit %d, want %d with the admin listener's error in the log:\n%s", code, exitInternal, log)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("the worker kept running without its admin listener:\n%s", r.stderr.String())
		}
	})
}
