package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/jackc/pgx/v5"
)

// defaultTestURL is the machine's PostgreSQL (trust auth, database test).
const defaultTestURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// testURL is the server the tests use: BATON_TEST_POSTGRES_URL, or the
// machine's.
func testURL() string {
	if u := os.Getenv("BATON_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return defaultTestURL
}

// adminConn connects to the test server for the test's own statements,
// closed at its end. With no server answering the test is skipped, or
// fails when BATON_REQUIRE_POSTGRES=1.
func adminConn(t testing.TB) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(testURL())
	if err != nil {
		t.Fatalf("BATON_TEST_POSTGRES_URL: %v", redactor{secrets: passwordsIn(testURL())}.error(err))
	}
	cfg.ConnectTimeout = 5 * time.Second
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		msg := fmt.Sprintf("no PostgreSQL answers at %s:%d (BATON_TEST_POSTGRES_URL): %v", cfg.Host, cfg.Port,
			redactor{secrets: []string{cfg.Password}}.error(err))
		if os.Getenv("BATON_REQUIRE_POSTGRES") == "1" {
			t.Fatal(msg + "; BATON_REQUIRE_POSTGRES=1 makes this a failure")
		}
		t.Skip(msg + "; skipping (BATON_REQUIRE_POSTGRES=1 makes this a failure)")
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// newSchema creates an empty schema of the test's own, dropped with all
// it holds at the test's end, and returns the test server's URL with its
// connections' search_path set to it.
func newSchema(t testing.TB) string {
	t.Helper()
	conn := adminConn(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(t.Context(), `CREATE SCHEMA `+name); err != nil {
		t.Fatalf("create schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+name+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return withSearchPath(t, testURL(), name)
}

// withSearchPath returns conn (a URL or key=value settings) with the
// search_path run-time parameter set to schema.
func withSearchPath(t testing.TB, conn, schema string) string {
	t.Helper()
	if !strings.Contains(conn, "://") {
		return conn + " search_path=" + schema
	}
	u, err := url.Parse(conn)
	if err != nil {
		t.Fatalf("BATON_TEST_POSTGRES_URL does not parse as a URL")
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// openStore opens a store at url, closed at the test's end.
func openStore(t testing.TB, url string, opts Options) *Store {
	t.Helper()
	if opts.WorkspaceRoot == "" {
		opts.WorkspaceRoot = t.TempDir()
	}
	s, err := Open(t.Context(), url, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// newStore opens a store in a schema of its own.
func newStore(t testing.TB) *Store {
	t.Helper()
	return openStore(t, newSchema(t), Options{})
}

var threadN atomic.Int64

// newTask creates a task on a fresh Slack thread.
func newTask(t testing.TB, s *Store) core.Task {
	t.Helper()
	ref := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: fmt.Sprintf("17000.%d", threadN.Add(1))}
	task, _, err := s.EnsureTask(t.Context(), core.Task{Thread: ref, OwnerUser: "U1", Title: "a task"})
	if err != nil {
		t.Fatalf("EnsureTask: %v", err)
	}
	return task
}

// newJob creates a queued job on a fresh task.
func newJob(t testing.TB, s *Store) core.Job {
	t.Helper()
	task := newTask(t, s)
	j, err := s.CreateJob(t.Context(), core.Job{TaskID: task.ID, Piece: "default", Instruction: "do it"})
	if err != nil {
		t.Fatalf("CreateJob: %v", err)
	}
	return j
}

func mustJob(t testing.TB, s *Store, id int64) core.Job {
	t.Helper()
	j, err := s.Job(t.Context(), id)
	if err != nil {
		t.Fatalf("Job(%d): %v", id, err)
	}
	return j
}

func eventKinds(t testing.TB, s *Store, jobID int64) []string {
	t.Helper()
	evs, err := s.Events(t.Context(), jobID)
	if err != nil {
		t.Fatalf("Events(%d): %v", jobID, err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}

// reach creates a job and drives it to state through the store's public
// methods, the way Baton does.
func reach(t testing.TB, s *Store, state core.JobState) core.Job {
	t.Helper()
	ctx := t.Context()
	j := newJob(t, s)
	if state == core.JobQueued {
		return j
	}
	j, err := s.StartJob(ctx, j.ID, 1)
	if err != nil {
		t.Fatalf("StartJob: %v", err)
	}
	if state == core.JobRunning {
		return j
	}
	f := core.Finish{To: state}
	switch state {
	case core.JobWaitingHuman:
		f.Question, f.ResumeMovement = "which one?", "plan"
	case core.JobWaitingSubtasks:
		f.ResumeMovement = "plan"
	case core.JobWaitingApproval:
		f.ResumeMovement, f.Approval, f.Checkpoint = "plan", &core.Approval{Tool: "Bash", Subject: "make deploy"}, "{}"
	}
	j, err = s.FinishJob(ctx, j.ID, j.Attempt, f)
	if err != nil {
		t.Fatalf("FinishJob to %s: %v", state, err)
	}
	if j.State != state {
		t.Fatalf("reached %s, want %s", j.State, state)
	}
	return j
}

// together runs f(0), …, f(n-1) in n goroutines released at the same
// moment, so that they contend, and returns once all have returned.
func together(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}
