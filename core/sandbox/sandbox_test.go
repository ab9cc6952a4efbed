package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/sandbox/sandboxtest"
)

// requireBwrap builds a Bwrap sandbox; it skips when bubblewrap does not
// work here unless BATON_REQUIRE_BWRAP=1.
func requireBwrap(tb testing.TB, cfg Config) *Sandbox {
	tb.Helper()
	cfg.Mode = Bwrap
	s, err := New(context.Background(), cfg)
	if err != nil {
		if os.Getenv("BATON_REQUIRE_BWRAP") != "1" {
			tb.Skipf("bubblewrap does not work here (set BATON_REQUIRE_BWRAP=1 to fail instead): %v", err)
		}
		tb.Fatal(err)
	}
	return s
}

// workspace makes a directory the sandbox's user may write.
func workspace(tb testing.TB, s *Sandbox) string {
	tb.Helper()
	dir := sandboxtest.Dir(tb)
	if err := s.Own(dir); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// sh runs a bash script in the sandbox over dir and returns its combined
// output and exit code.
func sh(tb testing.TB, s *Sandbox, dir, script string, network bool, lim *Limits) (string, int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd, err := s.Command(ctx, Spec{
		Argv: []string{"/bin/bash", "-c", script}, Dir: dir,
		Binds: []Bind{{Path: dir, Writable: true}}, Env: []string{"PATH=" + DefaultPath, "HOME=" + dir},
		Network: network, Limits: lim,
	})
	if err != nil {
		tb.Fatal(err)
	}
	defer cmd.Close()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	cmd.Kill()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		tb.Fatalf("run: %v: %s", err, out.String())
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// TestInside checks the probe's guarantees from inside a real command, as
// whoever runs the test (root in CI; TestAsNobody runs it as nobody).
func TestInside(t *testing.T) {
	s := requireBwrap(t, Config{})
	dir := workspace(t, s)
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("secret-outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name, script string
		want         string
	}{
		{"no capabilities", `grep CapEff /proc/self/status`, "CapEff:\t0000000000000000"},
		{"remount refused", `mount -o remount,rw /usr || echo refused`, "refused"},
		{"/usr read-only", `echo x > /usr/pwned || echo refused`, "refused"},
		{"/etc/shadow unreadable", `[ -e /etc/shadow ] || { echo refused; exit; }; head -c1 /etc/shadow || echo refused`, "refused"},
		{"core_pattern read-only", `cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern || echo refused`, "refused"},
		{"no new user namespaces", `unshare -U true || echo refused`, "refused"},
		{"host files out of sight", `cat ` + outside + ` || echo refused`, "refused"},
		{"no network", `ip -o link | grep -v ': lo:' | wc -l`, "0\n"},
		{"workspace writable", `echo w > w && cat w`, "w\n"},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			got, _ := sh(t, s, dir, c.script, false, nil)
			if !strings.Contains(got, c.want) {
				t.Errorf("got %q, want it to contain %q", got, c.want)
			}
			if strings.Contains(got, "secret-outside") {
				t.Errorf("read a host file: %q", got)
			}
		})
	}
	if _, err := os.Stat("/usr/pwned"); err == nil {
		t.Error("wrote /usr/pwned on the host")
	}
	// The owner of a file the command wrote is its user on the host.
	fi, err := os.Stat(filepath.Join(dir, "w"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid == 0 {
		t.Error("the command ran as root on the host")
	}
}

// TestLimits runs the bad inputs: a fork bomb, a 3 GiB allocation and a
// write past the file-size limit, with the default limits.
func TestLimits(t *testing.T) {
	s := requireBwrap(t, Config{})
	dir := workspace(t, s)
	t.Run("10,000 processes", func(t *testing.T) {
		var seen int
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				seen = max(seen, countProcs("61.25"))
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
		defer cancel()
		cmd, err := s.Command(ctx, Spec{Argv: []string{"/bin/bash", "-c", "for i in $(seq 10000); do sleep 61.25 & done; wait"},
			Dir: dir, Binds: []Bind{{Path: dir, Writable: true}}, Env: []string{"PATH=" + DefaultPath}})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Run() //nolint:errcheck // killed at the deadline
		cmd.Kill()
		cmd.Close()
		close(done)
		wg.Wait()
		if !strings.Contains(out.String(), "Resource temporarily unavailable") {
			t.Errorf("forks were not refused: %q", clip(out.Bytes()))
		}
		if lim := DefaultLimits().Processes; seen > lim {
			t.Errorf("saw %d processes, limit %d", seen, lim)
		}
		waitNoProcs(t, "61.25")
		if got, code := sh(t, s, dir, "echo next", false, nil); got != "next\n" || code != 0 {
			t.Errorf("next command: %q %d", got, code)
		}
	})
	t.Run("3 GiB allocation", func(t *testing.T) {
		got, code := sh(t, s, dir, "dd if=/dev/zero of=/dev/null bs=3G count=1", false, nil)
		if code == 0 || !strings.Contains(got, "memory exhausted") {
			t.Errorf("allocation not refused: %d %q", code, got)
		}
	})
	t.Run("10 GB file", func(t *testing.T) {
		// Writes at the 1 GiB mark: refused at the limit without filling the disk.
		got, code := sh(t, s, dir, "dd if=/dev/zero of=big bs=1M seek=1023 count=10240 2>&1; echo exit $?; truncate -s 10G sparse; ls -la", false, nil)
		if code != 0 || !strings.Contains(got, "exit 153") { // 128 + SIGXFSZ
			t.Errorf("write not stopped by SIGXFSZ: %q", got)
		}
		if fi, err := os.Stat(filepath.Join(dir, "big")); err != nil || fi.Size() > DefaultLimits().FileBytes {
			t.Errorf("big: %v %v", fi, err)
		}
		if fi, err := os.Stat(filepath.Join(dir, "sparse")); err == nil && fi.Size() > DefaultLimits().FileBytes {
			t.Errorf("a sparse file of %d bytes was made past the limit", fi.Size())
		}
	})
}

// TestConcurrentProcessCounts: two sandboxes running at once do not share
// their process count (RLIMIT_NPROC counts per user namespace).
func TestConcurrentProcessCounts(t *testing.T) {
	s := requireBwrap(t, Config{})
	lim := DefaultLimits()
	lim.Processes = 40
	var wg sync.WaitGroup
	outs := make([]string, 2)
	dirs := []string{workspace(t, s), workspace(t, s)}
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 30 sleepers each: 60 together, over one limit of 40.
			outs[i], _ = sh(t, s, dirs[i], `for i in $(seq 30); do sleep 62.5 & done; echo started > ready; `+
				`while [ ! -e release ]; do sleep 0.05; done; echo ok`, false, &lim)
		}()
	}
	for _, d := range dirs {
		waitFile(t, filepath.Join(d, "ready"))
	}
	for _, d := range dirs {
		os.WriteFile(filepath.Join(d, "release"), nil, 0o644)
	}
	wg.Wait()
	for i, out := range outs {
		if out != "ok\n" {
			t.Errorf("sandbox %d: %q", i, out)
		}
	}
}

// TestUnreachableWorkspaces: a data_dir the sandbox's user cannot reach
// (under /root, mode 0700) disables the sandbox under auto, naming the
// directory and the fix, and stops bwrap. Only root can start bubblewrap
// as another user.
func TestUnreachableWorkspaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	requireBwrap(t, Config{})
	private := filepath.Join(sandboxtest.Dir(t), "root")
	if err := os.Mkdir(private, 0o700); err != nil { // as /root
		t.Fatal(err)
	}
	ws := filepath.Join(private, "data", "workspaces")
	s, err := New(context.Background(), Config{Mode: Auto, Workspaces: ws})
	if err != nil {
		t.Fatal(err)
	}
	ok, why := s.Available()
	if ok || !strings.Contains(why, private+" is not searchable") || !strings.Contains(why, "move data_dir") {
		t.Errorf("Available() = %v, %q", ok, why)
	}
	if _, err := s.Command(context.Background(), Spec{Argv: []string{"/bin/true"}}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Command on an unavailable sandbox: %v", err)
	}
	if _, err := New(context.Background(), Config{Mode: Bwrap, Workspaces: ws}); err == nil || !strings.Contains(err.Error(), "tools.sandbox.uid") {
		t.Errorf("bwrap with unreachable workspaces: %v", err)
	}
}

func TestOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	s := requireBwrap(t, Config{})
	dir := sandboxtest.Dir(t)
	for _, d := range []string{"input", "logs/bash"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "input/a"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "logs/l"), nil, 0o644)
	host := filepath.Join(t.TempDir(), "host-file")
	os.WriteFile(host, nil, 0o644)
	os.Link(host, filepath.Join(dir, "input/hardlink"))
	os.Symlink(host, filepath.Join(dir, "input/symlink"))
	if err := s.Own(dir, "logs"); err != nil {
		t.Fatal(err)
	}
	owner := func(p string) uint32 {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Uid
	}
	for p, want := range map[string]uint32{
		dir: NobodyID, dir + "/input": NobodyID, dir + "/input/a": NobodyID, dir + "/input/symlink": NobodyID,
		dir + "/logs": 0, dir + "/logs/l": 0, host: 0,
	} {
		if got := owner(p); got != want {
			t.Errorf("%s owned by %d, want %d", p, got, want)
		}
	}
}

func TestFindCgroup(t *testing.T) {
	tree := func(t *testing.T, cgroup, mountinfo string, files map[string]string) string {
		root := t.TempDir()
		files["proc/self/cgroup"] = cgroup
		files["proc/self/mountinfo"] = mountinfo
		for p, v := range files {
			os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
			if err := os.WriteFile(filepath.Join(root, p), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	hybrid := "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
	unified := "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"
	cases := []struct {
		name      string
		cgroup    string
		mountinfo string
		files     map[string]string
		wantDir   string // relative to the tree; "" when an error is wanted
		wantErr   string
	}{
		{"v1 only", "4:memory:/x\n", hybrid, map[string]string{}, "", "no cgroup v2"},
		{"hybrid", "4:memory:/x\n0::/\n", hybrid, map[string]string{"sys/fs/cgroup/unified/cgroup.controllers": "\n"}, "", "no memory controller"},
		{"unified without pids", "0::/svc\n", unified, map[string]string{"sys/fs/cgroup/svc/cgroup.controllers": "cpu memory\n"}, "", "no pids controller"},
		{"delegated", "0::/svc\n", unified, map[string]string{"sys/fs/cgroup/svc/cgroup.controllers": "cpu memory pids\n"}, "sys/fs/cgroup/svc", ""},
		{"namespace root", "0::/\n", unified, map[string]string{"sys/fs/cgroup/cgroup.controllers": "memory pids\n"}, "sys/fs/cgroup", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := tree(t, c.cgroup, c.mountinfo, c.files)
			dir, _, err := findCgroup(root)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Errorf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || dir != filepath.Join(root, c.wantDir) {
				t.Errorf("findCgroup = %q, %v; want %q", dir, err, c.wantDir)
			}
		})
	}
	// This host: whatever it says, it says it without failing.
	if _, _, err := findCgroup("/"); err != nil {
		t.Logf("this host: %v", err)
	}
}

func TestNetworkDenied(t *testing.T) {
	s := requireBwrap(t, Config{})
	if s.Network() == nil {
		t.Fatal("network granted without Config.Network")
	}
	if _, err := s.Command(context.Background(), Spec{Argv: []string{"/bin/true"}, Network: true}); err == nil {
		t.Fatal("a command was given the network without Config.Network")
	}
	port := listenPort(t, "127.0.0.1")
	dir := workspace(t, s)
	got, _ := sh(t, s, dir, dial("127.0.0.1", port), false, nil)
	if strings.Contains(got, "REACHED") {
		t.Errorf("reached the host's loopback without network: %q", got)
	}
}

// TestNetworkWithoutPasta: network allowed but pasta missing: commands run,
// the network is refused with the reason, never the host's.
func TestNetworkWithoutPasta(t *testing.T) {
	s := requireBwrap(t, Config{Network: true, PastaPath: "/nonexistent/pasta"})
	if ok, why := s.Available(); !ok {
		t.Fatal(why)
	}
	if err := s.Network(); err == nil || !strings.Contains(err.Error(), "pasta (passt) not found") {
		t.Errorf("Network() = %v", err)
	}
	if _, err := s.Command(context.Background(), Spec{Argv: []string{"/bin/true"}, Network: true}); err == nil {
		t.Error("a command was given the network without pasta")
	}
}

// TestNetworkGranted: with the network, the host's loopback and private
// addresses stay unreachable. pasta needs /dev/net/tun usable by the
// sandbox's user; where it is not (mode 0600), root reruns the test in a
// private mount namespace with a usable node bound over it.
func TestNetworkGranted(t *testing.T) {
	requireBwrap(t, Config{})
	if os.Getenv("BATON_SANDBOX_TUN") == "" && os.Geteuid() == 0 && !tunOpenFor(NobodyID) {
		reexec(t, "^TestNetworkGranted$", withTun)
		return
	}
	s := requireBwrap(t, Config{Network: true})
	if err := s.Network(); err != nil {
		if os.Getenv("BATON_SANDBOX_TUN") == "" && os.Getenv("BATON_REQUIRE_BWRAP") != "1" {
			t.Skipf("pasta does not work here: %v", err)
		}
		t.Fatal(err)
	}
	dir := workspace(t, s)
	targets := []string{"127.0.0.1"}
	if addr := os.Getenv("BATON_SANDBOX_PRIVATE"); addr != "" {
		targets = append(targets, addr)
	}
	for _, host := range targets {
		port := os.Getenv("BATON_SANDBOX_PRIVATE_PORT")
		if host == "127.0.0.1" {
			port = listenPort(t, host)
		}
		got, _ := sh(t, s, dir, dial(host, port), true, nil)
		if strings.Contains(got, "REACHED") || !strings.Contains(got, "DONE") {
			t.Errorf("%s:%s from a sandbox with network: %q", host, port, got)
		}
	}
	got, _ := sh(t, s, dir, "ip -4 route show default", true, nil)
	if !strings.Contains(got, "default via") {
		t.Errorf("no default route with the network granted: %q", got)
	}
}

// The reruns of TestNetworkGranted.
const (
	withTun = 1 << iota
	asNobody
)

// reexec runs the tests matching run in a copy of this test binary: in a
// private mount namespace with a usable /dev/net/tun (withTun: also a
// private address listening in a network namespace of its own), and as
// nobody (asNobody).
func reexec(t *testing.T, run string, how int) {
	t.Helper()
	bin := copyBinary(t)
	env := append(os.Environ(), "BATON_SANDBOX_TUN=1", "TMPDIR=/tmp", "HOME=/tmp")
	argv := []string{bin, "-test.run", run, "-test.v"}
	if how&asNobody != 0 {
		argv = append([]string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"}, argv...)
		env = append(env, "BATON_SANDBOX_AS=nobody")
	}
	if how&withTun != 0 {
		node := filepath.Join(filepath.Dir(bin), "tun")
		if err := syscall.Mknod(node, syscall.S_IFCHR|0o666, int(10<<8|200)); err != nil {
			t.Skipf("cannot make a tun node: %v", err)
		}
		os.Chmod(node, 0o666)
		addr, port := privateListener(t)
		env = append(env, "BATON_SANDBOX_PRIVATE="+addr, "BATON_SANDBOX_PRIVATE_PORT="+port)
		argv = append([]string{"unshare", "-m", "--propagation", "private", "--", "sh", "-c",
			`mount --bind "$0" /dev/net/tun && exec "$@"`, node}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !bytes.Contains(out, []byte("\nPASS")) {
		t.Fatalf("rerun %v: %v", argv, err)
	}
	if bytes.Contains(out, []byte("--- SKIP")) {
		t.Errorf("the rerun skipped")
	}
}

// copyBinary copies the test binary where nobody can run it.
func copyBinary(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "baton-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, "sandbox.test")
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	return bin
}

// privateListener starts a TCP listener on a private address inside a
// network namespace of its own, joined to the host by a veth pair: an
// address the host reaches but a sandbox must not. It returns "" when
// that cannot be set up here.
func privateListener(t *testing.T) (addr, port string) {
	t.Helper()
	n := strconv.Itoa(os.Getpid() % 200)
	ns, host, peer := "baton-test-"+n, "btnh"+n, "btnp"+n
	hostIP, nsIP := "10.213."+n+".1", "10.213."+n+".2"
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
		return nil
	}
	if err := ip("netns", "add", ns); err != nil {
		t.Logf("no private listener: %v", err)
		return "", ""
	}
	t.Cleanup(func() { ip("netns", "del", ns) })
	for _, args := range [][]string{
		{"link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns},
		{"addr", "add", hostIP + "/30", "dev", host},
		{"link", "set", host, "up"},
		{"-n", ns, "addr", "add", nsIP + "/30", "dev", peer},
		{"-n", ns, "link", "set", peer, "up"},
	} {
		if err := ip(args...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { ip("link", "del", host) })
	srv := exec.Command("ip", "netns", "exec", ns, "socat", "TCP-LISTEN:7631,bind="+nsIP+",fork,reuseaddr", "SYSTEM:echo hi")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	// The host reaches it: the sandbox's refusal is the sandbox's doing.
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", nsIP+":7631", time.Second)
		if err == nil {
			c.Close()
			break
		}
		if i == 100 {
			t.Fatalf("the private listener does not answer the host: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nsIP, "7631"
}

// tunOpenFor reports whether /dev/net/tun's mode lets uid open it.
func tunOpenFor(uid int) bool {
	fi, err := os.Stat("/dev/net/tun")
	if err != nil {
		return false
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) == uid {
		return fi.Mode().Perm()&0o600 == 0o600
	}
	return fi.Mode().Perm()&0o006 == 0o006
}

// TestAsNobody reruns the sandbox's own checks as an ordinary user.
func TestAsNobody(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already an ordinary user, or cannot become one")
	}
	requireBwrap(t, Config{})
	reexec(t, "^(TestInside|TestLimits|TestConcurrentProcessCounts|TestNetworkDenied)$", asNobody)
	if !tunOpenFor(NobodyID) {
		reexec(t, "^TestNetworkGranted$", asNobody|withTun)
	}
}

func dial(host, port string) string {
	return `if timeout 5 bash -c 'exec 3<>/dev/tcp/` + host + `/` + port + `'; then echo REACHED; fi; echo DONE`
}

func waitFile(tb testing.TB, p string) {
	tb.Helper()
	for range 3000 {
		if _, err := os.Stat(p); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("%s never appeared", p)
}

// countProcs counts the live processes running "sleep arg", as the host
// sees them.
func countProcs(arg string) int {
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmd, err := os.ReadFile(d + "/cmdline")
		if err == nil && bytes.Equal(cmd, []byte("sleep\x00"+arg+"\x00")) {
			n++
		}
	}
	return n
}

func waitNoProcs(tb testing.TB, arg string) {
	tb.Helper()
	for range 1000 {
		if countProcs(arg) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Errorf("processes running %q survived", arg)
}

// listenPort listens on host and returns the port.
func listenPort(t *testing.T, host string) string {
	port, _ := sandboxtest.Listen(t, host)
	return port
}
