package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
)

// apiList is the decoded GET /api/tasks.
type apiList struct {
	Tasks []struct {
		ID        int64  `json:"id"`
		Title     string `json:"title"`
		Owner     string `json:"owner"`
		CreatedAt string `json:"created_at"`
		State     string `json:"state"`
		Piece     string `json:"piece"`
		JobID     int64  `json:"job_id"`
	} `json:"tasks"`
	NextCursor string `json:"next_cursor"`
}

func (w *apiWorld) list(query string) apiList {
	w.t.Helper()
	r := w.do("GET", "/api/tasks"+query, apiToken, "")
	if r.Status != http.StatusOK {
		w.t.Fatalf("GET /api/tasks%s: %d %s", query, r.Status, r.Raw)
	}
	var l apiList
	if err := json.Unmarshal([]byte(r.Raw), &l); err != nil {
		w.t.Fatal(err)
	}
	return l
}

func (l apiList) ids() []int64 {
	out := []int64{}
	for _, t := range l.Tasks {
		out = append(out, t.ID)
	}
	return out
}

// TestAPIListTasks: GET /api/tasks lists the API's tasks newest first with
// their newest job's state, pages through next_cursor, filters on state
// and since, and refuses parameters it does not know.
func TestAPIListTasks(t *testing.T) {
	w := newAPIWorld(t, apiSetup{token: apiToken})
	var done []int64
	for _, text := range []string{"first", "second", "third"} {
		w.llm.Script(llmtest.Transition("COMPLETE", "ok"))
		id := w.create(`{"text": "` + text + `", "author": "alice"}`)
		w.waitJob(id, "succeeded")
		done = append(done, id)
	}
	w.llm.Script(llmtest.Transition("ASK", "q", "question", "Which?"))
	asking := w.create(`{"text": "fourth", "piece": "chat"}`)
	w.waitJob(asking, "waiting_human")
	// Tasks of other platforms are not the API's.
	if _, _, err := w.store.EnsureTask(context.Background(), core.Task{Thread: core.ThreadRef{Platform: core.PlatformSlack, Channel: "C1", Thread: "1.1"}, Title: "private"}); err != nil {
		t.Fatal(err)
	}

	all := w.list("")
	if diff := cmp.Diff([]int64{asking, done[2], done[1], done[0]}, all.ids()); diff != "" || all.NextCursor != "" {
		t.Errorf("all tasks (-want +got):\n%s next_cursor %q", diff, all.NextCursor)
	}
	if got := all.Tasks[0]; got.Title != "fourth" || got.State != "waiting_human" || got.Piece != "chat" || got.JobID <= 0 || got.Owner != "api:api" || got.CreatedAt == "" {
		t.Errorf("newest = %+v", got)
	}
	if got := all.Tasks[3]; got.Title != "first" || got.State != "succeeded" || got.Owner != "api:alice" {
		t.Errorf("oldest = %+v", got)
	}

	first := w.list("?limit=3")
	if diff := cmp.Diff([]int64{asking, done[2], done[1]}, first.ids()); diff != "" || first.NextCursor == "" {
		t.Fatalf("first page (-want +got):\n%s next_cursor %q", diff, first.NextCursor)
	}
	second := w.list("?limit=3&cursor=" + url.QueryEscape(first.NextCursor))
	if diff := cmp.Diff([]int64{done[0]}, second.ids()); diff != "" || second.NextCursor != "" {
		t.Errorf("second page (-want +got):\n%s next_cursor %q", diff, second.NextCursor)
	}
	exact := w.list("?limit=4")
	if len(exact.Tasks) != 4 || exact.NextCursor != "" {
		t.Errorf("a page holding the last task: %v, next_cursor %q; want no next page", exact.ids(), exact.NextCursor)
	}

	if got := w.list("?state=waiting_human").ids(); !cmp.Equal(got, []int64{asking}) {
		t.Errorf("state=waiting_human: %v", got)
	}
	if got := w.list("?state=succeeded&limit=2").ids(); !cmp.Equal(got, []int64{done[2], done[1]}) {
		t.Errorf("state=succeeded&limit=2: %v", got)
	}
	if got := w.list("?state=failed").ids(); len(got) != 0 {
		t.Errorf("state=failed: %v", got)
	}
	future := url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))
	past := url.QueryEscape(time.Now().Add(-time.Hour).Format(time.RFC3339))
	if got := w.list("?since=" + future).ids(); len(got) != 0 {
		t.Errorf("since an hour ahead: %v", got)
	}
	if got := w.list("?since=" + past + "&state=succeeded").ids(); len(got) != 3 {
		t.Errorf("since an hour ago, succeeded: %v", got)
	}

	for _, tc := range []struct{ query, says string }{
		{"?limit=0", "limit must be"},
		{"?limit=101", "limit must be"},
		{"?limit=x", "limit must be"},
		{"?cursor=abc", "cursor must be"},
		{"?state=done", "state must be one of queued"},
		{"?since=yesterday", "RFC 3339"},
		{"?since=2025-03-01", "RFC 3339"},
		{"?page=2", `Unknown query parameter "page"`},
		{"?limit=1&limit=2", "once"},
	} {
		r := w.do("GET", "/api/tasks"+tc.query, apiToken, "")
		if msg, _ := r.Body["error"].(string); r.Status != http.StatusBadRequest || !strings.Contains(msg, tc.says) {
			t.Errorf("GET /api/tasks%s: %d %s; want 400 saying %q", tc.query, r.Status, r.Raw, tc.says)
		}
	}
}

// TestAPINoContentType: a JSON body sent without a Content-Type is taken
// as JSON; a body of another declared type is still refused.
func TestAPINoContentType(t *testing.T) {
	w := newAPIWorld(t, apiSetup{token: apiToken})
	w.llm.Script(llmtest.Transition("ASK", "q", "question", "Which year?"), llmtest.Transition("COMPLETE", "done"))
	post := func(path, ct, body string) apiResponse {
		t.Helper()
		req, err := http.NewRequest("POST", w.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+apiToken)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		return w.send(req)
	}
	r := post("/api/tasks", "", `{"text": "make the report"}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("create without Content-Type: %d %s", r.Status, r.Raw)
	}
	id := apiTaskID(t, r)
	w.waitJob(id, "waiting_human")
	if r := post("/api/tasks/"+apiItoa(id)+"/comments", "", `{"text": "2025"}`); r.Status != http.StatusAccepted {
		t.Errorf("comment without Content-Type: %d %s", r.Status, r.Raw)
	}
	w.waitJob(id, "succeeded")
	if r := post("/api/tasks", "", `text=hi`); r.Status != http.StatusBadRequest {
		t.Errorf("a form body without Content-Type: %d %s, want 400", r.Status, r.Raw)
	}
	if r := post("/api/tasks", "text/plain", `{"text": "hi"}`); r.Status != http.StatusUnsupportedMediaType {
		t.Errorf("JSON declared text/plain: %d %s, want 415", r.Status, r.Raw)
	}
}

// apiRaw is one HTTP answer of a download: its body as sent.
type apiRaw struct {
	Status int
	Header http.Header
	Body   string
}

// raw sends an authorized GET whose answer need not be JSON. path is sent
// as written (its escapes kept).
func (w *apiWorld) raw(path string) apiRaw {
	w.t.Helper()
	req, err := http.NewRequest("GET", w.url, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	req.URL.Opaque = "//" + req.URL.Host + path // no re-encoding: "%2F" and ".." reach the server as written
	req.Header.Set("Authorization", "Bearer "+apiToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	w.bodies = append(w.bodies, string(b))
	w.mu.Unlock()
	return apiRaw{Status: res.StatusCode, Header: res.Header, Body: string(b)}
}

type apiFile struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	ModifiedAt string `json:"modified_at"`
	URL        string `json:"url"`
}

// TestAPIFiles: GET /api/tasks/N/files lists the regular files of input/
// and output/; each downloads from its url with safe headers; a symlink
// the agent planted (out of the workspace, to logs/), a path with "..",
// another folder and another platform's task give nothing.
func TestAPIFiles(t *testing.T) {
	w := newAPIWorld(t, apiSetup{token: apiToken})
	w.llm.Script(llmtest.Transition("COMPLETE", "Wrote the report."))
	id := w.create(`{"text": "write the report"}`)
	w.waitJob(id, "succeeded")
	task, err := w.store.Task(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ws := task.Workspace
	secret := filepath.Join(t.TempDir(), "secret.txt")
	evil := "evil\r\nSet-Cookie: stolen=1\r\n\r\n\"quoted\".bin"
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for name, content := range map[string]string{
		"output/report.json":     `{"total": 42}`,
		"output/sub/data.csv":    "a,b\n1,2\n",
		"output/" + evil:         "payload",
		"input/notes.txt":        "notes",
		"logs/movements/x.jsonl": "engine record",
		"not-in-a-folder.txt":    "root file",
	} {
		p := filepath.Join(ws, filepath.FromSlash(name))
		apiMust(t, os.MkdirAll(filepath.Dir(p), 0o755))
		apiMust(t, os.WriteFile(p, []byte(content), 0o644))
		apiMust(t, os.Chtimes(p, at, at))
	}
	apiMust(t, os.WriteFile(secret, []byte("TOP SECRET"), 0o644))
	apiMust(t, os.Symlink(secret, filepath.Join(ws, "output", "leak.txt")))
	apiMust(t, os.Symlink("../../../"+filepath.Base(filepath.Dir(secret)), filepath.Join(ws, "output", "up")))
	apiMust(t, os.Symlink("../logs", filepath.Join(ws, "output", "to-logs")))

	r := w.do("GET", "/api/tasks/"+apiItoa(id)+"/files", apiToken, "")
	if r.Status != http.StatusOK {
		t.Fatalf("files: %d %s", r.Status, r.Raw)
	}
	var list struct {
		Files []apiFile `json:"files"`
	}
	apiMust(t, json.Unmarshal([]byte(r.Raw), &list))
	base := "/api/tasks/" + apiItoa(id) + "/files/"
	stamp := at.Format(time.RFC3339)
	want := []apiFile{
		{"input/notes.txt", 5, stamp, base + "input/notes.txt"},
		{"output/" + evil, 7, stamp, base + "output/" + url.PathEscape(evil)},
		{"output/report.json", 13, stamp, base + "output/report.json"},
		{"output/sub/data.csv", 8, stamp, base + "output/sub/data.csv"},
	}
	if diff := cmp.Diff(want, list.Files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}

	d := w.raw(want[2].URL)
	if d.Status != http.StatusOK || d.Body != `{"total": 42}` {
		t.Fatalf("download report.json: %d %q", d.Status, d.Body)
	}
	for h, v := range map[string]string{
		"Content-Type": "application/json", "Content-Disposition": "attachment; filename=report.json",
		"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox",
	} {
		if got := d.Header.Get(h); got != v {
			t.Errorf("%s = %q, want %q", h, got, v)
		}
	}
	if d := w.raw(want[3].URL); d.Status != http.StatusOK || d.Body != "a,b\n1,2\n" {
		t.Errorf("download sub/data.csv: %d %q", d.Status, d.Body)
	}
	if d := w.raw(want[0].URL); d.Status != http.StatusOK || d.Body != "notes" {
		t.Errorf("download input/notes.txt: %d %q", d.Status, d.Body)
	}

	// A name made to end the header and start others stays one value.
	d = w.raw(want[1].URL)
	if d.Status != http.StatusOK || d.Body != "payload" {
		t.Fatalf("download the oddly named file: %d %q", d.Status, d.Body)
	}
	if len(d.Header.Values("Set-Cookie")) != 0 || len(d.Header.Values("Content-Disposition")) != 1 {
		t.Errorf("the file name injected headers: %v", d.Header)
	}
	if ct := d.Header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Errorf("Content-Type = %q, want application/octet-stream", ct)
	}
	if _, params, err := mime.ParseMediaType(d.Header.Get("Content-Disposition")); err != nil || params["filename"] != evil {
		t.Errorf("Content-Disposition %q reads back as %q (%v), want the file's name", d.Header.Get("Content-Disposition"), params["filename"], err)
	}

	for _, tc := range []struct {
		name, path string
		status     int // 0: anything but 200
	}{
		{"a symlink out of the workspace", base + "output/leak.txt", http.StatusNotFound},
		{"a relative symlink out of it", base + "output/up/secret.txt", http.StatusNotFound},
		{"a symlink to logs/", base + "output/to-logs/movements/x.jsonl", http.StatusNotFound},
		{"logs/ itself", base + "logs/movements/x.jsonl", http.StatusNotFound},
		{"a file outside the folders", base + "not-in-a-folder.txt", http.StatusNotFound},
		{"a folder", base + "output/sub", http.StatusNotFound},
		{"a missing file", base + "output/nope.txt", http.StatusNotFound},
		{"no path", base + "output/", http.StatusBadRequest},
		{"encoded ..", base + "output/..%2F..%2Flogs%2Fmovements%2Fx.jsonl", http.StatusBadRequest},
		{"encoded .. out of the workspace", base + "output/..%2F..%2F..%2F" + filepath.Base(filepath.Dir(secret)) + "%2Fsecret.txt", http.StatusBadRequest},
		{"encoded .", base + "output/.%2Freport.json", http.StatusBadRequest},
		{"raw ../", base + "output/../../../../etc/passwd", 0},
		{"raw ../ into logs", base + "output/../logs/movements/x.jsonl", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := w.raw(tc.path)
			if d.Status == http.StatusOK || (tc.status != 0 && d.Status != tc.status) {
				t.Errorf("GET %s: %d %q, want %d", tc.path, d.Status, d.Body, tc.status)
			}
			for _, leak := range []string{"TOP SECRET", "engine record", "root file", "root:"} {
				if strings.Contains(d.Body, leak) {
					t.Errorf("GET %s gave away %q: %s", tc.path, leak, d.Body)
				}
			}
		})
	}

	// Another platform's task is not the API's, its files neither.
	slack, _, err := w.store.EnsureTask(context.Background(), core.Task{Thread: core.ThreadRef{Platform: core.PlatformSlack, Channel: "C1", Thread: "2.2"}, Title: "private"})
	if err != nil {
		t.Fatal(err)
	}
	apiMust(t, os.MkdirAll(filepath.Join(slack.Workspace, "output"), 0o755))
	apiMust(t, os.WriteFile(filepath.Join(slack.Workspace, "output", "private.txt"), []byte("private"), 0o644))
	if r := w.do("GET", "/api/tasks/"+apiItoa(slack.ID)+"/files", apiToken, ""); r.Status != http.StatusNotFound {
		t.Errorf("a Slack task's files: %d %s", r.Status, r.Raw)
	}
	if d := w.raw("/api/tasks/" + apiItoa(slack.ID) + "/files/output/private.txt"); d.Status != http.StatusNotFound {
		t.Errorf("a Slack task's file: %d %q", d.Status, d.Body)
	}
}

func apiMust(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
