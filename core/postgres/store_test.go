package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgconn"
)

func countRows(t *testing.T, s *Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(t.Context(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func TestOpenMigrateClose(t *testing.T) {
	ctx := t.Context()
	url := newSchema(t)
	s := openStore(t, url, Options{MaxConns: 3, StatementTimeout: 30 * time.Second})
	task := newTask(t, s)
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	all, err := schema()
	if err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, s, `SELECT COUNT(*) FROM schema_migrations`); n != len(all) {
		t.Errorf("schema_migrations rows = %d, want one per migration (%d)", n, len(all))
	}
	if v := SchemaVersion(); v != all[len(all)-1].Version || v < 1 {
		t.Errorf("SchemaVersion = %d, want %d", v, all[len(all)-1].Version)
	}
	var timeout, app string
	if err := s.pool.QueryRow(ctx, `SELECT current_setting('statement_timeout'), current_setting('application_name')`).Scan(&timeout, &app); err != nil {
		t.Fatal(err)
	}
	if timeout != "30s" || app != "baton" {
		t.Errorf("statement_timeout %q, application_name %q; want 30s and baton", timeout, app)
	}
	id, err := s.StoreID(ctx)
	if err != nil || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
		t.Errorf("StoreID = %q, %v; want 32 hex digits", id, err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
	if err := s.Heartbeat(ctx); err != nil {
		t.Errorf("Heartbeat: %v", err)
	}
	ws, err := s.Workspaces(ctx)
	if err != nil || len(ws) != 1 || ws[0] != task.Workspace {
		t.Errorf("Workspaces = %q, %v; want [%s]", ws, err, task.Workspace)
	}

	// Reopened, the same store: its task, its id.
	again := openStore(t, url, Options{})
	if got, err := again.Task(ctx, task.ID); err != nil || got.Workspace != task.Workspace {
		t.Errorf("task after reopening = %+v, %v", got, err)
	}
	if got, _ := again.StoreID(ctx); got != id {
		t.Errorf("StoreID after reopening = %q, want %q", got, id)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	if err := again.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := again.CreateJob(ctx, core.Job{TaskID: task.ID}); !errors.Is(err, core.ErrClosed) {
		t.Errorf("write after Close: %v, want ErrClosed", err)
	}
}

// TestConcurrentOpensMigrateOnce starts several stores on one fresh
// schema at once: every one opens, and each migration is applied once.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	url := newSchema(t)
	const n = 4
	stores := make([]*Store, n)
	errs := make([]error, n)
	together(n, func(i int) { stores[i], errs[i] = Open(t.Context(), url, Options{WorkspaceRoot: t.TempDir()}) })
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatalf("Open %d: %v", i, errs[i])
		}
		t.Cleanup(func() { s.Close() })
	}
	all, _ := schema()
	if got := countRows(t, stores[0], `SELECT COUNT(*) FROM schema_migrations`); got != len(all) {
		t.Errorf("schema_migrations rows = %d, want %d", got, len(all))
	}
	if got := countRows(t, stores[0], `SELECT COUNT(*) FROM store_meta WHERE key = 'store_id'`); got != 1 {
		t.Errorf("store ids = %d, want 1: the first migration ran more than once", got)
	}
	ids := map[string]bool{}
	for _, s := range stores {
		id, err := s.StoreID(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	if len(ids) != 1 {
		t.Errorf("the stores see %d store ids, want 1", len(ids))
	}
}

// TestNewerSchemaRefused: a database a newer Baton migrated is refused,
// naming both versions, at Open and by Migrate.
func TestNewerSchemaRefused(t *testing.T) {
	url := newSchema(t)
	s := openStore(t, url, Options{})
	newer := SchemaVersion() + 7
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, 'future.sql', 0)`, newer); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrNewerSchema) {
			t.Fatalf("%s on a newer schema: %v, want ErrNewerSchema", what, err)
		}
		for _, v := range []int{newer, SchemaVersion()} {
			if !strings.Contains(err.Error(), "version "+strconv.Itoa(v)) && !strings.Contains(err.Error(), "to "+strconv.Itoa(v)) {
				t.Errorf("%s: %q does not name version %d", what, err, v)
			}
		}
	}
	check("Migrate", s.Migrate(t.Context()))
	other, err := Open(t.Context(), url, Options{})
	if err == nil {
		other.Close()
	}
	check("Open", err)
}

// TestPasswordNeverShown: the URL's password is in no error of Open and
// no line of its log, whatever fails.
func TestPasswordNeverShown(t *testing.T) {
	conn := adminConn(t) // a server to refuse a database on
	host := conn.Config().Host
	const pw = "S3cret-Pa55word"
	tests := []struct {
		name, url string
		denied    bool // ErrAccessDenied
	}{
		{"unreachable", "postgres://baton:" + pw + "@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", false},
		{"does not parse", "postgres://baton:" + pw + "@127.0.0.1:notaport/test", false},
		{"bad parameter", "postgres://baton:" + pw + "@127.0.0.1/test?sslmode=sometimes", false},
		{"key=value", "host=127.0.0.1 port=1 user=baton password=" + pw + " dbname=test sslmode=disable", false},
		{"quoted key=value", "host=127.0.0.1 port=1 user=baton password='" + pw + "' dbname=test sslmode=disable", false},
		{"no such database", fmt.Sprintf("postgres://postgres:%s@%s:%d/no_such_database_%d?sslmode=disable", pw, host, conn.Config().Port, time.Now().UnixNano()), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			var mu sync.Mutex
			log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				return logs.Write(p)
			}), &slog.HandlerOptions{Level: slog.LevelDebug}))
			s, err := Open(t.Context(), tt.url, Options{ConnectRetries: 1, ConnectTimeout: 2 * time.Second, Logger: log})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("error shows the password: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if strings.Contains(logs.String(), pw) {
				t.Errorf("log shows the password:\n%s", logs.String())
			}
			if errors.Is(err, ErrAccessDenied) != tt.denied {
				t.Errorf("errors.Is(err, ErrAccessDenied) = %v, want %v: %v", !tt.denied, tt.denied, err)
			}
			if tt.name == "unreachable" && (!strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(logs.String(), "trying again")) {
				t.Errorf("error %q (log %q): want it to name the server and the log the retry", err, logs.String())
			}
		})
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestTransactionRetries: serialization failures and deadlocks run the
// transaction again, other errors do not, and a transaction that keeps
// failing gives up with the server's error.
func TestTransactionRetries(t *testing.T) {
	s := newStore(t)
	s.backoff = time.Millisecond
	ctx := t.Context()
	task := newTask(t, s)
	fail := func(code string, times int) (calls int, err error) {
		err = s.tx(ctx, func(tx db) error {
			calls++
			if _, err := tx.exec(ctx, `UPDATE tasks SET title = $1 WHERE id = $2`, fmt.Sprintf("call %d", calls), task.ID); err != nil {
				return err
			}
			if calls <= times {
				return fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code, Message: "injected"})
			}
			return nil
		})
		return calls, err
	}
	if calls, err := fail("40001", 2); err != nil || calls != 3 {
		t.Errorf("serialization failure twice: %d calls, %v; want 3 and success", calls, err)
	}
	if got, _ := s.Task(ctx, task.ID); got.Title != "call 3" {
		t.Errorf("title = %q, want the third call's (the failed ones rolled back)", got.Title)
	}
	calls, err := fail("40P01", 100)
	var pe *pgconn.PgError
	if calls != s.tries || !errors.As(err, &pe) || pe.Code != "40P01" {
		t.Errorf("deadlock every time: %d calls, %v; want %d and the deadlock error", calls, err, s.tries)
	}
	if calls, err := fail("23505", 100); calls != 1 || err == nil {
		t.Errorf("unique violation: %d calls, %v; want 1 and the error", calls, err)
	}
}

// TestRealDeadlockRetried makes two transactions lock two tasks in
// opposite orders: the server kills one as a deadlock, the store runs it
// again, and both commit.
func TestRealDeadlockRetried(t *testing.T) {
	s := newStore(t)
	s.backoff = time.Millisecond
	var retries atomic.Int32
	s.onRetry = func(int, error) { retries.Add(1) }
	ctx := t.Context()
	a, b := newTask(t, s), newTask(t, s)
	var locked sync.WaitGroup
	locked.Add(2)
	lock := func(first, second core.Task) error {
		try := 0
		return s.tx(ctx, func(tx db) error {
			try++
			if _, err := tx.exec(ctx, `UPDATE tasks SET title = 'x' WHERE id = $1`, first.ID); err != nil {
				return err
			}
			if try == 1 {
				locked.Done()
				locked.Wait() // both hold their first row
			}
			_, err := tx.exec(ctx, `UPDATE tasks SET title = 'y' WHERE id = $1`, second.ID)
			return err
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- lock(a, b) }()
	go func() { errs <- lock(b, a) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("transaction: %v", err)
		}
	}
	if retries.Load() == 0 {
		t.Error("no transaction was retried: the deadlock did not happen")
	}
}

// TestText: text PostgreSQL cannot hold (NUL, invalid UTF-8) is stored
// with U+FFFD in its place, consistently, so that a key stays a key; the
// bytes of inbox payloads and checkpoints are kept exactly.
func TestText(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	task := newTask(t, s)
	c, err := s.AddComment(ctx, core.Comment{TaskID: task.ID, PlatformMsgID: "m\x00", Text: "a\x00b\xffc", Files: []string{"in\x00put"}})
	if err != nil {
		t.Fatal(err)
	}
	want := core.Comment{ID: c.ID, TaskID: task.ID, PlatformMsgID: "m\uFFFD", Role: core.RoleUser, Text: "a\uFFFDb\uFFFDc",
		Files: []string{"in\uFFFDput"}, CreatedAt: c.CreatedAt}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("stored comment (-want +got):\n%s", diff)
	}
	if _, err := s.AddComment(ctx, core.Comment{TaskID: task.ID, PlatformMsgID: "m\x00", Text: "again"}); !errors.Is(err, core.ErrDuplicate) {
		t.Errorf("the same message id again: %v, want ErrDuplicate", err)
	}
	if first, err := s.SeenInbound(ctx, "key\x00", time.Now()); err != nil || !first {
		t.Fatalf("SeenInbound = %v, %v", first, err)
	}
	if known, err := s.InboundKnown(ctx, []string{"key\x00"}); err != nil || !known {
		t.Errorf("InboundKnown of the same key = %v, %v; want true", known, err)
	}

	payload := []byte{0, 0xff, 'x', 0}
	e, _, err := s.AddInbox(ctx, core.InboxEvent{Platform: core.PlatformSlack, Key: "Ev1", Payload: payload, ReceivedAt: time.Now(), DueAt: time.Now()})
	if err != nil || !bytes.Equal(e.Payload, payload) {
		t.Errorf("inbox payload = %q, %v; want %q", e.Payload, err, payload)
	}
	j := reach(t, s, core.JobRunning)
	check := "{\"a\":\"\x00\xff\"}"
	if _, err := s.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobWaitingApproval, Approval: &core.Approval{Tool: "Bash"}, Checkpoint: check}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.DecideApproval(ctx, core.ApprovalDecision{JobID: j.ID, WaitSeq: 1, Verdict: core.VerdictApprove, By: "u"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartJob(ctx, j.ID, 2); err != nil {
		t.Fatal(err)
	}
	if got, err := s.TakeCheckpoint(ctx, j.ID, 2); err != nil || got != check {
		t.Errorf("checkpoint = %q, %v; want %q", got, err, check)
	}
}

// TestPingAfterClose: a closed store's Ping fails.
func TestPingAfterClose(t *testing.T) {
	s := newStore(t)
	s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := s.Ping(ctx); err == nil {
		t.Error("Ping of a closed store passed")
	}
	if err := s.Heartbeat(ctx); !errors.Is(err, core.ErrClosed) {
		t.Errorf("Heartbeat of a closed store: %v, want ErrClosed", err)
	}
}

// TestLostConnectionRetried: a transaction whose connection the server
// ends before it commits (a restart, an administrator) is run again on
// another connection, and commits once.
func TestLostConnectionRetried(t *testing.T) {
	url := newSchema(t)
	admin := adminConn(t)
	s := openStore(t, url, Options{})
	s.backoff = time.Millisecond
	ctx := t.Context()
	task := newTask(t, s)
	calls := 0
	err := s.tx(ctx, func(tx db) error {
		calls++
		if _, err := insertOutbox(ctx, tx, core.OutboxMessage{TaskID: task.ID, Kind: core.OutboxPost, Payload: "{}"}); err != nil {
			return err
		}
		if calls == 1 {
			var pid int
			if err := tx.row(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
				return err
			}
			if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
				t.Fatalf("terminate backend %d: %v", pid, err)
			}
		}
		_, err := tx.exec(ctx, `SELECT 1`)
		return err
	})
	if err != nil || calls != 2 {
		t.Fatalf("transaction over a killed connection: %d calls, %v; want 2 and success", calls, err)
	}
	msgs, err := s.DueOutbox(ctx, core.PlatformSlack, time.Now(), 0)
	if err != nil || len(msgs) != 1 || msgs[0].Seq != 1 {
		t.Errorf("outbox = %+v, %v; want the one message of the second run, seq 1", msgs, err)
	}
}
