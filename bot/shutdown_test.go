package main

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/baton-bot/baton/core/llmtest"
)

// scrape is one request of a scraper and what came of it.
type scrape struct {
	path         string
	afterStop    bool // began after the stop had been requested
	endedStopped bool // ended after the stop was requested
	status       int
	body         string
	err          error
}

// TestScrapeDuringShutdown scrapes /metrics, /healthz and /readyz over
// real HTTP, from several clients with and without keep-alive, while
// `baton serve` shuts down with a job running (held by the LLM past
// workers.shutdown_grace) and after it has stopped. Every answer is a valid
// one or a refused (or, for a connection the closing listener never
// accepted, reset) connection; nothing hangs; /readyz says 503 from the
// moment shutdown begins; the process exits 0 and logs no panic. -race
// checks the handlers against the shutdown.
func TestScrapeDuringShutdown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		admin bool
	}{
		{"health on http.addr", false},
		{"health on admin.addr", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			llmSrv := llmtest.NewServer(t)
			// Answered only when the job gives up: at the end of the grace.
			llmSrv.Script(llmtest.Transition("COMPLETE", "too late").After(time.Minute))
			conf := "http:\n  addr: 127.0.0.1:0\nworkers:\n  shutdown_grace: 1500ms\ntools:\n  bash:\n    sandbox: none\n"
			if tc.admin {
				conf += "admin:\n  addr: 127.0.0.1:0\n"
			}
			env := map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_BASE_URL": llmSrv.URL(), "OPENAI_API_KEY": "sk-x", "BATON_API_TOKEN": "t0ken"}
			r := runBackground(t, env, "serve", "--config", writeConfig(t, conf))
			defer r.stop()
			base := "http://" + r.logged(t, `baton serve started" http=(\S+)`)
			ops := base
			if tc.admin {
				ops = "http://" + r.logged(t, `admin endpoints on" addr=(\S+)`)
			}

			createTask(t, base, "t0ken", "hello")
			waitMetric(t, ops, `baton_jobs{state="running"} 1`)

			var stopping, stopped atomic.Bool
			exited := make(chan struct{})
			var (
				mu      sync.Mutex
				scrapes []scrape // guarded by mu
				wg      sync.WaitGroup
			)
			for i := range 4 {
				client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: i%2 == 0}}
				wg.Go(func() {
					defer client.CloseIdleConnections()
					for n := 0; ; n++ {
						path := []string{"/metrics", "/healthz", "/readyz"}[(n+i)%3]
						s := scrape{path: path, afterStop: stopped.Load()}
						resp, err := client.Get(ops + path)
						if err == nil {
							b, rerr := io.ReadAll(resp.Body)
							resp.Body.Close()
							s.status, s.body, s.err = resp.StatusCode, string(b), rerr
						} else {
							s.err = err
						}
						s.endedStopped = stopping.Load()
						mu.Lock()
						scrapes = append(scrapes, s)
						mu.Unlock()
						select {
						case <-exited:
							return // this scrape began after the exit
						default:
						}
						time.Sleep(2 * time.Millisecond)
					}
				})
			}
			time.Sleep(200 * time.Millisecond) // scrapes of a running server
			stopping.Store(true)
			r.stop()
			stopped.Store(true)
			select {
			case code := <-r.done:
				if code != 0 {
					t.Errorf("serve exit %d:\n%s", code, r.stderr.String())
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("serve did not stop while being scraped:\n%s", r.stderr.String())
			}
			close(exited)
			wg.Wait()

			var before, after, notReady int
			for _, s := range scrapes {
				if s.afterStop {
					after++
				} else if !s.endedStopped {
					before++
				}
				if s.err != nil {
					if !s.endedStopped || !connectionEnded(s.err) {
						t.Errorf("GET %s (began after the stop: %v): %v", s.path, s.afterStop, s.err)
					}
					continue
				}
				switch s.path {
				case "/healthz":
					if s.status != http.StatusOK || strings.TrimSpace(s.body) != "ok" {
						t.Errorf("/healthz = %d %q", s.status, s.body)
					}
				case "/readyz":
					switch {
					case s.status == http.StatusServiceUnavailable && s.endedStopped:
						notReady++
					case s.status == http.StatusOK && !s.afterStop:
					default:
						t.Errorf("/readyz = %d %q (began after the stop: %v, ended after: %v)", s.status, s.body, s.afterStop, s.endedStopped)
					}
				case "/metrics":
					if s.status != http.StatusOK {
						t.Errorf("/metrics = %d %q", s.status, s.body)
						continue
					}
					p := expfmt.NewTextParser(model.LegacyValidation)
					fams, err := p.TextToMetricFamilies(strings.NewReader(s.body))
					if err != nil {
						t.Errorf("/metrics does not parse: %v\n%s", err, s.body)
					} else if fams["baton_queue_up"] == nil || fams["baton_jobs"] == nil {
						t.Errorf("/metrics lacks baton_queue_up or baton_jobs:\n%s", s.body)
					}
				}
			}
			t.Logf("%d scrapes: %d before the stop, %d begun after it, %d /readyz answered 503", len(scrapes), before, after, notReady)
			if before == 0 || after == 0 {
				t.Errorf("the scrapes did not straddle the stop (%d before, %d after)", before, after)
			}
			if tc.admin && notReady == 0 {
				t.Error("admin.addr's /readyz never answered 503 while the job drained")
			}
			if _, err := http.Get(ops + "/healthz"); err == nil || !connectionEnded(err) {
				t.Errorf("GET /healthz after the exit: %v, want a refused connection", err)
			}
			if strings.Contains(r.stderr.String(), "panic") {
				t.Errorf("a panic was logged:\n%s", r.stderr.String())
			}
		})
	}
}

// connectionEnded reports whether err is a refused connection, or one the
// server closed without an answer (a connection the closing listener had
// queued but never accepted).
func connectionEnded(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// waitMetric waits until /metrics at base shows line.
func waitMetric(t testing.TB, base, line string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), line) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed %s:\n%s", line, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
