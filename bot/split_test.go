package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/queue/redistest"
)

// TestGatewayAndTwoWorkers runs the split deployment as it is deployed:
// `baton gateway` (the task API) and two `baton worker` processes of the
// image's binary sharing Redis, the SQLite file and the workspaces. Both
// workers take jobs (two requests must be in flight at once, one each),
// and a worker killed with SIGKILL mid-job loses nothing: its lease
// expires and the other worker runs the job again.
func TestGatewayAndTwoWorkers(t *testing.T) {
	bin := buildStatic(t)
	srv := redistest.Start(t)
	var mu sync.Mutex
	inFlight := 0
	both := make(chan struct{})
	llmSrv := llmtest.NewServer(t)
	llmSrv.Handle(func(llmtest.Request) llmtest.Step {
		mu.Lock()
		inFlight++
		if inFlight == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both: // both workers hold a job
		case <-time.After(30 * time.Second):
		}
		return llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"done"}`)
	})
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\nworkers:\n  concurrency: 1\n  shutdown_grace: 1s\nqueue:\n  lease: 3s\n  heartbeat: 1s\ntools:\n  bash:\n    sandbox: none\n")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "REDIS_URL=redis://" + srv.Addr() + "/0",
		"BATON_DATA_DIR=" + t.TempDir(), "OPENAI_BASE_URL=" + llmSrv.URL(), "OPENAI_API_KEY=sk-x", "BATON_API_TOKEN=tok"}
	start := func(cmd string) (*exec.Cmd, *syncBuffer) {
		var stderr syncBuffer
		c := exec.Command(bin, cmd, "--config", conf)
		c.Env, c.Stdout, c.Stderr = env, &stderr, &stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = c.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = c.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				_ = c.Process.Kill()
				<-exited
			}
			if t.Failed() {
				t.Logf("baton %s log:\n%s", cmd, stderr.String())
			}
		})
		return c, &stderr
	}
	_, gwLog := start("gateway")
	workerA, _ := start("worker")
	start("worker")

	var base string
	deadline := time.Now().Add(30 * time.Second)
	for base == "" {
		if m := regexp.MustCompile(`baton gateway started" http=(\S+)`).FindStringSubmatch(gwLog.String()); m != nil {
			base = "http://" + m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not start:\n%s", gwLog.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	call := func(method, path, body string) string {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	var ids []string
	for i := range 4 {
		out := call("POST", "/api/tasks", fmt.Sprintf(`{"text":"job %d"}`, i))
		m := regexp.MustCompile(`"id":(\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("create: %s", out)
		}
		ids = append(ids, m[1])
	}
	select {
	case <-both:
	case <-time.After(30 * time.Second):
		t.Fatal("never two jobs in flight at once: one worker took no job")
	}
	// One worker dies mid-job, without a word to anyone.
	if err := workerA.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(60 * time.Second)
	for _, id := range ids {
		for !strings.Contains(call("GET", "/api/tasks/"+id, ""), `"succeeded"`) {
			if time.Now().After(deadline) {
				t.Fatalf("task %s never succeeded: %s", id, call("GET", "/api/tasks/"+id, ""))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
