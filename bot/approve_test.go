package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/console"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/sqlite"
)

// Approvals at the terminal: `baton chat` and `baton run` with a policy that
// asks before any `touch`.

// newApprovalNewcomer is a newcomer whose configuration asks before Bash
// runs `touch …`.
func newApprovalNewcomer(t *testing.T) *newcomer {
	n := newNewcomer(t)
	n.conf = writeConfig(t, "log:\n  level: warn\ntools:\n  bash:\n    sandbox: none\n"+
		"approvals: {rules: [{tool: Bash, match: '^touch ', action: ask}]}\n")
	return n
}

// made reports whether a task's workspace holds file name.
func (n *newcomer) made(name string) bool {
	n.t.Helper()
	got, err := filepath.Glob(filepath.Join(n.env["BATON_DATA_DIR"], "workspaces", "*", name))
	if err != nil {
		n.t.Fatal(err)
	}
	return len(got) > 0
}

// told reports whether the model's last request says s.
func (n *newcomer) told(s string) bool {
	reqs := n.srv.Requests()
	if len(reqs) == 0 {
		return false
	}
	for _, m := range reqs[len(reqs)-1].Messages {
		if strings.Contains(m.Text(), s) {
			return true
		}
	}
	return false
}

// TestChatApprovalOnTerminal: `baton chat` shows the call waiting for
// approval with the [y]es / [n]o / [a]lways prompt; y runs it and the job
// answers; in a second thread n denies it, the model is told, and the file
// is not made.
func TestChatApprovalOnTerminal(t *testing.T) {
	ptm, tty := openPTY(t)
	n := newApprovalNewcomer(t)
	n.srv.Script(
		llmtest.Call("Bash", `{"command":"touch approved.txt"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Made approved.txt."}`),
		llmtest.Call("Bash", `{"command":"touch denied.txt"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Could not make denied.txt."}`),
	)
	tm := &terminal{t: t, ptm: ptm}
	go tm.read()

	m := NewMain()
	m.Stdin, m.Stdout, m.Stderr = tty, tty, tty
	m.Env = mapEnv(n.env)
	done := make(chan int, 1)
	go func() { done <- m.Report(m.Run(context.Background(), []string{"chat", "--config", n.conf})) }()

	tm.waitFor("/quit leaves")
	tm.typeLine("make a file")
	tm.waitFor("touch approved.txt")
	tm.waitFor(console.AnswerPrompt)
	if n.made("approved.txt") {
		t.Fatal("the call ran before the answer")
	}
	tm.typeLine("y")
	tm.waitFor("Bash approved by")
	tm.waitFor("baton: Made approved.txt.")
	if !n.made("approved.txt") {
		t.Errorf("approved.txt was not made; terminal:\n%s", tm.String())
	}

	tm.typeLine("/new")
	tm.typeLine("make another file")
	tm.waitFor("touch denied.txt")
	tm.typeLine("n")
	tm.waitFor("Bash denied by")
	tm.waitFor("baton: Could not make denied.txt.")
	if n.made("denied.txt") {
		t.Errorf("the denied call ran")
	}
	if !n.told("was not run") {
		t.Errorf("the model was not told of the denial")
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
}

// TestRunApprovalWithoutTerminal: without a terminal, baton run prints the
// call waiting for approval and exits 3; --task N --approve decides it and
// runs the job to its end.
func TestRunApprovalWithoutTerminal(t *testing.T) {
	n := newApprovalNewcomer(t)
	n.srv.Script(llmtest.Call("Bash", `{"command":"touch approved.txt"}`))
	code, stdout, stderr := n.run("make the file")
	if code != 3 {
		t.Fatalf("exit %d, want 3 (an approval, stdin not a terminal)\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	task := regexp.MustCompile(`task #(\d+)`).FindStringSubmatch(stderr)[1]
	if !regexp.MustCompile(`^approval #\d+, task #`+task+`: Bash \(approvals\.rules\[0\]\)\n`).MatchString(stdout) || !strings.Contains(stdout, "touch approved.txt") {
		t.Errorf("stdout does not show the pending call:\n%s", stdout)
	}
	if !strings.Contains(stderr, "baton run --task "+task+" --approve") {
		t.Errorf("stderr does not say how to decide:\n%s", stderr)
	}
	if n.made("approved.txt") {
		t.Fatal("the call ran before anyone approved it")
	}

	code, _, stderr = n.run("--task", task, "go on")
	if code != 2 || !strings.Contains(stderr, "--approve") {
		t.Errorf("an answer to a task waiting for approval: exit %d, stderr:\n%s", code, stderr)
	}

	n.srv.Script(llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Made approved.txt."}`))
	code, stdout, stderr = n.run("--task", task, "--approve")
	if code != 0 {
		t.Fatalf("--approve: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if strings.TrimSpace(stdout) != "Made approved.txt." {
		t.Errorf("stdout = %q, want the answer", stdout)
	}
	if !n.made("approved.txt") {
		t.Errorf("approved.txt was not made")
	}

	code, _, stderr = n.run("--task", task, "--approve")
	if code != 2 || !strings.Contains(stderr, "has no call waiting for approval") {
		t.Errorf("a second --approve: exit %d, stderr:\n%s", code, stderr)
	}
	// The decision's edit of the approval message is not left for a
	// later baton chat to post.
	st, err := sqlite.Open(context.Background(), filepath.Join(n.env["BATON_DATA_DIR"], "baton.db"), sqlite.Options{WorkspaceRoot: filepath.Join(n.env["BATON_DATA_DIR"], "workspaces")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	due, err := st.DueOutbox(context.Background(), core.PlatformConsole, time.Now().Add(time.Hour), 10)
	if err != nil || len(due) != 0 {
		t.Errorf("the console's outbox holds %d messages (%v), want none", len(due), err)
	}
}

// TestRunApprovalDenyWithReason: --deny --reason denies the call; the model
// is told why and the job goes on to its end.
func TestRunApprovalDenyWithReason(t *testing.T) {
	n := newApprovalNewcomer(t)
	n.srv.Script(llmtest.Call("Bash", `{"command":"touch denied.txt"}`))
	code, _, stderr := n.run("make the file")
	if code != 3 {
		t.Fatalf("exit %d, want 3\nstderr: %s", code, stderr)
	}
	task := regexp.MustCompile(`task #(\d+)`).FindStringSubmatch(stderr)[1]
	n.srv.Script(llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Left it alone."}`))
	code, stdout, stderr := n.run("--task", task, "--deny", "--reason", "not on a Friday")
	if code != 0 || strings.TrimSpace(stdout) != "Left it alone." {
		t.Fatalf("--deny: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if n.made("denied.txt") {
		t.Errorf("the denied call ran")
	}
	if !n.told("was not run") || !n.told("not on a Friday") {
		t.Errorf("the model was not told of the denial and its reason")
	}
}

// TestRunApprovalOnTerminal: on a terminal baton run asks; what is not an
// answer asks again, y runs the call.
func TestRunApprovalOnTerminal(t *testing.T) {
	ptm, tty := openPTY(t)
	n := newApprovalNewcomer(t)
	n.srv.Script(
		llmtest.Call("Bash", `{"command":"touch approved.txt"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Made approved.txt."}`),
	)
	var out, errOut syncBuffer
	m := NewMain()
	m.Stdin, m.Stdout, m.Stderr = tty, &out, &errOut
	m.Env = mapEnv(n.env)
	done := make(chan int, 1)
	go func() {
		done <- m.Report(m.Run(context.Background(), []string{"run", "--config", n.conf, "make the file"}))
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(errOut.String(), console.AnswerPrompt) {
		if time.Now().After(deadline) {
			t.Fatalf("no prompt:\n%s\n%s", out.String(), errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "touch approved.txt") {
		t.Errorf("stdout does not show the call:\n%s", out.String())
	}
	if _, err := ptm.Write([]byte("maybe\ny\n")); err != nil {
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
	if n := strings.Count(errOut.String(), console.AnswerPrompt); n != 2 {
		t.Errorf("the prompt was shown %d times, want 2 (asked again after %q):\n%s", n, "maybe", errOut.String())
	}
	if !strings.Contains(out.String(), "Made approved.txt.") || !n.made("approved.txt") {
		t.Errorf("the approved call did not run to the answer:\n%s", out.String())
	}
}

// TestRunApprovalFlags: --approve and --deny go with --task alone.
func TestRunApprovalFlags(t *testing.T) {
	n := newNewcomer(t)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--approve"}, "--task N"},
		{[]string{"--task", "1", "--approve", "--deny"}, "exclude each other"},
		{[]string{"--task", "1", "--approve", "do it"}, "take no instruction"},
		{[]string{"--task", "1", "--approve", "--reason", "x"}, "--reason goes with --deny"},
		{[]string{"--task", "1", "--approve"}, "there is no task #1"},
	} {
		code, _, stderr := n.run(tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.says) {
			t.Errorf("%q: exit %d, stderr:\n%s\nwant 2 saying %q", tc.args, code, stderr, tc.says)
		}
	}
}
