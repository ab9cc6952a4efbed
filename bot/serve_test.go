package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/queue/redistest"
)

// TestServeTaskAPI runs `baton serve` and talks to it over real HTTP:
// health, readiness, a task created through the API and answered, and a
// graceful stop.
func TestServeTaskAPI(t *testing.T) {
	llmSrv := llmtest.NewServer(t)
	llmSrv.Script(llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Served."}`))
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\ntools:\n  bash:\n    sandbox: none\n")
	env := map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_BASE_URL": llmSrv.URL(), "OPENAI_API_KEY": "sk-x", "BATON_API_TOKEN": "t0ken"}
	r := runBackground(t, env, "serve", "--config", conf)
	stop, stderr, done := r.stop, r.stderr, r.done
	base := "http://" + r.logged(t, `baton serve started" http=(\S+)`)
	deadline := time.Now().Add(30 * time.Second)
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || !strings.Contains(body, "ok") {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 200 {
		t.Errorf("/readyz = %d %q", code, body)
	}
	waitAnswer(t, base, "t0ken", createTask(t, base, "t0ken", "hello"), "Served.", deadline)
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, `baton_jobs{state="succeeded"} 1`) || !strings.Contains(body, "baton_llm_request_seconds_count") || !strings.Contains(body, `baton_queue_up 1`) {
		t.Errorf("/metrics = %d:\n%s", code, body)
	}
	stop()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("serve exit %d:\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	if strings.Contains(stderr.String(), "t0ken") || strings.Contains(stderr.String(), "sk-x") {
		t.Errorf("a secret reached the log:\n%s", stderr.String())
	}
}

func TestServePortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conf := writeConfig(t, "log:\n  level: warn\nhttp:\n  addr: "+ln.Addr().String()+"\ntools:\n  bash:\n    sandbox: none\n")
	code, _, stderr := runMain(t, map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_API_KEY": "sk-test"}, "serve", "--config", conf)
	if code != 1 || !strings.Contains(stderr, "http.addr "+ln.Addr().String()) || !strings.Contains(stderr, "address already in use") {
		t.Errorf("exit %d, stderr %q: want 1 naming http.addr and the port in use", code, stderr)
	}
}

// TestServeAdminAddr: with admin.addr set, health and metrics live there
// and not on http.addr.
func TestServeAdminAddr(t *testing.T) {
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\nadmin:\n  addr: 127.0.0.1:0\ntools:\n  bash:\n    sandbox: none\n")
	r := runBackground(t, map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_API_KEY": "sk-test"}, "serve", "--config", conf)
	defer r.stop()
	stop, done := r.stop, r.done
	admin := "http://" + r.logged(t, `admin endpoints on" addr=(\S+)`)
	pub := "http://" + r.logged(t, `baton serve started" http=(\S+)`)
	status := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		if got := status(pub + path); got != http.StatusNotFound {
			t.Errorf("http.addr %s = %d, want 404", path, got)
		}
		if got := status(admin + path); got != http.StatusOK {
			t.Errorf("admin.addr %s = %d, want 200", path, got)
		}
	}
	stop()
	if code := <-done; code != 0 {
		t.Errorf("serve exit %d", code)
	}
}

// TestServeProfiles: admin.pprof serves Go's profiles on admin.addr only,
// and is refused without admin.addr.
func TestServeProfiles(t *testing.T) {
	env := map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_API_KEY": "sk-test"}
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\nadmin:\n  pprof: true\ntools:\n  bash:\n    sandbox: none\n")
	if code, _, stderr := runMain(t, env, "serve", "--config", conf); code != 2 || !strings.Contains(stderr, "admin.pprof") || !strings.Contains(stderr, "needs admin.addr") {
		t.Errorf("admin.pprof without admin.addr: exit %d, stderr %q; want 2 naming admin.pprof and admin.addr", code, stderr)
	}

	conf = writeConfig(t, "http:\n  addr: 127.0.0.1:0\nadmin:\n  addr: 127.0.0.1:0\n  pprof: true\ntools:\n  bash:\n    sandbox: none\n")
	r := runBackground(t, env, "serve", "--config", conf)
	defer r.stop()
	admin := "http://" + r.logged(t, `admin endpoints on" addr=(\S+)`)
	pub := "http://" + r.logged(t, `baton serve started" http=(\S+)`)
	get := func(url string) (int, string) { return httpGet(t, url) }
	if code, body := get(admin + "/debug/pprof/heap?debug=1"); code != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Errorf("admin.addr heap profile: %d %.80q, want 200 and a heap profile", code, body)
	}
	if code, body := get(admin + "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("admin.addr goroutine profile: %d %.80q", code, body)
	}
	if code, _ := get(pub + "/debug/pprof/heap"); code != http.StatusNotFound {
		t.Errorf("http.addr /debug/pprof/heap = %d, want 404", code)
	}
}

// TestServeSlackCredentials: a refused bot token stops baton serve with a
// clear line; an accepted one makes /readyz say ready.
func TestServeSlackCredentials(t *testing.T) {
	for _, tc := range []struct {
		name, authTest string
		wantCode       int
		wantLog        string
	}{
		{"refused", `{"ok":false,"error":"invalid_auth"}`, 1, "check SLACK_BOT_TOKEN"},
		{"accepted", `{"ok":true,"user_id":"UBATON","bot_id":"BBATON","team_id":"T1","user":"baton"}`, 0, "Slack adapter on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, tc.authTest)
			}))
			defer api.Close()
			conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\nslack:\n  enabled: true\n  mode: http\n  api_url: "+api.URL+"/\ntools:\n  bash:\n    sandbox: none\n")
			env := map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_API_KEY": "sk-test", "SLACK_BOT_TOKEN": "xoxb-secret", "SLACK_SIGNING_SECRET": "sig-secret"}
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			var stderr syncBuffer
			done := make(chan int, 1)
			go func() {
				m := NewMain()
				m.Stdout, m.Stderr, m.Env = &bytes.Buffer{}, &stderr, mapEnv(env)
				done <- m.Report(m.Run(ctx, []string{"serve", "--config", conf}))
			}()
			if tc.wantCode != 0 {
				select {
				case code := <-done:
					if code != tc.wantCode || !strings.Contains(stderr.String(), tc.wantLog) {
						t.Errorf("exit %d, want %d with %q:\n%s", code, tc.wantCode, tc.wantLog, stderr.String())
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("serve kept running with a refused token:\n%s", stderr.String())
				}
				return
			}
			var base string
			deadline := time.Now().Add(30 * time.Second)
			for {
				if m := regexp.MustCompile(`baton serve started" http=(\S+)`).FindStringSubmatch(stderr.String()); m != nil && base == "" {
					base = "http://" + m[1]
				}
				if base != "" {
					resp, err := http.Get(base + "/readyz")
					if err == nil {
						resp.Body.Close()
						if resp.StatusCode == 200 {
							break
						}
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("never ready:\n%s", stderr.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			stop()
			<-done
			for _, secret := range []string{"xoxb-secret", "sig-secret"} {
				if strings.Contains(stderr.String(), secret) {
					t.Errorf("%s reached the log", secret)
				}
			}
		})
	}
}

// TestReadyzFollowsRedis: /readyz turns false when Redis stops, and back
// when it returns; the process keeps running.
func TestReadyzFollowsRedis(t *testing.T) {
	srv := redistest.Start(t)
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\ntools:\n  bash:\n    sandbox: none\n")
	env := map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_API_KEY": "sk-test", "REDIS_URL": "redis://" + srv.Addr() + "/0"}
	r := runBackground(t, env, "serve", "--config", conf)
	defer r.stop()
	stop, done := r.stop, r.done
	base := "http://" + r.logged(t, `baton serve started" http=(\S+)`)
	ready := func(want int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := http.Get(base + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz = %d, want %d", resp.StatusCode, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ready(http.StatusOK)
	srv.Kill(t)
	ready(http.StatusServiceUnavailable)
	srv.Restart(t)
	ready(http.StatusOK)
	stop()
	if code := <-done; code != 0 {
		t.Errorf("serve exit %d", code)
	}
}

// running is a baton command running in-process until stop.
type running struct {
	stop   context.CancelFunc
	stderr *syncBuffer
	done   chan int // its exit code
}

// createTask creates a task over the task API with bearer token and
// returns its id, failing the test unless the API answers 201 with one.
func createTask(t testing.TB, base, token, text string) int64 {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"text": text})
	req, _ := http.NewRequest("POST", base+"/api/tasks", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var created struct {
		Task struct{ ID int64 } `json:"task"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&created)
	if resp.StatusCode != http.StatusCreated || created.Task.ID == 0 {
		t.Fatalf("create task = %d, task %d", resp.StatusCode, created.Task.ID)
	}
	return created.Task.ID
}

// waitAnswer waits until task taskID's view over the task API shows a
// succeeded job and answer, failing at deadline.
func waitAnswer(t testing.TB, base, token string, taskID int64, answer string, deadline time.Time) {
	t.Helper()
	for {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/tasks/%d", base, taskID), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), answer) && strings.Contains(string(b), `"succeeded"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task never got its answer: %s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServeTakesUpAJobLeftRunning: `baton serve` on the in-process queue
// starts on a store whose job an earlier process was running when it died.
// It takes that job over at once (the lease is an hour here), ahead of a
// task created after the start: with one worker, the earlier job has ended
// by the time the new task is answered.
func TestServeTakesUpAJobLeftRunning(t *testing.T) {
	llmSrv := llmtest.NewServer(t)
	llmSrv.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "Served.") })
	dataDir := t.TempDir()
	orphan := leftRunning(t, dataDir)
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\nqueue:\n  lease: 1h\nworkers:\n  concurrency: 1\ntools:\n  bash:\n    sandbox: none\n")
	r := runBackground(t, map[string]string{"BATON_DATA_DIR": dataDir, "OPENAI_BASE_URL": llmSrv.URL(), "OPENAI_API_KEY": "sk-x", "BATON_API_TOKEN": "t0ken"}, "serve", "--config", conf)
	base := "http://" + r.logged(t, `baton serve started" http=(\S+)`)
	waitAnswer(t, base, "t0ken", createTask(t, base, "t0ken", "hello"), "Served.", time.Now().Add(30*time.Second))
	r.stop()
	select {
	case code := <-r.done:
		if code != 0 {
			t.Fatalf("serve exit %d:\n%s", code, r.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	if got := storedJob(t, dataDir, orphan); got.State != core.JobSucceeded || got.Attempt != 2 {
		t.Errorf("the earlier job is %s at attempt %d, want taken over (attempt 2) and succeeded before the new task", got.State, got.Attempt)
	}
}

// runBackground starts `baton args…` with env in a goroutine.
func runBackground(t testing.TB, env map[string]string, args ...string) *running {
	t.Helper()
	return runBackgroundWith(t, NewMain(), env, args...)
}

// runBackgroundWith is runBackground on m, which a test may have changed.
func runBackgroundWith(t testing.TB, m *Main, env map[string]string, args ...string) *running {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	r := &running{stop: stop, stderr: &syncBuffer{}, done: make(chan int, 1)}
	m.Stdout, m.Stderr, m.Env = &bytes.Buffer{}, r.stderr, mapEnv(env)
	go func() { r.done <- m.Report(m.Run(ctx, args)) }()
	return r
}

// brokenListener is a listener whose Accept fails for good once its first
// connection was accepted.
type brokenListener struct {
	net.Listener
	accepted atomic.Bool
}

func (l *brokenListener) Accept() (net.Conn, error) {
	if l.accepted.Swap(true) {
		return nil, errors.New("the listener broke")
	}
	return l.Listener.Accept()
}

// TestServeAdminListenerFailure: when admin.addr's server stops with an
// error, serve says so and exits with an error rather than running on
// without health and metrics.
func TestServeAdminListenerFailure(t *testing.T) {
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\nadmin:\n  addr: 127.0.0.1:0\ntools:\n  bash:\n    sandbox: none\n")
	m := NewMain()
	m.listener = func(key, addr string) (net.Listener, error) {
		ln, err := listen(key, addr)
		if err != nil || key != "admin.addr" {
			return ln, err
		}
		return &brokenListener{Listener: ln}, nil
	}
	r := runBackgroundWith(t, m, map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_API_KEY": "sk-test"}, "serve", "--config", conf)
	defer r.stop()
	admin := "http://" + r.logged(t, `admin endpoints on" addr=(\S+)`)
	if resp, err := http.Get(admin + "/healthz"); err == nil { // the one connection it takes
		resp.Body.Close()
	}
	select {
	case code := <-r.done:
		log := r.stderr.String()
		if code != exitInternal || !strings.Contains(log, "the listener broke") || !strings.Contains(log, "admin.addr") {
			t.Errorf("exit %d, want %d with the admin listener's error in the log:\n%s", code, exitInternal, log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve kept running without its admin listener:\n%s", r.stderr.String())
	}
}

// logged waits until the command's log matches re and returns re's first
// group.
func (r *running) logged(t testing.TB, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := rx.FindStringSubmatch(r.stderr.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log never showed %s:\n%s", re, r.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSlackGroups: the Slack adapter is told the user groups the access
// lists name, each once, and no other id.
func TestSlackGroups(t *testing.T) {
	got := slackGroups(AccessConfig{
		Admins:          []string{"slack-group:S1", "slack:U1", "discord-role:7"},
		AllowedUsers:    []string{"slack-group:S2", "slack-group:S1"},
		AllowedChannels: []string{"slack:C1"},
	})
	want := []string{"slack-group:S1", "slack-group:S2"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("slackGroups = %q, want %q", got, want)
	}
}

// TestServeSlowClients: 300 clients that send their headers and then trickle
// a body never complete keep neither /healthz nor a signed Slack event from
// answering, and are cut off within 30 s.
func TestServeSlowClients(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true,"user_id":"UBATON","bot_id":"BBATON","team_id":"T1","user":"baton"}`)
	}))
	defer api.Close()
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\nslack:\n  enabled: true\n  mode: http\n  api_url: "+api.URL+"/\ntools:\n  bash:\n    sandbox: none\n")
	r := runBackground(t, map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_API_KEY": "sk-test", "SLACK_BOT_TOKEN": "xoxb-secret", "SLACK_SIGNING_SECRET": "sig-secret"}, "serve", "--config", conf)
	defer func() { r.stop(); <-r.done }()
	addr := r.logged(t, `baton serve started" http=(\S+)`)

	start := time.Now()
	slow := make([]net.Conn, 300)
	for i := range slow {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("slow client %d: %v", i, err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /slack/events HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", addr)
		slow[i] = c
	}
	stopTrickle := make(chan struct{})
	defer close(stopTrickle)
	go func() {
		for {
			select {
			case <-stopTrickle:
				return
			case <-time.After(time.Second):
			}
			for _, c := range slow {
				c.Write([]byte(" ")) //nolint:errcheck // a closed one is what the test wants
			}
		}
	}()

	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("/healthz with 300 slow clients: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz = %d", resp.StatusCode)
	}
	body := `{"type":"url_verification","token":"x","challenge":"still-answering"}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/slack/events", strings.NewReader(body))
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte("sig-secret"))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("Content-Type", "application/json")
	resp, err = client.Do(req)
	if err != nil {
		t.Fatalf("signed event with 300 slow clients: %v", err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), "still-answering") {
		t.Errorf("signed event = %d %q", resp.StatusCode, got)
	}

	for i, c := range slow {
		c.SetReadDeadline(start.Add(30 * time.Second))
		_, err := io.Copy(io.Discard, c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("slow client %d still connected after 30 s", i)
		}
	}
}
