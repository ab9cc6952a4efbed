package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
)

// newcomer runs `baton run` in-process as a newcomer would: embedded
// defaults, a data directory of its own, the LLM endpoint from the
// environment.
type newcomer struct {
	t    *testing.T
	srv  *llmtest.Server
	env  map[string]string
	conf string
}

func newNewcomer(t *testing.T) *newcomer {
	srv := llmtest.NewServer(t, llmtest.WithAPIKey("sk-test"))
	return &newcomer{t: t, srv: srv, conf: writeConfig(t, "log:\n  level: warn\ntools:\n  bash:\n    sandbox: none\n"), env: map[string]string{
		"OPENAI_BASE_URL": srv.URL(),
		"OPENAI_API_KEY":  "sk-test",
		"BATON_DATA_DIR":  t.TempDir(),
		"USER":            "alice",
	}}
}

func (n *newcomer) run(args ...string) (int, string, string) {
	n.t.Helper()
	var out, errOut bytes.Buffer
	m := NewMain()
	m.Stdin = strings.NewReader("") // not a terminal
	m.Stdout, m.Stderr = &out, &errOut
	m.Env = mapEnv(n.env)
	code := m.Report(m.Run(context.Background(), append([]string{"run", "--config", n.conf}, args...)))
	return code, out.String(), errOut.String()
}

func TestRunCompletes(t *testing.T) {
	n := newNewcomer(t)
	n.srv.Script(
		llmtest.Call("Write", `{"path":"output/hello.txt","content":"hi"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Wrote output/hello.txt."}`),
	)
	code, stdout, stderr := n.run("write a greeting file")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if strings.TrimSpace(stdout) != "Wrote output/hello.txt." {
		t.Errorf("stdout = %q, want the answer alone", stdout)
	}
	m := regexp.MustCompile(`task #(\d+), job #\d+, piece chat\nbaton: workspace (\S+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr does not name the task and workspace:\n%s", stderr)
	}
	got, err := os.ReadFile(filepath.Join(m[2], "output", "hello.txt"))
	if err != nil || string(got) != "hi" {
		t.Errorf("output/hello.txt = %q, %v", got, err)
	}
	if !strings.Contains(stderr, "· chat: 1 movement") || !strings.Contains(stderr, "  Write output/hello.txt\n") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
	if strings.Contains(stderr, "sk-test") || strings.Contains(stdout, "sk-test") {
		t.Errorf("the API key was printed")
	}
	if want := "baton: file " + filepath.Join(m[2], "output", "hello.txt") + " (2 bytes)"; !strings.Contains(stderr, want) {
		t.Errorf("stderr does not list %q:\n%s", want, stderr)
	}
}

func TestRunAskThenAnswerWithTask(t *testing.T) {
	n := newNewcomer(t)
	n.srv.Script(llmtest.Call("transition", `{"next_step":"ASK","summary":"need the year","question":"Which year should the report cover?"}`))
	code, stdout, stderr := n.run("make the yearly report")
	if code != 3 {
		t.Fatalf("exit %d, want 3 (a question, stdin not a terminal)\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if strings.TrimSpace(stdout) != "Which year should the report cover?" {
		t.Errorf("stdout = %q, want the question", stdout)
	}
	task := regexp.MustCompile(`task #(\d+)`).FindStringSubmatch(stderr)[1]
	if !strings.Contains(stderr, "baton run --task "+task) {
		t.Errorf("stderr does not say how to answer:\n%s", stderr)
	}

	n.srv.Script(llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Report for 2025 done."}`))
	code, stdout, stderr = n.run("--task", task, "2025, please")
	if code != 0 {
		t.Fatalf("answer: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if strings.TrimSpace(stdout) != "Report for 2025 done." {
		t.Errorf("stdout = %q", stdout)
	}
	reqs := n.srv.Requests()
	resumed := reqs[len(reqs)-1]
	if len(resumed.Messages) != 2 {
		t.Errorf("the resumed movement starts with %d messages, want 2", len(resumed.Messages))
	}
	user := resumed.Messages[1].Text()
	for _, want := range []string{"Which year should the report cover?", "alice: 2025, please", "## Request\nmake the yearly report"} {
		if !strings.Contains(user, want) {
			t.Errorf("resumed prompt lacks %q:\n%s", want, user)
		}
	}
}

func TestRunModelFailing(t *testing.T) {
	n := newNewcomer(t)
	n.env["OPENAI_API_KEY"] = "sk-wrong"
	code, stdout, stderr := n.run("hello")
	if code != 4 {
		t.Fatalf("exit %d, want 4\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	want := "the model endpoint at " + n.srv.URL() + " refused the key (llm.api_key / OPENAI_API_KEY): 401 Unauthorized"
	if strings.Count(stderr, "failed: "+want) != 1 {
		t.Errorf("stderr does not say once that the job failed as the key was refused (%q):\n%s", want, stderr)
	}
	if strings.Contains(stderr, "sk-wrong") {
		t.Errorf("the API key was printed:\n%s", stderr)
	}
	// The failure is said once; the log's lines about it are in the log
	// file, not on stderr.
	if c := strings.Count(stderr, "failed"); c != 1 || strings.Contains(stderr, "level=") {
		t.Errorf("the failure is on stderr %d times, or log lines are:\n%s", c, stderr)
	}
	logPath := filepath.Join(n.env["BATON_DATA_DIR"], "logs", "baton-run.log")
	if !strings.Contains(stderr, "the log goes to "+logPath) {
		t.Errorf("stderr does not name the log file %s:\n%s", logPath, stderr)
	}
	if logged, err := os.ReadFile(logPath); err != nil || !strings.Contains(string(logged), "level=WARN") {
		t.Errorf("the log file holds %q, %v; want the refused request's warning", logged, err)
	}
}

func TestRunContinuesTask(t *testing.T) {
	n := newNewcomer(t)
	n.srv.Script(llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"The capital is Paris."}`))
	_, _, stderr := n.run("capital of France?")
	task := regexp.MustCompile(`task #(\d+)`).FindStringSubmatch(stderr)[1]
	n.srv.Script(llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"About 2.1 million."}`))
	code, stdout, _ := n.run("--task", task, "and its population?")
	if code != 0 || strings.TrimSpace(stdout) != "About 2.1 million." {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	user := n.srv.Requests()[1].Messages[1].Text()
	if !strings.Contains(user, "The capital is Paris.") {
		t.Errorf("the follow-up does not see the previous answer:\n%s", user)
	}
}

// TestRunAskOnTerminal answers the agent's question at the terminal: with
// stdin a terminal, baton run prompts and the job goes on.
func TestRunAskOnTerminal(t *testing.T) {
	ptm, tty := openPTY(t)
	n := newNewcomer(t)
	n.srv.Script(
		llmtest.Call("transition", `{"next_step":"ASK","summary":"need a name","question":"What is the project called?"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Named it Baton."}`),
	)
	var out, errOut syncBuffer
	m := NewMain()
	m.Stdin, m.Stdout, m.Stderr = tty, &out, &errOut
	m.Env = mapEnv(n.env)
	done := make(chan int, 1)
	go func() {
		done <- m.Report(m.Run(context.Background(), []string{"run", "--config", n.conf, "name the project"}))
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "What is the project called?") {
		if time.Now().After(deadline) {
			t.Fatalf("no question on stdout:\n%s\n%s", out.String(), errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := ptm.Write([]byte("Baton\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("baton run did not finish after the answer")
	}
	if !strings.Contains(out.String(), "Named it Baton.") {
		t.Errorf("stdout = %q", out.String())
	}
	user := n.srv.Requests()[1].Messages[1].Text()
	if !strings.Contains(user, "alice: Baton") {
		t.Errorf("the answer is not among the last comments:\n%s", user)
	}
}

// TestRunStreamsAnswerToTerminal: with stdout a terminal, the text the
// model writes reaches it while the job still runs (the model's next
// reply is held back until it has), without the control characters a
// hostile model sends to steer the terminal; an answer that the last
// reply already wrote is not printed twice. With stdout a file, the
// answer alone is printed, as before.
func TestRunStreamsAnswerToTerminal(t *testing.T) {
	ptm, tty := openPTY(t)
	n := newNewcomer(t)
	release := make(chan struct{})
	n.srv.Script(llmtest.Calls(
		llmtest.Text("Looking at the \x1b]52;c;ZXZpbA==\x07file first.\n"),
		llmtest.Call("Read", `{"path":"notes.txt"}`),
	))
	n.srv.Handle(func(llmtest.Request) llmtest.Step {
		<-release
		return llmtest.Calls(llmtest.Text("The file is missing."), llmtest.Transition("COMPLETE", "The file is missing."))
	})
	var screen syncBuffer
	go func() { _, _ = io.Copy(&screen, ptm) }()
	var errOut syncBuffer
	m := NewMain()
	m.Stdin, m.Stdout, m.Stderr = strings.NewReader(""), tty, &errOut
	m.Env = mapEnv(n.env)
	done := make(chan int, 1)
	go func() {
		done <- m.Report(m.Run(context.Background(), []string{"run", "--config", n.conf, "read my notes"}))
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(screen.String(), "file first.") {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("the model's text did not reach the terminal while the job ran:\n%q\nstderr: %s", screen.String(), errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(release)
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d\nterminal: %q\nstderr: %s", code, screen.String(), errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("baton run did not finish")
	}
	deadline = time.Now().Add(5 * time.Second)
	for !strings.Contains(screen.String(), "missing.") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	got := screen.String()
	if !strings.Contains(got, "Looking at the ]52;c;ZXZpbA==file first.") || strings.ContainsAny(got, "\x1b\x07") {
		t.Errorf("the terminal shows %q; want the text without its control characters", got)
	}
	if c := strings.Count(got, "The file is missing."); c != 1 {
		t.Errorf("the answer is on the terminal %d times, want once:\n%q", c, got)
	}

	// Not a terminal: the answer alone.
	n.srv.Script(llmtest.Calls(llmtest.Text("Done."), llmtest.Transition("COMPLETE", "Done.")))
	code, stdout, stderr := n.run("again")
	if code != 0 || strings.TrimSpace(stdout) != "Done." {
		t.Errorf("exit %d, stdout %q; want the answer alone\nstderr: %s", code, stdout, stderr)
	}
}

// openPTY opens a pseudo-terminal pair, closed when t ends; t is skipped
// where there is none.
func openPTY(t *testing.T) (ptm, tty *os.File) {
	t.Helper()
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { tty.Close(); ptm.Close() })
	return ptm, tty
}

// TestRunJobLongerThanThirtySeconds: a job whose Bash call runs 45 s (5
// minutes with BATON_LONG_TESTS=1) records its outcome once: one run of
// the command, one answer, one claim. The attempt's settling writes used to
// share a 30-second deadline taken before the job started.
func TestRunJobLongerThanThirtySeconds(t *testing.T) {
	t.Parallel()
	seconds := 45
	if os.Getenv("BATON_LONG_TESTS") != "" {
		seconds = 300
	}
	n := newNewcomer(t)
	n.srv.Script(
		llmtest.Call("Bash", fmt.Sprintf(`{"command":"sleep %d && echo ran >> output/effects.txt","timeout_s":%d}`, seconds, seconds+60)),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Slept and wrote output/effects.txt."}`),
	)
	done := make(chan struct{})
	var code int
	var stdout, stderr string
	go func() {
		defer close(done)
		code, stdout, stderr = n.run("sleep, then write a file")
	}()
	select {
	case <-done:
	case <-time.After(time.Duration(seconds)*time.Second + 3*time.Minute):
		t.Fatal("baton run did not end")
	}
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if got := strings.Count(stdout, "Slept and wrote output/effects.txt."); got != 1 {
		t.Errorf("the answer was printed %d times, want once:\n%s", got, stdout)
	}
	m := regexp.MustCompile(`baton: workspace (\S+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr does not name the workspace:\n%s", stderr)
	}
	effects, err := os.ReadFile(filepath.Join(m[1], "output", "effects.txt"))
	if err != nil || string(effects) != "ran\n" {
		t.Errorf("output/effects.txt = %q, %v; want the command's one run", effects, err)
	}
	if reqs := len(n.srv.Requests()); reqs != 2 {
		t.Errorf("the model was asked %d times, want 2 (the job ran once)", reqs)
	}
}

// TestRunTakesUpAJobLeftRunning: an earlier baton run died while its job
// ran (its store row says running, its in-process queue is gone). The next
// baton run takes that job over at once — not after a reconcile period,
// and not after the lease, an hour here — before its own job.
func TestRunTakesUpAJobLeftRunning(t *testing.T) {
	n := newNewcomer(t)
	n.conf = writeConfig(t, "log:\n  level: warn\nqueue:\n  lease: 1h\nworkers:\n  concurrency: 1\ntools:\n  bash:\n    sandbox: none\n")
	orphan := leftRunning(t, n.env["BATON_DATA_DIR"])
	n.srv.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "answered") })
	if code, stdout, stderr := n.run("the new request"); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if got := storedJob(t, n.env["BATON_DATA_DIR"], orphan); got.State != core.JobSucceeded || got.Attempt != 2 {
		t.Errorf("the earlier job is %s at attempt %d, want taken over (attempt 2) and succeeded", got.State, got.Attempt)
	}
}

// leftRunning stores, in the store under dataDir, a job that a process
// which then died was running (attempt 1), and returns its id.
func leftRunning(t testing.TB, dataDir string) int64 {
	t.Helper()
	ctx := context.Background()
	st, err := openStore(ctx, Config{DataDir: dataDir}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	task, _, err := st.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformConsole, Channel: "run", Thread: "earlier"}, Title: "earlier"})
	if err != nil {
		t.Fatal(err)
	}
	j, err := st.CreateJob(ctx, core.Job{TaskID: task.ID, Piece: "chat", Instruction: "the earlier request"})
	if err == nil {
		_, err = st.StartJob(ctx, j.ID, 1)
	}
	if err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// storedJob reads job id from the store under dataDir, which no process
// has open.
func storedJob(t testing.TB, dataDir string, id int64) core.Job {
	t.Helper()
	st, err := openStore(context.Background(), Config{DataDir: dataDir}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	j, err := st.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestRunVerbose: with --verbose the log stays on stderr and no log file
// is made.
func TestRunVerbose(t *testing.T) {
	n := newNewcomer(t)
	n.env["OPENAI_API_KEY"] = "sk-wrong"
	code, _, stderr := n.run("--verbose", "hello")
	if code != 4 || !strings.Contains(stderr, "level=WARN") || strings.Contains(stderr, "the log goes to") {
		t.Errorf("exit %d; want 4 and the log on stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(n.env["BATON_DATA_DIR"], "logs", "baton-run.log")); err == nil {
		t.Errorf("a log file was made with --verbose")
	}
}

// TestRunTruncationWarning: a server that counts far fewer prompt tokens
// than Baton sent (Ollama at its default num_ctx) is told on baton run's
// stderr, naming num_ctx, once.
func TestRunTruncationWarning(t *testing.T) {
	n := newNewcomer(t)
	n.srv.Script(
		llmtest.Call("Write", `{"path":"output/hello.txt","content":"hi"}`).WithUsage(200, 5),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Wrote output/hello.txt."}`).WithUsage(200, 5),
	)
	code, stdout, stderr := n.run("write a greeting file")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if got := strings.Count(stderr, "  warning: The model server counted 200 prompt tokens"); got != 1 {
		t.Errorf("the truncation warning is on stderr %d times, want once:\n%s", got, stderr)
	}
	for _, want := range []string{"OLLAMA_CONTEXT_LENGTH=", "num_ctx", "llm.context_window"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
}
