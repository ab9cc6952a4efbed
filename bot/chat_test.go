package main

import (
	"bufio"
	"context"
	"os"
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
