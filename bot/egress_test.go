package main

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/sandbox/sandboxtest"
	"github.com/baton-bot/baton/core/sqlite"
)

// needBwrap skips a test that needs bubblewrap where it is not installed,
// unless BATON_REQUIRE_BWRAP is set.
func needBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("BATON_REQUIRE_BWRAP") != "" {
			t.Fatalf("bubblewrap is required (BATON_REQUIRE_BWRAP is set): %v", err)
		}
		t.Skip("bubblewrap is not installed")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
}

// hostServer is a local HTTP server on the host answering its nonce and
// counting its requests; it returns its host:port.
func hostServer(t *testing.T, nonce string) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, nonce)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), &n
}

// egressNewcomer is a newcomer whose Bash runs in bubblewrap behind the
// egress proxy that section configures.
func egressNewcomer(t *testing.T, section string) *newcomer {
	t.Helper()
	needBwrap(t)
	n := newNewcomer(t)
	n.env["BATON_DATA_DIR"] = sandboxtest.Dir(t) // the sandbox's user must reach the workspaces when the tests run as root
	n.conf = writeConfig(t, "log:\n  level: warn\ntools:\n  bash:\n    sandbox: bwrap\n    timeout: 60s\n"+section)
	return n
}

func bashStep(cmd string) llmtest.Step {
	return llmtest.Call("Bash", fmt.Sprintf(`{"command":%q,"timeout_s":60}`, cmd))
}

// results returns the tool results of the model's requests, in order.
func (n *newcomer) results() []string { return toolResults(n.srv) }

// toolResults returns the tool results of srv's requests, in order.
func toolResults(srv *llmtest.Server) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range srv.Requests() {
		for _, m := range r.Messages {
			if m.Role == "tool" && !seen[m.ToolCallID] {
				seen[m.ToolCallID] = true
				out = append(out, m.Text())
			}
		}
	}
	return out
}

// events returns the details of task's jobs' events of kind, oldest first.
func (n *newcomer) events(task, kind string) []string {
	n.t.Helper()
	id, _ := strconv.ParseInt(task, 10, 64)
	return jobEvents(n.t, n.env["BATON_DATA_DIR"], id, kind)
}

// jobEvents returns the details of the events of kind of task's jobs, in
// the store under data (which a running Baton may hold open), oldest
// first.
func jobEvents(t testing.TB, data string, task int64, kind string) []string {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(data, "baton.db"), sqlite.Options{WorkspaceRoot: filepath.Join(data, "workspaces")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	jobs, err := st.Jobs(context.Background(), core.JobFilter{TaskID: task})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(jobs) - 1; i >= 0; i-- {
		evs, err := st.Events(context.Background(), jobs[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Kind == kind {
				out = append(out, e.Detail)
			}
		}
	}
	return out
}

// TestEgressFromBash: the scripted model drives Bash in bubblewrap with the
// egress proxy: curl reaches a local server listed by its literal address
// and gets its nonce; a second local server, not listed, is refused (a job
// event) and gets nothing, not even the workspace POSTed to it; curl
// --noproxy finds no route; and neither a name resolving to the loopback
// nor a direct connection reaches the model endpoint or Redis (a stand-in,
// and 127.0.0.1:6379).
func TestEgressFromBash(t *testing.T) {
	allowed, _ := hostServer(t, "nonce-allowed-5e1")
	other, otherHits := hostServer(t, "nonce-other-9b2")
	redisPort, redisDials := sandboxtest.Listen(t, "127.0.0.1")
	n := egressNewcomer(t, "egress:\n  allow:\n    - "+allowed+"\n    - localhost\n")
	model := strings.TrimPrefix(strings.TrimSuffix(n.srv.URL(), "/v1"), "http://")
	_, modelPort, _ := strings.Cut(model, ":")
	n.srv.Script(
		bashStep("echo secret-workspace-file > notes.txt; curl -sS --max-time 20 http://"+allowed+"/"),
		bashStep("curl -sS --max-time 20 -w ' status=%{http_code}' --data-binary @notes.txt http://"+other+"/"),
		bashStep("curl -sS --max-time 5 --noproxy '*' http://"+allowed+"/ || echo direct-failed"),
		bashStep("curl -sS --max-time 20 -w ' status=%{http_code}' http://localhost:"+modelPort+"/v1/models; "+
			"curl -sS --max-time 20 -w ' status=%{http_code}' http://localhost:"+redisPort+"/"),
		bashStep("(exec 3<>/dev/tcp/127.0.0.1/"+redisPort+") 2>/dev/null && echo REACHED-REDIS; "+
			"(exec 3<>/dev/tcp/127.0.0.1/"+modelPort+") 2>/dev/null && echo REACHED-MODEL; "+
			// The machine's own Redis, where it runs one (CI's does).
			"(exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null && echo REACHED-6379; echo probed"),
		llmtest.Transition("COMPLETE", "Fetched."),
	)
	code, stdout, stderr := n.run("fetch the page")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	res := n.results()
	if len(res) != 5 {
		t.Fatalf("%d tool results, want 5: %q", len(res), res)
	}
	if !strings.Contains(res[0], "nonce-allowed-5e1") {
		t.Errorf("curl to the allowed server: %q", res[0])
	}
	if !strings.Contains(res[1], "status=403") || !strings.Contains(res[1], "no egress.allow entry covers "+other) || otherHits.Load() != 0 {
		t.Errorf("curl to a server not listed: %q (its requests: %d)", res[1], otherHits.Load())
	}
	if !strings.Contains(res[2], "direct-failed") || strings.Contains(res[2], "nonce") {
		t.Errorf("curl --noproxy: %q", res[2])
	}
	if strings.Count(res[3], "status=403") != 2 || strings.Count(res[3], "localhost resolves to 127.0.0.1") != 2 {
		t.Errorf("the model endpoint and Redis by name: %q", res[3])
	}
	if strings.Contains(res[4], "REACHED") || !strings.Contains(res[4], "probed") || redisDials() != 0 {
		t.Errorf("direct connections: %q (Redis dialled %d times)", res[4], redisDials())
	}
	task, _ := workspaceOf(t, stderr)
	evs := n.events(task, "egress")
	if len(evs) != 4 || !strings.HasPrefix(evs[0], "allowed GET "+allowed+" (egress.allow[0])") ||
		!strings.HasPrefix(evs[1], "denied POST "+other+" (egress.default)") ||
		!strings.HasPrefix(evs[2], "denied GET localhost:"+modelPort+" (egress.allow[1]): localhost resolves to 127.0.0.1") {
		t.Errorf("egress events:\n%s", strings.Join(evs, "\n"))
	}
}

// TestEgressAskFromBash: with egress.default ask, the first connection to
// an unlisted host refuses it for now and leaves the job waiting for an
// approval of that host; approved (baton run --task N --approve), the
// command run again gets through; denied, Bash's output says so cleanly.
func TestEgressAskFromBash(t *testing.T) {
	host, _ := hostServer(t, "nonce-asked-71c")
	// An entry naming the loopback address (at another port) lets it be
	// asked about at all.
	n := egressNewcomer(t, "egress:\n  default: ask\n  allow: [\"127.0.0.1:1\"]\n")
	curl := bashStep("curl -sS --max-time 20 http://" + host + "/")
	for _, verdict := range []string{"--approve", "--deny"} {
		n.srv.Script(curl)
		code, stdout, stderr := n.run("fetch the page")
		if code != 3 {
			t.Fatalf("exit %d, want 3 (waiting for approval)\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
		task := regexp.MustCompile(`task #(\d+)`).FindStringSubmatch(stderr)[1]
		if !regexp.MustCompile(`^approval #\d+, task #`+task+`: egress \(egress\.default\)\n`).MatchString(stdout) || !strings.Contains(stdout, "connect to "+host) {
			t.Errorf("stdout does not show the approval of the host:\n%s", stdout)
		}
		n.srv.Script(curl, llmtest.Transition("COMPLETE", "done"))
		args := []string{"--task", task, verdict}
		if verdict == "--deny" {
			args = append(args, "--reason", "not this one")
		}
		if code, stdout, stderr := n.run(args...); code != 0 {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", verdict, code, stdout, stderr)
		}
		got := n.results()
		asked, retried := got[len(got)-2], got[len(got)-1]
		if !strings.Contains(asked, "needs a person's approval") || strings.Contains(asked, "nonce") {
			t.Errorf("the first call's result: %q", asked)
		}
		switch verdict {
		case "--approve":
			if !strings.Contains(retried, "nonce-asked-71c") || !n.told("approved reaching "+host) {
				t.Errorf("after approval, the command run again: %q", retried)
			}
		default:
			if strings.Contains(retried, "nonce") || !strings.Contains(retried, "a person denied reaching "+host) {
				t.Errorf("after a denial, the command run again: %q", retried)
			}
		}
		evs := n.events(task, "egress")
		if len(evs) != 2 || !strings.HasPrefix(evs[0], "asked GET "+host) {
			t.Errorf("egress events:\n%s", strings.Join(evs, "\n"))
		}
	}
}

// TestEgressConfigErrors: an entry that does not parse stops Baton (exit
// 2) naming it, with the file and line.
func TestEgressConfigErrors(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{"egress:\n  allow:\n    - github.com\n    - https://github.com\n", `:4: egress.allow[1]: "https://github.com" is not a host`},
		{"egress:\n  deny: [\"pypi.org:99999\"]\n", "egress.deny[0]: \"pypi.org:99999\": port"},
		{"egress:\n  allow:\n    - host: git*hub.com\n", "egress.allow[0]"},
		{"egress:\n  allow:\n    - host: github.com\n      channels: [C123]\n", "egress.allow[0].channels[0]"},
		{"egress:\n  allow:\n    - host: github.com\n      piece: [chat]\n", "egress.allow[0].piece: unknown key"},
		{"egress:\n  default: allow\n", "egress.default: must be one of deny | ask"},
		{"egress:\n  allow: [github.com]\n  max_bytes: 0\n", "egress.max_bytes: must be positive"},
		{"egress:\n  credentials:\n    - host: api.github.com\n      header: Bearer abc\n", "egress.credentials[0].header: must be Name: value"},
		{"egress:\n  credentials:\n    - host: api.github.com\n      header: \"Authorization: Bearer ${BATON_TEST_UNSET_TOKEN}\"\n", "egress.credentials[0].header: refers to ${BATON_TEST_UNSET_TOKEN}, which is not set"},
		{"egress:\n  credentials:\n    - host: api.github.com\n", "egress.credentials[0]: needs a header"},
		{"egress:\n  credentials:\n    - host: https://api.github.com\n      username: u\n      password: p\n", "egress.credentials[0].host"},
		{"egress:\n  ca_cert_file: ca.pem\n", "egress.ca_key_file: egress.ca_cert_file and egress.ca_key_file go together"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			conf := writeConfig(t, tc.config)
			code, _, stderr := runMain(t, map[string]string{"BATON_DATA_DIR": t.TempDir()}, "config", "--config", conf)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant 2 and %q", code, stderr, tc.want)
			}
		})
	}
}

// TestEgressCredentialFromBash: against a local HTTPS server of its own
// test CA (egress.upstream_ca_file), curl in the sandbox arrives with the
// configured Authorization header, while the sandbox's environment, every
// process's environment and command line, and every file it can read
// (the host's read-only system directories aside) hold no trace of the
// token; nor do the model's requests or Baton's output.
func TestEgressCredentialFromBash(t *testing.T) {
	const token = "tok-7f3a9c0e5b2d4186"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "auth-missing", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "auth-ok-4d2")
	}))
	t.Cleanup(srv.Close)
	hostport := strings.TrimPrefix(srv.URL, "https://")
	caFile := filepath.Join(t.TempDir(), "upstream-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	n := egressNewcomer(t, fmt.Sprintf("egress:\n  allow: [%q]\n  upstream_ca_file: %s\n  credentials:\n"+
		"    - host: %q\n      header: \"Authorization: Bearer ${EGRESS_TEST_TOKEN}\"\n", hostport, caFile, hostport))
	n.env["EGRESS_TEST_TOKEN"] = token
	// The pattern is put together by printf, so that no command line
	// holds the token.
	pattern := `printf '%s%s\n' ` + token[:8] + ` ` + token[8:]
	n.srv.Script(
		bashStep("curl -sS --max-time 20 https://"+hostport+"/; echo; curl -sS --max-time 20 -o /dev/null -w 'plain=%{http_code}' http://"+hostport+"/"),
		// The scan reads every file the sandbox shows: on a busy
		// machine that took over a minute once, hence its own timeout.
		llmtest.Call("Bash", fmt.Sprintf(`{"command":%q,"timeout_s":300}`, pattern+" | grep -rlsI --devices=skip --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev --exclude-dir=usr --exclude-dir=opt -f - /; "+
			pattern+" | grep -las -f - /proc/[0-9]*/environ /proc/[0-9]*/cmdline; "+
			"env | grep -c -f <("+pattern+"); echo \"ca=$SSL_CERT_FILE\"; echo scanned")),
		llmtest.Transition("COMPLETE", "Fetched."),
	)
	code, stdout, stderr := n.run("fetch the private page")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	res := n.results()
	if len(res) != 2 {
		t.Fatalf("%d tool results, want 2: %q", len(res), res)
	}
	if !strings.Contains(res[0], "auth-ok-4d2") || !strings.Contains(res[0], "plain=") || strings.Contains(res[0], "plain=200") {
		t.Errorf("curl with the credential added on the way: %q", res[0])
	}
	if !strings.HasPrefix(res[1], "0\nca=/run/baton/ca-bundle.pem\nscanned\n") {
		t.Errorf("the sandbox holds a trace of the token: %q", res[1])
	}
	for _, r := range n.srv.Requests() {
		for _, m := range r.Messages {
			if strings.Contains(m.Text(), token) {
				t.Errorf("the model was sent the token: %q", m.Text())
			}
		}
	}
	if strings.Contains(stdout+stderr, token) {
		t.Errorf("Baton's output holds the token:\n%s\n%s", stdout, stderr)
	}
	task, ws := workspaceOf(t, stderr)
	if evs := n.events(task, "egress"); len(evs) == 0 || !strings.HasPrefix(evs[0], "allowed CONNECT "+hostport) {
		t.Errorf("egress events: %q", evs)
	}
	filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), token) {
				t.Errorf("%s holds the token", p)
			}
		}
		return nil
	})
}

// TestEgressDoctor: baton doctor says whether Bash's commands go through
// the proxy.
func TestEgressDoctor(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Egress.Allow = []EgressEntry{{Host: "pypi.org:443"}}
	cfg.Egress.Credentials = []EgressCredential{{Host: "api.github.com", Header: "Authorization: Bearer x"}}
	if c := egressCheck(cfg, nil, errors.New("no bwrap")); c.Status != statusWarn || !strings.Contains(c.Detail, "no command uses the proxy") {
		t.Errorf("without a sandbox: %+v", c)
	}
	needBwrap(t)
	cfg.DataDir = sandboxtest.Dir(t)
	sb, err := openSandbox(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if c := egressCheck(cfg, sb, nil); c.Status != statusOK || !strings.Contains(c.Detail, "1 allow and 0 deny entries, default deny; credentials for 1 hosts") {
		t.Errorf("with the sandbox: %+v", c)
	}
}

// TestReadmeEgressExample: the README's worked example of network access
// is a configuration Baton takes as the README says: the package index
// and the code host allowed, credentials for the code host, nothing else.
func TestReadmeEgressExample(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)A worked example: let the agent install Python packages.*?```yaml\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README has no worked example of egress")
	}
	cfg, err := LoadConfig(writeConfig(t, string(m[1])), mapEnv(map[string]string{"GITHUB_TOKEN": "ghp-example"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	pol, errs := cfg.Egress.policy()
	creds, credErrs := cfg.Egress.credentials()
	if len(errs)+len(credErrs) > 0 || pol.Ask || len(pol.Allow) != 5 || len(pol.Deny) != 0 || len(creds) != 2 {
		t.Fatalf("policy %+v (%v), credentials %d (%v)", pol, errs, len(creds), credErrs)
	}
	for _, c := range creds {
		if c.Header != "Authorization" || !strings.Contains(c.Value, "ghp-example") && c.Value != "Basic "+base64.StdEncoding.EncodeToString([]byte("x-access-token:ghp-example")) {
			t.Errorf("credential %s: %s %q", c.Match, c.Header, c.Value)
		}
	}
}
