package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/baton-bot/baton/queue/redistest"
)

// TestServeOpensHTTPBeforeRedis: `baton serve` started while Redis is down
// answers HTTP at once — /healthz 200, /readyz 503 naming Redis — and takes
// a task over the task API, stored as a queued job; once Redis answers,
// /readyz turns 200, the job is dispatched at once and runs to its answer.
func TestServeOpensHTTPBeforeRedis(t *testing.T) {
	srv := redistest.Start(t)
	srv.Kill(t) // down before serve starts; the port stays Redis's
	llmSrv := llmtest.NewServer(t)
	llmSrv.Script(llmtest.Transition("COMPLETE", "Served once Redis answered."))
	data := t.TempDir()
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\ntools:\n  bash:\n    sandbox: none\n")
	env := map[string]string{
		"BATON_DATA_DIR": data, "REDIS_URL": "redis://" + srv.Addr() + "/0",
		"OPENAI_BASE_URL": llmSrv.URL(), "OPENAI_API_KEY": "sk-x", "BATON_API_TOKEN": "t0ken",
	}
	r := runBackground(t, env, "serve", "--config", conf)
	defer r.stop()
	base := "http://" + r.logged(t, `baton serve started" http=(\S+)`)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Redis is still down: nothing below waits for it.
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with Redis down = %d %q, want 200", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "Redis at "+srv.Addr()) {
		t.Errorf("/readyz with Redis down = %d %q, want 503 naming Redis at %s", code, body, srv.Addr())
	}
	taskID := createTask(t, base, "t0ken", "hello")
	st, err := sqlite.Open(t.Context(), filepath.Join(data, "baton.db"), sqlite.Options{WorkspaceRoot: filepath.Join(data, "workspaces")})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := st.Jobs(t.Context(), core.JobFilter{TaskID: taskID})
	st.Close()
	if err != nil || len(jobs) != 1 || jobs[0].State != core.JobQueued {
		t.Fatalf("jobs of the task while Redis is down: %+v (%v), want one queued in the store", jobs, err)
	}
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d before Redis started, want 503", code)
	}

	srv.Restart(t) // on the same port
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := get("/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %q after Redis started:\n%s", code, body, r.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Dispatched when Redis answered, not left to a reconciler's pass
	// (every 30 s, for jobs older than 10 s).
	if n := r.logged(t, `dispatched the jobs stored while Redis was down" jobs=(\d+)`); n != "1" {
		t.Errorf("%s jobs dispatched when Redis answered, want the task's one", n)
	}
	waitAnswer(t, base, "t0ken", taskID, "Served once Redis answered.", time.Now().Add(30*time.Second))
	r.stop()
	select {
	case code := <-r.done:
		if code != 0 {
			t.Errorf("serve exit %d:\n%s", code, r.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// TestGatewayAndWorkerStartBeforeRedis: the split deployment started while
// Redis is down: the gateway answers HTTP and takes a task, the worker
// waits; once Redis answers the gateway dispatches the stored job and the
// worker runs it.
func TestGatewayAndWorkerStartBeforeRedis(t *testing.T) {
	srv := redistest.Start(t)
	srv.Kill(t)
	llmSrv := llmtest.NewServer(t)
	llmSrv.Script(llmtest.Transition("COMPLETE", "Run by the worker."))
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\ntools:\n  bash:\n    sandbox: none\n")
	env := map[string]string{
		"BATON_DATA_DIR": t.TempDir(), "REDIS_URL": "redis://" + srv.Addr() + "/0",
		"OPENAI_BASE_URL": llmSrv.URL(), "OPENAI_API_KEY": "sk-x", "BATON_API_TOKEN": "t0ken",
	}
	gw := runBackground(t, env, "gateway", "--config", conf)
	defer gw.stop()
	wk := runBackground(t, env, "worker", "--config", conf)
	defer wk.stop()
	base := "http://" + gw.logged(t, `baton gateway started" http=(\S+)`)
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz with Redis down = %d, want 503", resp.StatusCode)
	}
	taskID := createTask(t, base, "t0ken", "hello")
	srv.Restart(t)
	if n := gw.logged(t, `dispatched the jobs stored while Redis was down" jobs=(\d+)`); n != "1" {
		t.Errorf("%s jobs dispatched when Redis answered, want the task's one", n)
	}
	waitAnswer(t, base, "t0ken", taskID, "Run by the worker.", time.Now().Add(30*time.Second))
	for name, r := range map[string]*running{"gateway": gw, "worker": wk} {
		r.stop()
		select {
		case code := <-r.done:
			if code != 0 {
				t.Errorf("%s exit %d:\n%s", name, code, r.stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop", name)
		}
	}
}
