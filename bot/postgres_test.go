package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/postgres/pgtest"
)

// postgresURL returns a URL of the machine's PostgreSQL whose connections
// use a schema of this test's own, dropped at its end. Without a server it
// skips, or fails with BATON_REQUIRE_POSTGRES=1.
func postgresURL(t *testing.T) string {
	t.Helper()
	return pgtest.URL(t)
}

// TestRunOnPostgres: the README's one-job quickstart with DATABASE_URL on
// PostgreSQL, end to end; the job is in PostgreSQL, not in a SQLite file.
func TestRunOnPostgres(t *testing.T) {
	dbURL := postgresURL(t)
	n := newNewcomer(t)
	n.env["DATABASE_URL"] = dbURL
	n.srv.Script(
		llmtest.Call("Write", `{"path":"output/haiku.txt","content":"queues hum at night"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Wrote output/haiku.txt."}`),
	)
	code, stdout, stderr := n.run("Write a haiku about job queues to output/haiku.txt")
	if code != 0 || strings.TrimSpace(stdout) != "Wrote output/haiku.txt." {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if _, err := os.Stat(n.env["BATON_DATA_DIR"] + "/baton.db"); !os.IsNotExist(err) {
		t.Errorf("a SQLite store was made beside PostgreSQL: %v", err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var jobs int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE state = 'succeeded'`).Scan(&jobs); err != nil || jobs != 1 {
		t.Errorf("succeeded jobs in PostgreSQL = %d, %v; want 1", jobs, err)
	}
}

// TestPostgresRefusedKeepsThePassword: a database PostgreSQL refuses is a
// configuration error (exit 2) naming the key, the password never shown;
// a URL of another scheme is refused naming the key.
func TestPostgresRefusedKeepsThePassword(t *testing.T) {
	dbURL := postgresURL(t)
	u, _ := url.Parse(dbURL)
	u.User = url.UserPassword(u.User.Username(), "hunter2-secret-pw")
	u.Path = "/no_such_database_here"
	n := newNewcomer(t)
	n.env["DATABASE_URL"] = u.String()
	n.srv.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "done") })
	code, stdout, stderr := n.run("hello")
	if code != 2 || !strings.Contains(stderr, "database.url") {
		t.Errorf("exit %d, want 2 naming database.url\nstderr: %s", code, stderr)
	}
	if strings.Contains(stdout+stderr, "hunter2-secret-pw") {
		t.Errorf("the password was printed:\n%s%s", stdout, stderr)
	}
	n.env["DATABASE_URL"] = "mysql://root:hunter2-secret-pw@localhost/baton"
	code, stdout, stderr = n.run("hello")
	if code != 2 || !strings.Contains(stderr, "database.url") || strings.Contains(stdout+stderr, "hunter2-secret-pw") {
		t.Errorf("another scheme: exit %d, want 2 naming database.url without the password\nstderr: %s", code, stderr)
	}
}

// TestDoctorOnPostgres: doctor opens, migrates and writes the PostgreSQL
// store database.url names, and says so without the password.
func TestDoctorOnPostgres(t *testing.T) {
	dbURL := postgresURL(t)
	u, _ := url.Parse(dbURL)
	u.User = url.UserPassword(u.User.Username(), "any-pw-trust-ignores")
	n := newNewcomer(t)
	n.env["DATABASE_URL"] = u.String()
	n.srv.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "ok") })
	_, stdout, stderr := runMain(t, n.env, "doctor", "--config", n.conf)
	var line string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.Contains(l, " store ") {
			line = l
		}
	}
	if !strings.HasPrefix(line, "✓") || !strings.Contains(line, u.Host) {
		t.Errorf("doctor's store line = %q\nstdout: %s\nstderr: %s", line, stdout, stderr)
	}
	if strings.Contains(stdout+stderr, "any-pw-trust-ignores") {
		t.Error("doctor printed the password")
	}
}

// TestServeOnPostgres: `baton serve` with DATABASE_URL on PostgreSQL takes
// a task through the task API and answers it; /readyz names no password.
func TestServeOnPostgres(t *testing.T) {
	dbURL := postgresURL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("postgres", "pg-s3cret") // trust auth: any password passes
	dbURL = u.String()
	llmSrv := llmtest.NewServer(t)
	llmSrv.Script(
		llmtest.Call("Write", `{"path":"output/haiku.txt","content":"queues hum at night"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Wrote output/haiku.txt."}`),
	)
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\ntools:\n  bash:\n    sandbox: none\n")
	env := map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_BASE_URL": llmSrv.URL(), "OPENAI_API_KEY": "sk-x",
		"BATON_API_TOKEN": "t0ken", "DATABASE_URL": dbURL}
	r := runBackground(t, env, "serve", "--config", conf)
	base := "http://" + r.logged(t, `baton serve started" http=(\S+)`)
	waitAnswer(t, base, "t0ken", createTask(t, base, "t0ken", "Write a haiku about job queues to output/haiku.txt"),
		"Wrote output/haiku.txt.", time.Now().Add(60*time.Second))
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(body), "pg-s3cret") {
		t.Errorf("/readyz = %d %s", resp.StatusCode, body)
	}
	r.stop()
	select {
	case code := <-r.done:
		if code != 0 {
			t.Errorf("serve exit %d:\n%s", code, r.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	if strings.Contains(r.stderr.String(), "pg-s3cret") {
		t.Errorf("the database password reached the log:\n%s", r.stderr.String())
	}
	if !regexp.MustCompile(`store="?postgres`).MatchString(r.stderr.String()) {
		t.Errorf("the start line does not name the PostgreSQL store:\n%s", r.stderr.String())
	}
}
