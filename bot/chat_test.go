package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/llmtest"
)

// terminal reads what Baton prints on a pseudo-terminal.
type terminal struct {
	t    *testing.T
	ptm  *os.File
	mu   sync.Mutex
	text strings.Builder // guarded by mu
}

func (tm *terminal) read() {
	r := bufio.NewReader(tm.ptm)
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		tm.mu.Lock()
		tm.text.Write(buf[:n])
		tm.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (tm *terminal) String() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.text.String()
}

// waitFor waits until the terminal shows s.
func (tm *terminal) waitFor(s string) {
	tm.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(tm.String(), s) {
		if time.Now().After(deadline) {
			tm.t.Fatalf("the terminal never showed %q; it shows:\n%s", s, tm.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (tm *terminal) typeLine(s string) {
	tm.t.Helper()
	if _, err := tm.ptm.Write([]byte(s + "\n")); err != nil {
		tm.t.Fatal(err)
	}
}

// TestChatOnTerminal drives `baton chat` through a pseudo-terminal: a
// question and its answer, a result, !status, !abort of a long command,
// /quit.
func TestChatOnTerminal(t *testing.T) {
	ptm, tty := openPTY(t)
	n := newNewcomer(t)
	n.srv.Script(
		llmtest.Call("transition", `{"next_step":"ASK","summary":"need a year","question":"Which year?"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Report for 2025 written."}`),
		llmtest.Call("Bash", `{"command":"sleep 30","timeout_s":60}`),
	)
	n.srv.Handle(func(llmtest.Request) llmtest.Step {
		return llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"late result"}`)
	})
	tm := &terminal{t: t, ptm: ptm}
	go tm.read()

	m := NewMain()
	m.Stdin, m.Stdout, m.Stderr = tty, tty, tty
	m.Env = mapEnv(n.env)
	done := make(chan int, 1)
	go func() { done <- m.Report(m.Run(context.Background(), []string{"chat", "--config", n.conf})) }()

	tm.waitFor("/quit leaves")
	tm.typeLine("make the yearly report")
	tm.waitFor("baton: Which year?")
	tm.typeLine("2025")
	tm.waitFor("baton: Report for 2025 written.")
	tm.typeLine("!status")
	tm.waitFor("job #1 succeeded")
	tm.typeLine("/new")
	tm.typeLine("run the long command")
	tm.waitFor("Working on it")
	time.Sleep(300 * time.Millisecond) // the Bash call is under way
	asked := time.Now()
	tm.typeLine("!abort")
	tm.waitFor("was aborted by alice")
	if took := time.Since(asked); took > 5*time.Second {
		t.Errorf("abort took %s", took)
	}
	tm.typeLine("/quit")
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d; terminal:\n%s", code, tm.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("baton chat did not leave after /quit; terminal:\n%s", tm.String())
	}
	if strings.Contains(tm.String(), "late result") {
		t.Errorf("the aborted job's result was posted:\n%s", tm.String())
	}
}

// TestChatReadsWell drives `baton chat` through a pseudo-terminal: while
// the model thinks a spinner turns; each tool call is one line; a retry of
// the model is one line, while the log lines go to data_dir/logs/
// (named once) and not into the conversation; the file the job wrote is
// listed with its path; !help lists the console's commands.
func TestChatReadsWell(t *testing.T) {
	ptm, tty := openPTY(t)
	n := newNewcomer(t)
	n.srv.Script(
		llmtest.Status(503),
		llmtest.Call("Bash", `{"command":"echo checking"}`).After(300*time.Millisecond),
		llmtest.Call("Write", `{"path":"output/report.md","content":"# Report\n"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Wrote output/report.md."}`),
	)
	tm := &terminal{t: t, ptm: ptm}
	go tm.read()

	m := NewMain()
	m.Stdin, m.Stdout, m.Stderr = tty, tty, tty
	m.Env = mapEnv(n.env)
	done := make(chan int, 1)
	go func() { done <- m.Report(m.Run(context.Background(), []string{"chat", "--config", n.conf})) }()

	tm.waitFor("/quit leaves")
	tm.typeLine("write the report")
	tm.waitFor("baton: Wrote output/report.md.")
	tm.waitFor("Done")
	tm.typeLine("!help")
	tm.waitFor("`/quit` (or")
	tm.typeLine("/quit")
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d; terminal:\n%s", code, tm.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("baton chat did not leave after /quit; terminal:\n%s", tm.String())
	}
	screen := tm.String()
	logPath := filepath.Join(n.env["BATON_DATA_DIR"], "logs", "baton-chat.log")
	for _, want := range []string{
		"⠋ thinking",                    // the spinner's first frame
		"\x1b[J",                        // the bottom redrawn
		"  the model: retry 1 of 5 in ", // the retry, as one line
		"  Bash: echo checking\r\n",
		"  Write output/report.md\r\n",
		"the log goes to " + logPath,
		"/new",
	} {
		if !strings.Contains(screen, want) {
			t.Errorf("the terminal does not show %q:\n%s", want, screen)
		}
	}
	for _, not := range []string{"level=WARN", "llm: retrying", "movement 1/10"} {
		if strings.Contains(screen, not) {
			t.Errorf("the terminal shows %q:\n%s", not, screen)
		}
	}
	if c := strings.Count(screen, "Bash: echo checking"); c != 1 {
		t.Errorf("the Bash call is shown %d times, want once", c)
	}
	file := regexp.MustCompile(`baton: file (\S+/output/report\.md) \(9 bytes\)`).FindStringSubmatch(screen)
	if file == nil {
		t.Fatalf("the output file is not listed with its path:\n%s", screen)
	}
	if got, err := os.ReadFile(file[1]); err != nil || string(got) != "# Report\n" {
		t.Errorf("%s = %q, %v", file[1], got, err)
	}
	logged, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("no log file: %v", err)
	}
	if !strings.Contains(string(logged), "retry 1 of 5") {
		t.Errorf("the log file lacks the retry:\n%s", logged)
	}
}

// TestChatPipedInput: `printf 'q1\nq2\n' | baton chat` answers both, one
// after the other, and leaves at the end of the input; the output is the
// conversation in plain lines, without escape codes.
func TestChatPipedInput(t *testing.T) {
	n := newNewcomer(t)
	n.srv.Script(
		llmtest.Call("Glob", `{"pattern":"**/*.md"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"First answer."}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Second answer."}`),
	)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.WriteString("first question\nsecond question\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var out, errOut syncBuffer
	m := NewMain()
	m.Stdin, m.Stdout, m.Stderr = r, &out, &errOut
	m.Env = mapEnv(n.env)
	if code := m.Report(m.Run(context.Background(), []string{"chat", "--config", n.conf})); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	got := out.String()
	order := []string{"> first question", "  Glob **/*.md", "baton: First answer.", "> second question", "baton: Second answer."}
	at := 0
	for _, want := range order {
		i := strings.Index(got[at:], want)
		if i < 0 {
			t.Fatalf("the output lacks %q after what came before:\n%s", want, got)
		}
		at += i + len(want)
	}
	if strings.Contains(got, "\x1b") || strings.ContainsAny(got, "⠋⠙⠹") {
		t.Errorf("escape codes or a spinner in piped output:\n%q", got)
	}
}

// TestChatDevNull: /dev/null is not a terminal: `baton chat </dev/null`
// leaves at once, exit 0, with no escape codes; `baton run </dev/null`
// does not prompt for an answer (exit 3).
func TestChatDevNull(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if isTerminal(null) {
		t.Fatal("isTerminal(/dev/null) = true")
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	_, tty := openPTY(t)
	if isTerminal(pr) || isTerminal(strings.NewReader("")) || !isTerminal(tty) || !isTerminal(&lockedWriter{w: tty}) {
		t.Fatalf("isTerminal: pipe %v, reader %v, pty %v, locked pty %v; want only the pty", isTerminal(pr), isTerminal(strings.NewReader("")), isTerminal(tty), isTerminal(&lockedWriter{w: tty}))
	}
	n := newNewcomer(t)
	var out, errOut syncBuffer
	m := NewMain()
	m.Stdin, m.Stdout, m.Stderr = null, &out, &errOut
	m.Env = mapEnv(n.env)
	if code := m.Report(m.Run(context.Background(), []string{"chat", "--config", n.conf})); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	if strings.Contains(out.String()+errOut.String(), "\x1b") {
		t.Errorf("escape codes:\n%q\n%q", out.String(), errOut.String())
	}

	n.srv.Script(llmtest.Call("transition", `{"next_step":"ASK","summary":"need a year","question":"Which year?"}`))
	m = NewMain()
	var runOut, runErr syncBuffer
	m.Stdin, m.Stdout, m.Stderr = null, &runOut, &runErr
	m.Env = mapEnv(n.env)
	if code := m.Report(m.Run(context.Background(), []string{"run", "--config", n.conf, "make the report"})); code != exitQuestion {
		t.Fatalf("baton run </dev/null: exit %d, want %d\nstdout: %s\nstderr: %s", code, exitQuestion, runOut.String(), runErr.String())
	}
	if strings.Contains(runErr.String(), "> ") || strings.Contains(runErr.String(), "\x1b") {
		t.Errorf("baton run </dev/null prompted or drew:\n%q", runErr.String())
	}
}
