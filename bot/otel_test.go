package main

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/queue/redistest"
)

// otlpSpan is a span as an OTLP/HTTP receiver got it.
type otlpSpan struct {
	Role, Name        string
	Trace, ID, Parent string
	Attrs             map[string]string
}

// otlpReceiver is an in-process OTLP/HTTP collector: it decodes every
// protobuf export sent to /v1/traces and keeps the spans.
type otlpReceiver struct {
	URL      string
	mu       sync.Mutex
	spans    []otlpSpan // guarded by mu
	requests int        // guarded by mu
}

func startOTLPReceiver(t testing.TB) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP request %s %s (%s): %v", req.Method, req.URL.Path, req.Header.Get("Content-Type"), err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var ex coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &ex); err != nil {
			t.Errorf("OTLP body: %v", err)
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.requests++
		for _, rs := range ex.GetResourceSpans() {
			role := ""
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "baton.role" {
					role = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					attrs := map[string]string{}
					for _, a := range s.GetAttributes() {
						v := a.GetValue()
						switch {
						case v.GetStringValue() != "":
							attrs[a.GetKey()] = v.GetStringValue()
						default:
							attrs[a.GetKey()] = strings.TrimSpace(strings.TrimPrefix(v.String(), "int_value:"))
						}
					}
					r.spans = append(r.spans, otlpSpan{
						Role: role, Name: s.GetName(), Attrs: attrs,
						Trace: hex.EncodeToString(s.GetTraceId()), ID: hex.EncodeToString(s.GetSpanId()), Parent: hex.EncodeToString(s.GetParentSpanId()),
					})
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *otlpReceiver) got() ([]otlpSpan, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]otlpSpan(nil), r.spans...), r.requests
}

// stopped stops a running baton and waits for its exit code 0.
func stopped(t *testing.T, name string, r *running) {
	t.Helper()
	r.stop()
	select {
	case code := <-r.done:
		if code != 0 {
			t.Errorf("%s exit %d:\n%s", name, code, r.stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not stop", name)
	}
}

// TestTraceAcrossGatewayAndWorker runs `baton gateway` and `baton worker`
// on one Redis and one store, with otel.enabled, both exporting to an
// in-process OTLP/HTTP receiver. A task sent to the gateway's API is run
// by the worker; the spans form one trace: the gateway's message span is
// the parent of the worker's job attempt, which holds the movement, which
// holds the model requests and the tool call. The worker's log lines about
// the job carry the trace id.
func TestTraceAcrossGatewayAndWorker(t *testing.T) {
	rcv := startOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	rds := redistest.Start(t)
	llmSrv := llmtest.NewServer(t)
	llmSrv.Script(
		llmtest.Call("Bash", `{"command":"echo traced"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Traced."}`),
	)
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\nlog:\n  level: debug\notel:\n  enabled: true\ntools:\n  bash:\n    sandbox: none\n")
	env := map[string]string{
		"BATON_DATA_DIR": t.TempDir(), "REDIS_URL": "redis://" + rds.Addr() + "/0",
		"OPENAI_BASE_URL": llmSrv.URL(), "OPENAI_API_KEY": "sk-x", "BATON_API_TOKEN": "t0ken",
	}
	gw := runBackground(t, env, "gateway", "--config", conf)
	defer gw.stop()
	base := "http://" + gw.logged(t, `baton gateway started" http=(\S+)`)
	wk := runBackground(t, env, "worker", "--config", conf)
	defer wk.stop()
	waitAnswer(t, base, "t0ken", createTask(t, base, "t0ken", "trace me"), "Traced.", time.Now().Add(60*time.Second))
	stopped(t, "worker", wk)
	stopped(t, "gateway", gw)

	checkJobTrace(t, rcv, wk.stderr.String())
}

// checkJobTrace asserts the spans rcv got tell one job's story as one
// trace — the gateway's message, the worker's attempt, its movement, two
// model requests and a Bash call, each the child of the one before — and
// that every line of workerLog written while the worker ran the job
// carries its trace id.
func checkJobTrace(t *testing.T, rcv *otlpReceiver, workerLog string) {
	t.Helper()
	spans, _ := rcv.got()
	byName := map[string][]otlpSpan{}
	byID := map[string]otlpSpan{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
		byID[s.ID] = s
	}
	one := func(name, role string) otlpSpan {
		t.Helper()
		if len(byName[name]) != 1 || byName[name][0].Role != role {
			t.Fatalf("spans %q = %+v; want one from the %s (all: %+v)", name, byName[name], role, spans)
		}
		return byName[name][0]
	}
	msg := one("message.received", "gateway")
	attempt := one("job.attempt", "worker")
	mv := one("movement", "worker")
	tool := one("tool.call", "worker")
	models := byName["model.request"]
	if msg.Parent != "" {
		t.Errorf("the message span has parent %s; want it the root", msg.Parent)
	}
	for _, s := range spans {
		if s.Trace != msg.Trace {
			t.Errorf("span %s (%s) is in trace %s; want every span in %s", s.Name, s.Role, s.Trace, msg.Trace)
		}
	}
	links := []struct {
		child, parent otlpSpan
	}{{attempt, msg}, {mv, attempt}, {tool, mv}}
	if len(models) != 2 {
		t.Errorf("%d model.request spans; want 2 (the Bash call, the transition)", len(models))
	}
	for _, m := range models {
		links = append(links, struct{ child, parent otlpSpan }{m, mv})
	}
	for _, l := range links {
		if l.child.Parent != l.parent.ID {
			t.Errorf("%s's parent is %q (%s); want %s %s", l.child.Name, l.child.Parent, byID[l.child.Parent].Name, l.parent.Name, l.parent.ID)
		}
	}
	if tool.Attrs["baton.tool"] != "Bash" || mv.Attrs["baton.movement"] == "" || attempt.Attrs["baton.job.state"] != "succeeded" || attempt.Attrs["baton.queue.wait_ms"] == "" {
		t.Errorf("attributes: tool %v, movement %v, attempt %v", tool.Attrs, mv.Attrs, attempt.Attrs)
	}

	// Every line the worker wrote while it ran the job (its only one)
	// names the job's trace; the queue's own lines are not the job's.
	log := workerLog
	from, to := strings.Index(log, `msg="worker started"`), strings.Index(log, `msg="worker stopped"`)
	if from < 0 || to < from {
		t.Fatalf("worker log:\n%s", log)
	}
	lines := strings.Split(log[from:to], "\n") // a part of each end line
	lines = lines[1 : len(lines)-1]
	var n int
	for _, l := range lines {
		if strings.Contains(l, `msg="queue: `) {
			continue
		}
		n++
		if !strings.Contains(l, "trace_id="+msg.Trace) {
			t.Errorf("a line of the job without trace_id=%s: %s", msg.Trace, l)
		}
	}
	if n < 3 {
		t.Errorf("%d lines of the job (two model requests, a command); worker log:\n%s", n, log)
	}
}

// TestTracingOff: with otel.enabled false (the default), even with an
// OTLP endpoint in the environment, nothing is exported and no log line
// carries a trace id.
func TestTracingOff(t *testing.T) {
	rcv := startOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	llmSrv := llmtest.NewServer(t)
	llmSrv.Script(
		llmtest.Call("Bash", `{"command":"echo untraced"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Untraced."}`),
	)
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\nlog:\n  level: debug\ntools:\n  bash:\n    sandbox: none\n")
	env := map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_BASE_URL": llmSrv.URL(), "OPENAI_API_KEY": "sk-x", "BATON_API_TOKEN": "t0ken"}
	r := runBackground(t, env, "serve", "--config", conf)
	defer r.stop()
	base := "http://" + r.logged(t, `baton serve started" http=(\S+)`)
	waitAnswer(t, base, "t0ken", createTask(t, base, "t0ken", "do not trace me"), "Untraced.", time.Now().Add(60*time.Second))
	stopped(t, "serve", r)
	if spans, n := rcv.got(); n != 0 || len(spans) != 0 {
		t.Errorf("the receiver got %d exports (%d spans) with tracing off", n, len(spans))
	}
	if !strings.Contains(r.stderr.String(), `msg="command finished"`) {
		t.Errorf("no log line about the job's command:\n%s", r.stderr.String())
	}
	if strings.Contains(r.stderr.String(), "trace_id") {
		t.Errorf("a log line carries a trace id with tracing off:\n%s", r.stderr.String())
	}
}

// TestTraceAcrossProcesses is TestTraceAcrossGatewayAndWorker with the
// built binary: `baton gateway` and `baton worker` as two processes of
// their own, configured by the real environment.
func TestTraceAcrossProcesses(t *testing.T) {
	bin := buildStatic(t)
	rcv := startOTLPReceiver(t)
	rds := redistest.Start(t)
	llmSrv := llmtest.NewServer(t)
	llmSrv.Script(
		llmtest.Call("Bash", `{"command":"echo traced"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Traced."}`),
	)
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\nlog:\n  level: debug\notel:\n  enabled: true\ntools:\n  bash:\n    sandbox: none\n")
	env := append(os.Environ(), "BATON_DATA_DIR="+t.TempDir(), "REDIS_URL=redis://"+rds.Addr()+"/0",
		"OPENAI_BASE_URL="+llmSrv.URL(), "OPENAI_API_KEY=sk-x", "BATON_API_TOKEN=t0ken",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=100")
	start := func(cmd string) (*exec.Cmd, *syncBuffer) {
		t.Helper()
		var stderr syncBuffer
		c := exec.Command(bin, cmd, "--config", conf)
		c.Env, c.Stdout, c.Stderr = env, io.Discard, &stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		return c, &stderr
	}
	stop := func(name string, c *exec.Cmd, stderr *syncBuffer) {
		t.Helper()
		if err := c.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(); err != nil {
			t.Errorf("%s: %v\n%s", name, err, stderr.String())
		}
	}
	gw, gwLog := start("gateway")
	addr := regexp.MustCompile(`baton gateway started" http=(\S+)`)
	var base string
	for deadline := time.Now().Add(60 * time.Second); base == ""; time.Sleep(20 * time.Millisecond) {
		if m := addr.FindStringSubmatch(gwLog.String()); m != nil {
			base = "http://" + m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("the gateway did not start:\n%s", gwLog.String())
		}
	}
	wk, wkLog := start("worker")
	waitAnswer(t, base, "t0ken", createTask(t, base, "t0ken", "trace me"), "Traced.", time.Now().Add(60*time.Second))
	stop("worker", wk, wkLog)
	stop("gateway", gw, gwLog)
	checkJobTrace(t, rcv, wkLog.String())
}

// TestTracingCollectorDown: a collector that does not answer drops spans
// with a warning in the log; the job is answered and serve stops cleanly.
func TestTracingCollectorDown(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "300")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	llmSrv := llmtest.NewServer(t)
	llmSrv.Script(llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Answered anyway."}`))
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\notel:\n  enabled: true\ntools:\n  bash:\n    sandbox: none\n")
	env := map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_BASE_URL": llmSrv.URL(), "OPENAI_API_KEY": "sk-x", "BATON_API_TOKEN": "t0ken"}
	r := runBackground(t, env, "serve", "--config", conf)
	defer r.stop()
	base := "http://" + r.logged(t, `baton serve started" http=(\S+)`)
	waitAnswer(t, base, "t0ken", createTask(t, base, "t0ken", "hello"), "Answered anyway.", time.Now().Add(60*time.Second))
	stopped(t, "serve", r)
	if !strings.Contains(r.stderr.String(), "trace export failed; spans dropped") {
		t.Errorf("no warning of the dropped spans:\n%s", r.stderr.String())
	}
}

// TestTraceOfSubtasks: a job that waits for a subtask is one trace with
// it: both attempts of the parent (before and after the wait) are
// children of the message, and the subtask's attempt is a child of the
// parent's attempt that created it.
func TestTraceOfSubtasks(t *testing.T) {
	rcv := startOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	llmSrv := llmtest.NewServer(t)
	llmSrv.Script(
		llmtest.Call("transition", `{"next_step":"WAIT_SUBTASKS","summary":"split","subtasks":[{"title":"child","instruction":"report"}]}`),
		llmtest.Transition("COMPLETE", "child done"),
		llmtest.Transition("COMPLETE", "Done."),
	)
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\notel:\n  enabled: true\ntools:\n  bash:\n    sandbox: none\n")
	env := map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_BASE_URL": llmSrv.URL(), "OPENAI_API_KEY": "sk-x", "BATON_API_TOKEN": "t0ken"}
	r := runBackground(t, env, "serve", "--config", conf)
	defer r.stop()
	base := "http://" + r.logged(t, `baton serve started" http=(\S+)`)
	waitAnswer(t, base, "t0ken", createTask(t, base, "t0ken", "split it"), "Done.", time.Now().Add(60*time.Second))
	stopped(t, "serve", r)

	spans, _ := rcv.got()
	var msg otlpSpan
	attempts := map[string][]otlpSpan{} // by job id
	for _, s := range spans {
		switch s.Name {
		case "message.received":
			msg = s
		case "job.attempt":
			attempts[s.Attrs["baton.job.id"]] = append(attempts[s.Attrs["baton.job.id"]], s)
		}
	}
	parent, child := attempts["1"], attempts["2"]
	if msg.ID == "" || len(parent) != 2 || len(child) != 1 {
		t.Fatalf("message %+v, parent attempts %+v, subtask attempts %+v (all: %+v)", msg, parent, child, spans)
	}
	for _, a := range parent {
		if a.Trace != msg.Trace || a.Parent != msg.ID {
			t.Errorf("parent attempt %+v; want a child of the message %s", a, msg.ID)
		}
	}
	first := parent[0]
	if parent[1].Attrs["baton.job.state"] == "waiting_subtasks" {
		first = parent[1]
	}
	if first.Attrs["baton.job.state"] != "waiting_subtasks" {
		t.Errorf("no parent attempt ended waiting for its subtask: %+v", parent)
	}
	if c := child[0]; c.Trace != msg.Trace || c.Parent != first.ID {
		t.Errorf("subtask attempt %+v; want a child of the parent's attempt %s in trace %s", c, first.ID, msg.Trace)
	}
}

// TestTracingRefusesHTTPJSON: with otel.enabled, an OTLP protocol the
// exporter does not speak (http/json) stops the start with a
// configuration error naming it and the two it speaks.
func TestTracingRefusesHTTPJSON(t *testing.T) {
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\notel:\n  enabled: true\n")
	code, _, stderr := runMain(t, map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_API_KEY": "sk-test", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "serve", "--config", conf)
	if code != exitUsage || !strings.Contains(stderr, "otel.enabled") || !strings.Contains(stderr, `"http/json"`) || !strings.Contains(stderr, "grpc") {
		t.Errorf("exit %d:\n%s", code, stderr)
	}
}
