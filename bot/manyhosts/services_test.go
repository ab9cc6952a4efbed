//go:build linux

package manyhosts

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// unavailable skips t, or fails it when the variable require names is 1.
func unavailable(t *testing.T, require, why string) {
	t.Helper()
	if os.Getenv(require) == "1" {
		t.Fatalf("%s (%s=1)", why, require)
	}
	t.Skip(why)
}

// postgres is a PostgreSQL server of the test's own on a host, so that it
// can be restarted without touching anyone else's database.
type postgres struct {
	h    *host
	bin  string // the server's bin directory
	dir  string // its data directory
	port int
	as   string // the user it runs as; "" for the test's own
}

// startPostgres makes a cluster with initdb and starts it on h. As root
// the server runs as the postgres user (it refuses root).
func startPostgres(t *testing.T, h *host) *postgres {
	t.Helper()
	bin := postgresBin()
	if bin == "" {
		unavailable(t, "BATON_REQUIRE_POSTGRES", "no PostgreSQL server binaries (initdb, pg_ctl) on this machine")
	}
	p := &postgres{h: h, bin: bin, port: portOn(t, h, 5432)}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			unavailable(t, "BATON_REQUIRE_POSTGRES", "running as root and no postgres user to run PostgreSQL as")
		}
		p.as = "postgres"
	}
	// The server's user must reach its directory: not under the test's
	// temporary directory, which is the test user's alone.
	dir, err := os.MkdirTemp("", "baton-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p.dir = filepath.Join(dir, "data")
	if p.as != "" {
		u, _ := user.Lookup(p.as)
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		must(t, os.Chown(dir, uid, gid))
	}
	if out, err := p.run("initdb", "-D", p.dir, "-A", "trust", "-U", "postgres", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	// The other hosts connect from the test's network, trusted as the
	// machine's own database trusts loopback.
	hba, err := os.OpenFile(filepath.Join(p.dir, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = hba.WriteString("host all all 0.0.0.0/0 trust\n")
	must(t, errors.Join(err, hba.Close()))
	opts := fmt.Sprintf("-c listen_addresses=%s -c port=%d -c unix_socket_directories=%s -c fsync=off -c max_connections=200",
		h.ip, p.port, dir)
	if out, err := p.run("pg_ctl", "-D", p.dir, "-l", filepath.Join(dir, "server.log"), "-o", opts, "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	t.Cleanup(func() { _ = p.run("pg_ctl", "-D", p.dir, "-m", "immediate", "-w", "stop").Run() })
	return p
}

// postgresBin finds the bin directory of the newest PostgreSQL installed
// (Debian keeps the server's programs off PATH), or "".
func postgresBin() string {
	if path, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(path)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "pg_ctl")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

func (p *postgres) run(prog string, args ...string) *exec.Cmd {
	path := filepath.Join(p.bin, prog)
	if p.as != "" {
		args = append([]string{"-u", p.as, "--", path}, args...)
		path = "runuser"
	}
	return p.h.command(path, args...)
}

// url is the database's URL.
func (p *postgres) url() string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", net.JoinHostPort(p.h.ip, strconv.Itoa(p.port)))
}

// restart stops the server at once (its connections cut, as a crash or a
// failover cuts them) and starts it again.
func (p *postgres) restart(t *testing.T) {
	t.Helper()
	// -l again: without it the new server writes to pg_ctl's output,
	// which would then never close.
	if out, err := p.run("pg_ctl", "-D", p.dir, "-l", filepath.Join(filepath.Dir(p.dir), "server.log"), "-m", "fast", "-w", "-t", "60", "restart").CombinedOutput(); err != nil {
		t.Errorf("pg_ctl restart: %v\n%s", err, out)
	}
}

// connect opens a connection for the test's own queries.
func (p *postgres) connect(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, p.url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// startRedis starts a redis-server on h, stopped when t ends.
func startRedis(t *testing.T, h *host) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unavailable(t, "BATON_REQUIRE_REDIS", "redis-server is not on PATH")
	}
	port := portOn(t, h, 6379)
	cmd := h.command(bin, "--bind", h.ip, "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--protected-mode", "no")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := net.JoinHostPort(h.ip, strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return "redis://" + addr + "/0"
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// portOn returns a port free on h: usual, the service's usual port, on an
// isolated host, whose namespace has nothing else listening; else one the
// kernel hands out.
func portOn(t *testing.T, h *host, usual int) int {
	t.Helper()
	if h.ns != "" {
		return usual
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is one Baton process of the test.
type proc struct {
	name string
	h    *host
	args []string
	env  []string
	log  string

	cmd    *exec.Cmd
	exited chan struct{}
}

// start starts p (again), its output appended to its log file.
func (p *proc) start(t *testing.T, bin string) {
	t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = p.h.command(bin, p.args...)
	p.cmd.Env = p.env
	// A test binary that dies (a timeout's panic) takes its Baton
	// processes with it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", p.name, err)
	}
	p.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		f.Close()
		close(exited)
	}(p.cmd, p.exited)
}

// kill sends SIGKILL and waits for p to go.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop asks p to stop (SIGTERM), killing it after 30 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

// tail is the end of p's log, for a failure's report.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return strings.TrimSpace(string(b))
}
