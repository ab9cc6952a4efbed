package tools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/sandbox"

	"github.com/baton-bot/baton/core/sandbox/sandboxtest"
)

// newSandbox builds the sandbox for a mode; "bwrap" skips when bubblewrap
// does not work here unless BATON_REQUIRE_BWRAP=1.
func newSandbox(tb testing.TB, cfg sandbox.Config) *sandbox.Sandbox {
	tb.Helper()
	sb, err := sandbox.New(context.Background(), cfg)
	if err != nil {
		if cfg.Mode == sandbox.Bwrap && os.Getenv("BATON_REQUIRE_BWRAP") != "1" {
			tb.Skipf("bubblewrap does not work here (set BATON_REQUIRE_BWRAP=1 to fail instead): %v", err)
		}
		tb.Fatal(err)
	}
	return sb
}

// newBash builds the Bash tool over a sandbox of that mode.
func newBash(tb testing.TB, mode string) *Bash {
	tb.Helper()
	b, err := NewBash(BashConfig{Sandbox: newSandbox(tb, sandbox.Config{Mode: mode}), Timeout: 30 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// modes lists the sandbox modes to run a behaviour under.
func modes(t *testing.T, f func(t *testing.T, b *Bash)) {
	t.Run("none", func(t *testing.T) { f(t, newBash(t, sandbox.None)) })
	t.Run("bwrap", func(t *testing.T) { f(t, newBash(t, sandbox.Bwrap)) })
}

func TestBashBasics(t *testing.T) {
	modes(t, func(t *testing.T, b *Bash) {
		env := newEnv(t)
		put(t, env, "input/data.txt", []byte("hello\n"))
		got := ok(t, call(t, b, env, obj{"command": "cat input/data.txt; echo to-stderr >&2; pwd; echo $HOME; exit 3"}))
		root := env.WS.Root()
		want := "hello\nto-stderr\n" + root + "\n" + root + "\n[exit code 3]"
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		ok(t, call(t, b, env, obj{"command": "mkdir -p output && echo done > output/r.txt"}))
		if data, err := os.ReadFile(filepath.Join(root, "output/r.txt")); err != nil || string(data) != "done\n" {
			t.Errorf("workspace write: %q %v", data, err)
		}
		failed(t, call(t, b, env, obj{"command": "  "}))
	})
}

func TestBashScrubbedEnv(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "secret-value-123")
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-secret")
	modes(t, func(t *testing.T, b *Bash) {
		env := newEnv(t)
		got := ok(t, call(t, b, env, obj{"command": "env"}))
		if strings.Contains(got, "secret") || strings.Contains(got, "OPENAI") {
			t.Errorf("environment leaks: %q", got)
		}
		names := regexp.MustCompile(`(?m)^([A-Z_]+)=`).FindAllStringSubmatch(got, -1)
		for _, m := range names {
			switch m[1] {
			case "PATH", "HOME", "LANG", "TMPDIR", "PWD", "SHLVL", "_":
			default:
				t.Errorf("unexpected variable %s", m[1])
			}
		}
	})
}

// TestBashHugeOutput prints 1 GB: the result and the kept copy are capped,
// memory stays bounded and the next call works.
func TestBashHugeOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("prints 1 GB")
	}
	b := newBash(t, sandbox.None)
	env := newEnv(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := call(t, b, env, obj{"command": "yes | head -c 1000000000; echo; echo THE-END", "timeout_s": 300})
	runtime.ReadMemStats(&after)
	got := ok(t, res)
	if n := env.Tokens.Count(got); n > env.TokenizerBudget {
		t.Fatalf("result %d tokens, budget %d", n, env.TokenizerBudget)
	}
	if !strings.HasPrefix(got, "y\ny\n") || !strings.Contains(got, "THE-END\n[exit code 0]") {
		t.Errorf("want head, tail and exit code: %q … %q", got[:20], got[len(got)-60:])
	}
	m := regexp.MustCompile(`kept at (logs/bash/\S+\.log)`).FindStringSubmatch(got)
	if m == nil || !strings.Contains(got, "head, tail, grep, awk or sed") {
		t.Fatalf("cut note lacks the kept copy or the hint: %q", got)
	}
	fi, err := os.Stat(filepath.Join(env.WS.Root(), m[1]))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > DefaultKeptBytes+captureTail+100 || fi.Size() < DefaultKeptBytes {
		t.Errorf("kept copy is %d bytes, want about %d", fi.Size(), DefaultKeptBytes)
	}
	kept, _ := os.ReadFile(filepath.Join(env.WS.Root(), m[1]))
	if !strings.HasSuffix(string(kept), "THE-END\n") {
		t.Errorf("kept copy does not end with the output's end")
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 200<<20 {
		t.Errorf("allocated %d MB while capturing 1 GB", grew>>20)
	}
	if got := ok(t, call(t, b, env, obj{"command": "echo next"})); got != "next\n[exit code 0]" {
		t.Errorf("next call: %q", got)
	}
}

// TestBashTimeout kills a command and its background grandchild.
func TestBashTimeout(t *testing.T) {
	modes(t, func(t *testing.T, b *Bash) {
		env := newEnv(t)
		res := call(t, b, env, obj{"command": "sleep 100.31 & echo $! > child.pid; wait", "timeout_s": 1})
		msg := failed(t, res)
		if !strings.Contains(msg, "timed out after 1s") {
			t.Errorf("result %q does not report the timeout", msg)
		}
		if !b.Sandboxed() {
			assertGone(t, env, "child.pid")
		}
		assertNoProcess(t, "100.31")
	})
}

// TestBashCancel kills the tree when the job's context is cancelled.
func TestBashCancel(t *testing.T) {
	modes(t, func(t *testing.T, b *Bash) {
		env := newEnv(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan Result)
		go func() {
			done <- Safe(ctx, b, env, json.RawMessage(`{"command":"(sleep 100.32; echo never) & echo $! > child.pid; echo started; wait"}`))
		}()
		waitFile(t, filepath.Join(env.WS.Root(), "child.pid"))
		cancel()
		res := <-done
		if msg := failed(t, res); !strings.Contains(msg, "cancelled") || !strings.Contains(msg, "started") {
			t.Errorf("result %q", msg)
		}
		if !b.Sandboxed() {
			assertGone(t, env, "child.pid")
		}
		assertNoProcess(t, "100.32")
	})
}

// TestBashBackgroundChild: a child left running holding the output pipe
// does not keep the call waiting, and is killed.
func TestBashBackgroundChild(t *testing.T) {
	b := newBash(t, sandbox.None)
	env := newEnv(t)
	got := ok(t, call(t, b, env, obj{"command": "sleep 100 & echo $! > child.pid; echo quick"}))
	if got != "quick\n[exit code 0]" {
		t.Errorf("got %q", got)
	}
	assertGone(t, env, "child.pid")
}

func waitFile(tb testing.TB, p string) {
	tb.Helper()
	for range 1000 {
		if b, err := os.ReadFile(p); err == nil && strings.HasSuffix(string(b), "\n") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("%s never appeared", p)
}

// assertGone checks that the pid written in the workspace file no longer
// runs (a zombie awaiting its reaper counts as gone).
func assertGone(tb testing.TB, env *Env, rel string) {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(env.WS.Root(), rel))
	if err != nil {
		tb.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		tb.Fatal(err)
	}
	for range 500 {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Errorf("process %d survived", pid)
}

// assertNoProcess checks, from the host's view (which also sees processes
// inside the sandbox's PID namespace), that no live process has arg in its
// command line.
func assertNoProcess(tb testing.TB, arg string) {
	tb.Helper()
	for range 500 {
		found := false
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			cmd, err := os.ReadFile(d + "/cmdline")
			if err != nil || !strings.Contains(string(cmd), arg) {
				continue
			}
			if stat, err := os.ReadFile(d + "/stat"); err == nil && !strings.Contains(string(stat), ") Z ") {
				found = true
			}
		}
		if !found {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Errorf("a process running %q survived", arg)
}

func TestBashSandbox(t *testing.T) {
	b := newBash(t, sandbox.Bwrap)
	env := newEnv(t)
	outside := filepath.Join(filepath.Dir(env.WS.Root()), "outside.txt")
	res := call(t, b, env, obj{"command": "echo x > " + outside + "; echo y > /usr/pwned; echo z > logs/forged; ls /tmp"})
	got := ok(t, res)
	if _, err := os.Stat(outside); err == nil {
		t.Error("wrote outside the workspace")
	}
	if _, err := os.Stat(filepath.Join(env.WS.Root(), "logs/forged")); err == nil {
		t.Error("wrote into logs/")
	}
	if !strings.Contains(got, "Read-only file system") {
		t.Errorf("want read-only errors: %q", got)
	}

	port, _ := sandboxtest.Listen(t, "127.0.0.1")
	dial := obj{"command": "exec 3<>/dev/tcp/127.0.0.1/" + port + " && echo connected"}
	if got := ok(t, call(t, b, env, dial)); strings.Contains(got, "connected") {
		t.Errorf("reached the network without network: true: %q", got)
	}
	// network: true with the operator's default (tools.bash.network: deny)
	// is refused, never the host's network.
	env.Network = true
	if msg := failed(t, call(t, b, env, dial)); strings.Contains(msg, "connected") || !strings.Contains(msg, "tools.bash.network") {
		t.Errorf("network: true without the operator's consent: %q", msg)
	}
}

func TestBashSandboxUnusable(t *testing.T) {
	sb := newSandbox(t, sandbox.Config{Mode: sandbox.Auto, BwrapPath: "/bin/false"})
	b, err := NewBash(BashConfig{Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	avail, reason := b.Available()
	if avail || !strings.Contains(reason, "bubblewrap") {
		t.Errorf("Available() = %v, %q", avail, reason)
	}
	env := newEnv(t)
	if msg := failed(t, call(t, b, env, obj{"command": "echo hi"})); !strings.Contains(msg, "disabled") {
		t.Errorf("result %q", msg)
	}
	if _, err := NewBash(BashConfig{}); err == nil {
		t.Error("a Bash without a sandbox was accepted")
	}
}

// TestBashDropsRoot asserts the probe's checks from inside a real Bash
// call: whoever started Baton (root in CI), the command has no
// capabilities, cannot remount or write the system or the host's sysctls,
// cannot read /etc/shadow, and is not root on the host.
func TestBashDropsRoot(t *testing.T) {
	b := newBash(t, sandbox.Bwrap)
	env := newEnv(t)
	got := ok(t, call(t, b, env, obj{"command": `grep CapEff /proc/self/status
mount -o remount,rw /usr 2>/dev/null && echo REMOUNTED
echo x > /usr/pwned 2>/dev/null && echo WROTE-USR
head -c1 /etc/shadow 2>/dev/null && echo READ-SHADOW
cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern 2>/dev/null && echo WROTE-SYSCTL
echo mine > output/mine
echo done`}))
	if !strings.Contains(got, "CapEff:\t0000000000000000") || !strings.Contains(got, "done") {
		t.Errorf("capabilities kept: %q", got)
	}
	for _, bad := range []string{"REMOUNTED", "WROTE-USR", "READ-SHADOW", "WROTE-SYSCTL"} {
		if strings.Contains(got, bad) {
			t.Errorf("%s: %q", bad, got)
		}
	}
	fi, err := os.Stat(filepath.Join(env.WS.Root(), "output/mine"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid == 0 {
		t.Error("the command ran as root on the host")
	}
	// logs/ stays Baton's: the sandbox's user cannot write it even once
	// it owns the rest of the workspace.
	fi, err = os.Stat(filepath.Join(env.WS.Root(), "logs"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Geteuid() {
		t.Errorf("logs/ owned by %d", uid)
	}
}

// TestBashLimits: a fork bomb, a 3 GiB allocation and a 10 GB write are
// stopped by the limits, and the next call works.
func TestBashLimits(t *testing.T) {
	b := newBash(t, sandbox.Bwrap)
	env := newEnv(t)
	res := call(t, b, env, obj{"command": "for i in $(seq 10000); do sleep 64.5 & done; wait", "timeout_s": 4})
	if !strings.Contains(res.Text, "Resource temporarily unavailable") {
		t.Errorf("forks not refused: %.300q", res.Text)
	}
	assertNoProcess(t, "64.5")
	got := ok(t, call(t, b, env, obj{"command": "dd if=/dev/zero of=/dev/null bs=3G count=1"}))
	if !strings.Contains(got, "memory exhausted") {
		t.Errorf("3 GiB allocation not refused: %q", got)
	}
	got = ok(t, call(t, b, env, obj{"command": "dd if=/dev/zero of=output/big bs=1M seek=1023 count=10240"}))
	if !strings.Contains(got, "[exit code 153]") {
		t.Errorf("10 GB write not stopped: %q", got)
	}
	if got := ok(t, call(t, b, env, obj{"command": "echo next"})); got != "next\n[exit code 0]" {
		t.Errorf("next call: %q", got)
	}
}
