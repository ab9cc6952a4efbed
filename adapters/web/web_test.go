package web_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/web"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/sqlite"
)

// noService refuses every action: these tests read pages.
type noService struct{}

func (noService) RetryJob(context.Context, int64, string) (core.Job, error) {
	return core.Job{}, core.ErrNotFound
}
func (noService) AbortJob(context.Context, int64, string) (core.Job, error) {
	return core.Job{}, core.ErrNotFound
}
func (noService) Rerun(context.Context, chat.Rerun) (core.Job, error) {
	return core.Job{}, core.ErrNotFound
}

func openStore(tb testing.TB) *sqlite.Store {
	tb.Helper()
	dir := tb.TempDir()
	s, err := sqlite.Open(context.Background(), filepath.Join(dir, "baton.db"), sqlite.Options{WorkspaceRoot: filepath.Join(dir, "ws")})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// server serves the UI over st and returns its address and a session
// cookie.
func server(tb testing.TB, st web.Store) (base, cookie string) {
	tb.Helper()
	return serverWith(tb, st, web.Config{Token: "s3cret"})
}

func serverWith(tb testing.TB, st web.Store, cfg web.Config) (base, cookie string) {
	tb.Helper()
	ui, err := web.New(st, noService{}, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(ui.Handler())
	tb.Cleanup(srv.Close)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(srv.URL+"/ui/login", url.Values{"token": {"s3cret"}})
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		cookie = c.Name + "=" + c.Value
	}
	if cookie == "" {
		tb.Fatalf("login = %d without a cookie", resp.StatusCode)
	}
	return srv.URL, cookie
}

func get(tb testing.TB, base, cookie, path string) (int, string) {
	tb.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("Cookie", cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// bigJob stores a task whose job made calls tool calls (each with a model
// request before it) in two movements, and a movement log of logBytes.
func bigJob(tb testing.TB, st *sqlite.Store, calls int, logBytes int) (core.Task, core.Job) {
	tb.Helper()
	ctx := context.Background()
	task, _, err := st.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformAPI, Channel: "c", Thread: "big"}, Title: "the big job"})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := st.AddComment(ctx, core.Comment{TaskID: task.ID, AuthorID: "u1", AuthorName: "Ann", Role: core.RoleUser, Text: "look <script>alert('comment')</script>"}); err != nil {
		tb.Fatal(err)
	}
	j, err := st.CreateJob(ctx, core.Job{TaskID: task.ID, Piece: "plan-implement-verify", Instruction: "x"})
	if err != nil {
		tb.Fatal(err)
	}
	add := func(kind, mv, detail string) {
		if err := st.AddEvent(ctx, core.JobEvent{JobID: j.ID, Kind: kind, Movement: mv, Detail: detail}); err != nil {
			tb.Fatal(err)
		}
	}
	for i := 0; i < calls; i++ {
		mv := "plan"
		if i >= calls/2 {
			mv = "implement"
		}
		if i == 0 || i == calls/2 {
			add("movement_started", mv, "1/20")
			add(core.EventMovementState, mv, "{}")
		}
		add("usage", mv, "prompt=100 completion=10 cached=0 reported=true")
		add("tool", mv, fmt.Sprintf(`Bash {"command":"echo %d <script>alert('tool')</script>"} → error: <b>out</b>`, i))
		if i == calls/2-1 {
			add("movement_finished", mv, "implement")
		}
	}
	if logBytes > 0 {
		dir := filepath.Join(task.Workspace, "logs", "movements")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		line := `{"role":"tool","content":"` + strings.Repeat("y", 200) + `"}` + "\n"
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("job%d-01-plan.jsonl", j.ID)), []byte(strings.Repeat(line, logBytes/len(line)+1)), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return task, j
}

// TestPagesEscapeAndPage: markup in comments and tool output is shown as
// text; a long timeline and a huge movement log come in pages; unknown
// ids are the 404 page.
func TestPagesEscapeAndPage(t *testing.T) {
	st := openStore(t)
	task, j := bigJob(t, st, 500, 1<<20)
	base, cookie := server(t, st)

	code, body := get(t, base, cookie, fmt.Sprintf("/ui/tasks/%d", task.ID))
	if code != 200 || strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;alert(&#39;comment&#39;)&lt;/script&gt;") {
		t.Errorf("task page = %d; the comment's markup is not escaped:\n%s", code, body)
	}
	code, body = get(t, base, cookie, fmt.Sprintf("/ui/jobs/%d", j.ID))
	if code != 200 || strings.Contains(body, "<script>alert") || strings.Contains(body, "<b>out</b>") || !strings.Contains(body, "&lt;script&gt;alert(&#39;tool&#39;)") {
		t.Errorf("job page = %d; the tool output's markup is not escaped", code)
	}
	// 1000+ events: the first page holds 300 of them, and says there are more.
	if n := strings.Count(body, `class="ev tool`); n >= 300 || n == 0 || !strings.Contains(body, `id="later"`) {
		t.Errorf("the first page of the timeline shows %d tool calls, want a page (< 300) with a link to the next", n)
	}
	code, body = get(t, base, cookie, fmt.Sprintf("/ui/jobs/%d?page=3", j.ID))
	if code != 200 || !strings.Contains(body, "(continued)") || !strings.Contains(body, "echo 499") {
		t.Errorf("the last page = %d: want implement continued and the last call", code)
	}
	name := fmt.Sprintf("job%d-01-plan.jsonl", j.ID)
	code, body = get(t, base, cookie, fmt.Sprintf("/ui/jobs/%d/logs/%s", j.ID, name))
	if code != 200 || len(body) > 100<<10 || !strings.Contains(body, `id="more"`) {
		t.Errorf("the movement log = %d, %d bytes: want one page of it with a link to more", code, len(body))
	}
	for _, path := range []string{"/ui/jobs/424242", "/ui/tasks/424242", "/ui/jobs/-1", fmt.Sprintf("/ui/jobs/%d/logs/job%d-01-none.jsonl", j.ID, j.ID), "/ui/jobs/424242/timeline"} {
		if code, body := get(t, base, cookie, path); code != 404 || !strings.Contains(body, "There is nothing here") {
			t.Errorf("GET %s = %d, want the 404 page", path, code)
		}
	}
}

// TestUIOffWithoutToken: no token, no UI.
func TestUIOffWithoutToken(t *testing.T) {
	ui, err := web.New(openStore(t), noService{}, web.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui.Handler())
	defer srv.Close()
	for _, path := range []string{"/ui/login", "/ui/tasks"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %s without a token = %d, want 404", path, resp.StatusCode)
		}
	}
}

// BenchmarkPages renders each page with 10,000 tasks and a 500-call job
// in the store.
func BenchmarkPages(b *testing.B) {
	st := openStore(b)
	ctx := context.Background()
	for i := 0; i < 10000; i++ {
		t, _, err := st.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformSlack, Channel: fmt.Sprintf("C%d", i%20), Thread: fmt.Sprint(i)}, Title: fmt.Sprintf("task number %d", i), OwnerUser: fmt.Sprintf("U%d", i%50)})
		if err != nil {
			b.Fatal(err)
		}
		if i%10 == 0 {
			if _, err := st.CreateJob(ctx, core.Job{TaskID: t.ID, Piece: "chat", Instruction: "x"}); err != nil {
				b.Fatal(err)
			}
		}
	}
	task, j := bigJob(b, st, 500, 1<<20)
	base, cookie := server(b, st)
	for _, p := range []struct{ name, path string }{
		{"tasks", "/ui/tasks"},
		{"tasks_search", "/ui/tasks?q=number+9999"},
		{"tasks_state", "/ui/tasks?state=queued"},
		{"task", fmt.Sprintf("/ui/tasks/%d", task.ID)},
		{"job_500_calls", fmt.Sprintf("/ui/jobs/%d", j.ID)},
		{"job_log", fmt.Sprintf("/ui/jobs/%d/logs/job%d-01-plan.jsonl", j.ID, j.ID)},
		{"queue", "/ui/queue"},
	} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				if code, _ := get(b, base, cookie, p.path); code != 200 {
					b.Fatalf("%s = %d", p.path, code)
				}
			}
		})
	}
}

// TestLiveStream: a running job's stream says "change" when the job moves
// and "end" once it is finished.
func TestLiveStream(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	task, _, err := st.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformAPI, Thread: "live"}, Title: "live"})
	if err != nil {
		t.Fatal(err)
	}
	j, err := st.CreateJob(ctx, core.Job{TaskID: task.ID, Piece: "chat", Instruction: "x"})
	if err != nil {
		t.Fatal(err)
	}
	base, cookie := serverWith(t, st, web.Config{Token: "s3cret", LiveEvery: 5 * time.Millisecond})
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/ui/jobs/%d/live", base, j.ID), nil)
	req.Header.Set("Cookie", cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events := bufio.NewScanner(resp.Body)
	next := func() string {
		t.Helper()
		for events.Scan() {
			if e, ok := strings.CutPrefix(events.Text(), "event: "); ok {
				return e
			}
		}
		t.Fatalf("the stream ended: %v", events.Err())
		return ""
	}
	if e := next(); e != "open" {
		t.Fatalf("first event %q", e)
	}
	if _, err := st.StartJob(ctx, j.ID, 1); err != nil {
		t.Fatal(err)
	}
	if e := next(); e != "change" {
		t.Errorf("after the start: %q, want change", e)
	}
	if _, err := st.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobSucceeded}); err != nil {
		t.Fatal(err)
	}
	for e := next(); e != "end"; e = next() {
		if e != "change" {
			t.Fatalf("event %q before the end", e)
		}
	}
}

// TestJobPageShowsTrace: a job that joined a trace (its trace event, as
// the gateway records it) shows the trace id on its page.
func TestJobPageShowsTrace(t *testing.T) {
	st := openStore(t)
	_, j := bigJob(t, st, 2, 0)
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	if err := st.AddEvent(context.Background(), core.JobEvent{JobID: j.ID, Kind: core.EventTrace, Detail: "00-" + id + "-00f067aa0ba902b7-01"}); err != nil {
		t.Fatal(err)
	}
	base, cookie := server(t, st)
	if code, body := get(t, base, cookie, fmt.Sprintf("/ui/jobs/%d", j.ID)); code != 200 || !strings.Contains(body, id) {
		t.Errorf("job page = %d without the trace id %s", code, id)
	}
}
