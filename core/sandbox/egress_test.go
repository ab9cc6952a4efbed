package sandbox

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/egress"
)

// TestMain makes this test binary the bridge when it is run with
// egress.BridgeSubcommand, as the baton binary is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == egress.BridgeSubcommand {
		os.Exit(egress.BridgeMain(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

// bridgeBinary is this test binary, which runs the bridge (TestMain).
func bridgeBinary(tb testing.TB) string {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return exe
}

// TestEgress: a command given the egress proxy reaches an allowed host
// through the proxy variables, and nothing without them; the bridge
// passes the command's exit status on.
func TestEgress(t *testing.T) {
	s := requireBwrap(t, Config{Bridge: bridgeBinary(t)})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "nonce-egress") }))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "nonce-other") }))
	defer other.Close()
	allowed := strings.TrimPrefix(srv.URL, "http://")
	rule, err := egress.ParseRule(allowed)
	if err != nil {
		t.Fatal(err)
	}
	p, err := egress.New(egress.Config{Policy: egress.Policy{Allow: []egress.Rule{rule}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	session := p.Session(egress.SessionConfig{Job: egress.Job{ID: 1}})
	defer session.Close()
	ep, err := session.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()

	dir := workspace(t, s)
	run := func(script string) (string, int) {
		t.Helper()
		return shEgress(t, s, dir, script, &Egress{Socket: ep.Socket})
	}
	if got, code := run("curl -sS --max-time 20 " + srv.URL + "/"); code != 0 || got != "nonce-egress" {
		t.Errorf("curl to the allowed server through the proxy: %d %q", code, got)
	}
	if got, _ := run("curl -sS --max-time 20 -o /dev/null -w '%{http_code}' " + other.URL + "/"); got != "403" {
		t.Errorf("curl to a server not allowed: %q, want 403", got)
	}
	if got, code := run("curl -sS --max-time 5 --noproxy '*' " + srv.URL + "/"); code == 0 || strings.Contains(got, "nonce") {
		t.Errorf("curl --noproxy reached the allowed server directly: %d %q", code, got)
	}
	if got, _ := run(`echo "$HTTP_PROXY $https_proxy $ALL_PROXY no_proxy=[$no_proxy]"; [ -e /proc/$$/fd/3 ] && echo "fd 3 open"`); !strings.Contains(got, "http://"+egress.BridgeAddr+" http://"+egress.BridgeAddr+" http://"+egress.BridgeAddr+" no_proxy=[]") ||
		strings.Contains(got, "fd 3") {
		t.Errorf("environment and descriptors inside: %q", got)
	}
	if _, code := run("exit 7"); code != 7 {
		t.Errorf("exit status through the bridge: %d, want 7", code)
	}
	if _, code := run("kill -TERM $$"); code != 128+15 {
		t.Errorf("a command ended by SIGTERM: %d, want 143", code)
	}
}

// TestEgressNeedsBridge: without the bridge binary, a command asking for
// the proxy is refused, not run without it.
func TestEgressNeedsBridge(t *testing.T) {
	s := requireBwrap(t, Config{})
	_, err := s.Command(context.Background(), Spec{Argv: []string{"/bin/true"}, Egress: &Egress{Socket: "/nonexistent"}})
	if err == nil || !strings.Contains(err.Error(), "bridge") {
		t.Errorf("Command with Egress and no bridge: %v", err)
	}
	s = requireBwrap(t, Config{Bridge: bridgeBinary(t), Network: true})
	_, err = s.Command(context.Background(), Spec{Argv: []string{"/bin/true"}, Network: true, Egress: &Egress{Socket: "/nonexistent"}})
	if err == nil {
		t.Error("a command was given the network and the egress proxy")
	}
}

// shEgress runs a bash script in the sandbox over dir with eg and returns
// its output and exit code.
func shEgress(tb testing.TB, s *Sandbox, dir, script string, eg *Egress) (string, int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd, err := s.Command(ctx, Spec{
		Argv: []string{"/bin/bash", "-c", script}, Dir: dir,
		Binds: []Bind{{Path: dir, Writable: true}}, Env: []string{"PATH=" + DefaultPath, "HOME=" + dir},
		Egress: eg,
	})
	if err != nil {
		tb.Fatal(err)
	}
	defer cmd.Close()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run()
	cmd.Kill()
	return out.String(), cmd.ProcessState.ExitCode()
}
