package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/adapters/api"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/google/go-cmp/cmp"
)

const apiToken = "s3cret-token"

// apiWorld is the whole system in-process behind the task API served over
// real HTTP: store, in-process queue, a worker pool running the engine
// against the scripted LLM server.
type apiWorld struct {
	t      testing.TB
	llm    *llmtest.Server
	store  *sqlite.Store
	url    string
	wsRoot string

	mu     sync.Mutex
	bodies []string // every response body, to check what the API gives away
}

type apiSetup struct {
	access  chat.Access
	token   string
	maxBody int64
}

func newAPIWorld(t testing.TB, s apiSetup) *apiWorld {
	t.Helper()
	sys := startStack(t, stackOptions{Access: s.access})
	svc, st, srv, wsRoot := sys.Service, sys.Store, sys.LLM, sys.WorkspaceRoot
	a := api.New(svc, st, api.Config{Token: s.token, MaxBody: s.maxBody})
	hs := httptest.NewServer(a.Handler())
	t.Cleanup(hs.Close)
	w := &apiWorld{t: t, llm: srv, store: st, url: hs.URL, wsRoot: wsRoot}
	t.Cleanup(w.checkNoPaths)
	return w
}

// apiResponse is one HTTP answer, its body decoded as JSON.
type apiResponse struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    string
}

// do sends a request with the bearer token auth ("" for none).
func (w *apiWorld) do(method, path, auth, body string) apiResponse {
	w.t.Helper()
	req, err := http.NewRequest(method, w.url+path, strings.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	return w.send(req)
}

func (w *apiWorld) send(req *http.Request) apiResponse {
	w.t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	w.bodies = append(w.bodies, string(raw))
	w.mu.Unlock()
	r := apiResponse{Status: res.StatusCode, Header: res.Header, Raw: string(raw)}
	if req.Method != http.MethodHead {
		if ct := res.Header.Get("Content-Type"); ct != "application/json" {
			w.t.Errorf("%s %s: Content-Type %q, want application/json", req.Method, req.URL.Path, ct)
		}
		if err := json.Unmarshal(raw, &r.Body); err != nil {
			w.t.Errorf("%s %s: body is not a JSON object: %v\n%s", req.Method, req.URL.Path, err, raw)
		}
	}
	return r
}

// checkNoPaths fails when any response gave away the workspace root.
func (w *apiWorld) checkNoPaths() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.bodies {
		if strings.Contains(b, w.wsRoot) {
			w.t.Errorf("a response shows the workspace path %s:\n%s", w.wsRoot, b)
		}
	}
}

// create posts a new task and returns its id.
func (w *apiWorld) create(body string) int64 {
	w.t.Helper()
	r := w.do("POST", "/api/tasks", apiToken, body)
	if r.Status != http.StatusCreated {
		w.t.Fatalf("create: status %d: %s", r.Status, r.Raw)
	}
	id := apiTaskID(w.t, r)
	if loc := r.Header.Get("Location"); loc != "/api/tasks/"+apiItoa(id) {
		w.t.Errorf("Location = %q", loc)
	}
	return id
}

func apiTaskID(t testing.TB, r apiResponse) int64 {
	t.Helper()
	task, _ := r.Body["task"].(map[string]any)
	id, _ := task["id"].(float64)
	if id <= 0 {
		t.Fatalf("no task id in %s", r.Raw)
	}
	return int64(id)
}

func apiItoa(n int64) string { return strconv.FormatInt(n, 10) }

// apiView is the decoded GET /api/tasks/{id}.
type apiView struct {
	Task struct {
		ID        int64  `json:"id"`
		Title     string `json:"title"`
		Owner     string `json:"owner"`
		CreatedAt string `json:"created_at"`
	} `json:"task"`
	Jobs []struct {
		ID            int64  `json:"id"`
		State         string `json:"state"`
		Piece         string `json:"piece"`
		Movement      string `json:"movement"`
		MovementCount int    `json:"movement_count"`
		Question      string `json:"question"`
		ResultSummary string `json:"result_summary"`
		Error         string `json:"error"`
		PromptTokens  int64  `json:"prompt_tokens"`
		FinishedAt    string `json:"finished_at"`
	} `json:"jobs"`
	Comments []struct {
		Role   string `json:"role"`
		Author string `json:"author"`
		Text   string `json:"text"`
	} `json:"comments"`
	Message string `json:"message"`
}

func (w *apiWorld) get(id int64) apiView {
	w.t.Helper()
	r := w.do("GET", "/api/tasks/"+apiItoa(id), apiToken, "")
	if r.Status != http.StatusOK {
		w.t.Fatalf("GET task %d: status %d: %s", id, r.Status, r.Raw)
	}
	var v apiView
	if err := json.Unmarshal([]byte(r.Raw), &v); err != nil {
		w.t.Fatal(err)
	}
	return v
}

// waitJob polls GET until the task's latest job is in state.
func (w *apiWorld) waitJob(id int64, state string) apiView {
	w.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		v := w.get(id)
		if len(v.Jobs) > 0 && v.Jobs[0].State == state {
			return v
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("task %d: latest job not %s: %+v", id, state, v.Jobs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type apiComment struct{ Role, Author, Text string }

func apiComments(v apiView) []apiComment {
	var out []apiComment
	for _, c := range v.Comments {
		out = append(out, apiComment{c.Role, c.Author, c.Text})
	}
	return out
}

func TestAPICreateToAnswer(t *testing.T) {
	w := newAPIWorld(t, apiSetup{token: apiToken})
	w.llm.Script(llmtest.Transition("COMPLETE", "The answer is 42.").WithUsage(120, 8))
	id := w.create(`{"text": "What is the answer?", "author": "alice"}`)
	v := w.waitJob(id, "succeeded")

	if v.Task.ID != id || v.Task.Title != "What is the answer?" || v.Task.Owner != "api:alice" || v.Task.CreatedAt == "" {
		t.Errorf("task = %+v", v.Task)
	}
	if len(v.Jobs) != 1 {
		t.Fatalf("%d jobs, want 1: %+v", len(v.Jobs), v.Jobs)
	}
	j := v.Jobs[0]
	if j.Piece != "chat" || j.ResultSummary != "The answer is 42." || j.PromptTokens != 120 || j.MovementCount != 1 || j.FinishedAt == "" {
		t.Errorf("job = %+v", j)
	}
	want := []apiComment{
		{"user", "api:alice", "What is the answer?"},
		{"bot", "", "The answer is 42."},
	}
	got := apiComments(v)
	if len(got) == 2 {
		got[1].Author = "" // the bot's id is the engine's business
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
	if n := len(w.llm.Requests()); n != 1 {
		t.Errorf("%d LLM requests, want 1", n)
	}
}

func TestAPICreateWithPiece(t *testing.T) {
	w := newAPIWorld(t, apiSetup{token: apiToken})
	w.llm.Script(llmtest.Transition("investigate", "planned"), llmtest.Transition("report", "found"), llmtest.Transition("COMPLETE", "researched"))
	id := w.create(`{"text": "look into it", "piece": "research"}`)
	v := w.waitJob(id, "succeeded")
	if j := v.Jobs[0]; j.Piece != "research" || j.ResultSummary != "researched" {
		t.Errorf("job = %+v", j)
	}
	if v.Task.Owner != "api:api" {
		t.Errorf("owner = %q, want the default api:api", v.Task.Owner)
	}
	// The piece is passed beside the text, never written into it.
	if v.Task.Title != "look into it" || len(v.Comments) == 0 || v.Comments[0].Text != "look into it" {
		t.Errorf("title %q, comments %+v; want the request as sent, without !piece", v.Task.Title, v.Comments)
	}
	if user := w.llm.Requests()[0].Messages[1].Text(); strings.Contains(user, "!piece") {
		t.Errorf("the model was sent !piece:\n%s", user)
	}

	r := w.do("POST", "/api/tasks", apiToken, `{"text": "do it", "piece": "nope"}`)
	if r.Status != http.StatusBadRequest || !strings.Contains(r.Body["error"].(string), "There is no piece `nope`") {
		t.Errorf("unknown piece: %d %s", r.Status, r.Raw)
	}
}

func TestAPIAskAnsweredByComment(t *testing.T) {
	w := newAPIWorld(t, apiSetup{token: apiToken})
	w.llm.Script(llmtest.Transition("ASK", "need a year", "question", "Which year?"))
	id := w.create(`{"text": "make the report", "author": "alice"}`)
	waiting := w.waitJob(id, "waiting_human")
	if q := waiting.Jobs[0].Question; q != "Which year?" {
		t.Errorf("question = %q", q)
	}

	w.llm.Script(llmtest.Transition("COMPLETE", "Report for 2025."))
	r := w.do("POST", "/api/tasks/"+apiItoa(id)+"/comments", apiToken, `{"text": "2025", "author": "alice"}`)
	if r.Status != http.StatusAccepted || apiTaskID(t, r) != id {
		t.Fatalf("comment: %d %s", r.Status, r.Raw)
	}
	done := w.waitJob(id, "succeeded")
	if len(done.Jobs) != 1 || done.Jobs[0].ID != waiting.Jobs[0].ID {
		t.Errorf("jobs = %+v, want job %d resumed", done.Jobs, waiting.Jobs[0].ID)
	}
	reqs := w.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d LLM requests, want 2", len(reqs))
	}
	if user := reqs[1].Messages[1].Text(); !strings.Contains(user, "2025") {
		t.Errorf("the answer is not in the resumed prompt:\n%s", user)
	}
	got := apiComments(done)
	if len(got) != 4 || got[2] != (apiComment{"user", "api:alice", "2025"}) || got[3].Text != "Report for 2025." {
		t.Errorf("comments = %+v", got)
	}

	// A comment on a finished task starts a follow-up job.
	w.llm.Script(llmtest.Transition("COMPLETE", "Added a chart."))
	if r := w.do("POST", "/api/tasks/"+apiItoa(id)+"/comments", apiToken, `{"text": "add a chart"}`); r.Status != http.StatusAccepted {
		t.Fatalf("follow-up: %d %s", r.Status, r.Raw)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		v := w.get(id)
		if len(v.Jobs) == 2 && v.Jobs[0].State == "succeeded" {
			if v.Jobs[0].ResultSummary != "Added a chart." {
				t.Errorf("follow-up job = %+v", v.Jobs[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no follow-up job: %+v", v.Jobs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAPIAbortRunning(t *testing.T) {
	w := newAPIWorld(t, apiSetup{token: apiToken})
	// The model takes its time; the abort cuts the request short.
	w.llm.Script(llmtest.Transition("COMPLETE", "too late").After(30 * time.Second))
	id := w.create(`{"text": "a long job", "author": "alice"}`)
	w.waitJob(id, "running")

	r := w.do("POST", "/api/tasks/"+apiItoa(id)+"/abort", apiToken, `{"author": "alice"}`)
	if r.Status != http.StatusAccepted || !strings.Contains(r.Body["message"].(string), "Stopping job") {
		t.Fatalf("abort: %d %s", r.Status, r.Raw)
	}
	v := w.waitJob(id, "aborted")
	if v.Jobs[0].ResultSummary == "too late" {
		t.Errorf("the job finished after the abort: %+v", v.Jobs[0])
	}

	r = w.do("POST", "/api/tasks/"+apiItoa(id)+"/abort", apiToken, "")
	if r.Status != http.StatusConflict || !strings.Contains(r.Body["error"].(string), "Nothing is running") {
		t.Errorf("second abort: %d %s", r.Status, r.Raw)
	}
}

func TestAPIAccessControl(t *testing.T) {
	w := newAPIWorld(t, apiSetup{token: apiToken, access: chat.Access{AllowedUsers: []string{"api:alice", "api:bob"}, AbortBy: "owner_and_admins"}})

	r := w.do("POST", "/api/tasks", apiToken, `{"text": "hello", "author": "mallory"}`)
	if r.Status != http.StatusForbidden || !strings.Contains(r.Body["error"].(string), "not allowed") {
		t.Errorf("create by a stranger: %d %s", r.Status, r.Raw)
	}

	w.llm.Script(llmtest.Transition("ASK", "q", "question", "Which?"))
	id := w.create(`{"text": "start", "author": "alice"}`)
	w.waitJob(id, "waiting_human")

	r = w.do("POST", "/api/tasks/"+apiItoa(id)+"/comments", apiToken, `{"text": "x", "author": "mallory"}`)
	if r.Status != http.StatusForbidden {
		t.Errorf("comment by a stranger: %d %s", r.Status, r.Raw)
	}
	r = w.do("POST", "/api/tasks/"+apiItoa(id)+"/abort", apiToken, `{"author": "bob"}`)
	if r.Status != http.StatusForbidden || !strings.Contains(r.Body["error"].(string), "Only the person who started") {
		t.Errorf("abort by another user: %d %s", r.Status, r.Raw)
	}
	v := w.get(id)
	if v.Jobs[0].State != "waiting_human" || len(v.Comments) != 2 {
		t.Errorf("a refused request changed the task: %+v", v)
	}
	r = w.do("POST", "/api/tasks/"+apiItoa(id)+"/abort", apiToken, `{"author": "alice"}`)
	if r.Status != http.StatusAccepted {
		t.Errorf("abort by the owner: %d %s", r.Status, r.Raw)
	}
	w.waitJob(id, "aborted")
}

func TestAPICommandComment(t *testing.T) {
	w := newAPIWorld(t, apiSetup{token: apiToken})
	w.llm.Script(llmtest.Transition("ASK", "q", "question", "Which?"))
	id := w.create(`{"text": "start"}`)
	w.waitJob(id, "waiting_human")
	r := w.do("POST", "/api/tasks/"+apiItoa(id)+"/comments", apiToken, `{"text": "!status"}`)
	if r.Status != http.StatusOK || !strings.Contains(r.Body["message"].(string), "waiting_human: piece chat") {
		t.Errorf("!status: %d %s", r.Status, r.Raw)
	}
	if v := w.get(id); len(v.Comments) != 2 || v.Jobs[0].State != "waiting_human" {
		t.Errorf("a command was stored or changed the job: %+v", v)
	}
}

func TestAPIAuth(t *testing.T) {
	w := newAPIWorld(t, apiSetup{token: apiToken})
	cases := []struct {
		name, header string
	}{
		{"no header", ""},
		{"wrong token", "Bearer nope"},
		{"token prefix", "Bearer " + apiToken[:4]},
		{"another scheme", "Basic " + apiToken},
		{"no scheme", apiToken},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, route := range []struct{ method, path string }{
				{"POST", "/api/tasks"}, {"GET", "/api/tasks"}, {"GET", "/api/tasks/1"}, {"POST", "/api/tasks/1/comments"}, {"POST", "/api/tasks/1/abort"},
				{"GET", "/api/tasks/1/files"}, {"GET", "/api/tasks/1/files/output/a.txt"}, {"GET", "/api/openapi.json"}, {"GET", "/elsewhere"},
			} {
				req, _ := http.NewRequest(route.method, w.url+route.path, strings.NewReader(`{"text":"hi"}`))
				if tc.header != "" {
					req.Header.Set("Authorization", tc.header)
				}
				r := w.send(req)
				if r.Status != http.StatusUnauthorized || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") || r.Body["error"] == "" {
					t.Errorf("%s %s: %d %v %s", route.method, route.path, r.Status, r.Header, r.Raw)
				}
			}
		})
	}
	if n := len(w.llm.Requests()); n != 0 {
		t.Errorf("an unauthorized request reached the model %d times", n)
	}
	// The scheme's name is case-insensitive.
	req, _ := http.NewRequest("GET", w.url+"/api/tasks/1", nil)
	req.Header.Set("Authorization", "bearer "+apiToken)
	if r := w.send(req); r.Status != http.StatusNotFound {
		t.Errorf("lower-case scheme: %d %s", r.Status, r.Raw)
	}
}

func TestAPIDisabledWithoutToken(t *testing.T) {
	w := newAPIWorld(t, apiSetup{})
	for _, route := range []struct{ method, path, auth string }{
		{"POST", "/api/tasks", ""}, {"POST", "/api/tasks", "anything"}, {"GET", "/api/tasks/1", ""},
		{"POST", "/api/tasks/1/comments", "x"}, {"POST", "/api/tasks/1/abort", ""},
	} {
		r := w.do(route.method, route.path, route.auth, `{"text":"hi"}`)
		if r.Status != http.StatusNotFound || r.Body["error"] == nil {
			t.Errorf("%s %s: %d %s", route.method, route.path, r.Status, r.Raw)
		}
	}
}

func TestAPIBadRequests(t *testing.T) {
	w := newAPIWorld(t, apiSetup{token: apiToken, maxBody: 1024})
	w.llm.Script(llmtest.Transition("COMPLETE", "ok"))
	n := w.create(`{"text": "hi"}`)
	w.waitJob(n, "succeeded")
	id := apiItoa(n)
	// A Slack task in the same store is not the API's.
	slack, _, err := w.store.EnsureTask(context.Background(), core.Task{Thread: core.ThreadRef{Platform: core.PlatformSlack, Channel: "C1", Thread: "1.1"}, OwnerUser: "slack:U1", Title: "private"})
	if err != nil {
		t.Fatal(err)
	}
	slackID := apiItoa(slack.ID)

	cases := []struct {
		name, method, path, contentType, body string
		status                                int
		errorHas                              string
		allow                                 string
	}{
		{"malformed JSON", "POST", "/api/tasks", "application/json", `{"text": "hi"`, 400, "ends too early", ""},
		{"not JSON", "POST", "/api/tasks", "application/json", `text=hi`, 400, "malformed JSON", ""},
		{"an array", "POST", "/api/tasks", "application/json", `["hi"]`, 400, "JSON", ""},
		{"two values", "POST", "/api/tasks", "application/json", `{"text":"a"} {"text":"b"}`, 400, "more than one", ""},
		{"wrong type", "POST", "/api/tasks", "application/json", `{"text": 42}`, 400, "text must be a string", ""},
		{"unknown field", "POST", "/api/tasks", "application/json", `{"text": "hi", "prio": 1}`, 400, `unknown field "prio"`, ""},
		{"no body", "POST", "/api/tasks", "application/json", ``, 400, "empty", ""},
		{"empty text", "POST", "/api/tasks", "application/json", `{"text": ""}`, 400, "text is required", ""},
		{"blank text", "POST", "/api/tasks", "application/json", `{"text": " \n\t "}`, 400, "text is required", ""},
		{"no text", "POST", "/api/tasks", "application/json", `{"piece": "chat"}`, 400, "text is required", ""},
		{"oversized body", "POST", "/api/tasks", "application/json", `{"text": "` + strings.Repeat("a", 2000) + `"}`, 400, "larger than 1024 bytes", ""},
		{"bad author", "POST", "/api/tasks", "application/json", `{"text": "hi", "author": "a b"}`, 400, "author must be", ""},
		{"bad piece name", "POST", "/api/tasks", "application/json", `{"text": "hi", "piece": "a b"}`, 400, "piece must be", ""},
		{"a command as a task", "POST", "/api/tasks", "application/json", `{"text": "!abort"}`, 400, "cannot start with", ""},
		{"form body", "POST", "/api/tasks", "application/x-www-form-urlencoded", `text=hi`, 415, "application/json", ""},
		{"comment empty text", "POST", "/api/tasks/" + id + "/comments", "application/json", `{"text": ""}`, 400, "text is required", ""},
		{"comment unknown field", "POST", "/api/tasks/" + id + "/comments", "application/json", `{"text": "x", "id": 3}`, 400, "unknown field", ""},
		{"comment oversized", "POST", "/api/tasks/" + id + "/comments", "application/json", strings.Repeat(" ", 1025) + `{"text":"x"}`, 400, "larger than", ""},
		{"comment with a piece", "POST", "/api/tasks/" + id + "/comments", "application/json", `{"text": "x", "piece": "chat"}`, 400, "no piece", ""},
		{"abort with text", "POST", "/api/tasks/" + id + "/abort", "application/json", `{"text": "x"}`, 400, "only", ""},
		{"abort malformed", "POST", "/api/tasks/" + id + "/abort", "application/json", `{`, 400, "ends too early", ""},
		{"unknown task", "GET", "/api/tasks/999", "", ``, 404, "no task 999", ""},
		{"task id not a number", "GET", "/api/tasks/abc", "", ``, 404, "no task", ""},
		{"negative task id", "GET", "/api/tasks/-1", "", ``, 404, "no task", ""},
		{"comment on unknown task", "POST", "/api/tasks/999/comments", "application/json", `{"text": "x"}`, 404, "no task 999", ""},
		{"abort unknown task", "POST", "/api/tasks/999/abort", "", ``, 404, "no task 999", ""},
		{"a Slack task", "GET", "/api/tasks/" + slackID, "", ``, 404, "no task", ""},
		{"comment on a Slack task", "POST", "/api/tasks/" + slackID + "/comments", "application/json", `{"text": "x"}`, 404, "no task", ""},
		{"unknown path", "GET", "/api/other", "", ``, 404, "nothing at", ""},
		{"DELETE the collection", "DELETE", "/api/tasks", "", ``, 405, "Use GET, HEAD, POST", "GET, HEAD, POST"},
		{"DELETE a task", "DELETE", "/api/tasks/" + id, "", ``, 405, "Use GET", "GET, HEAD"},
		{"PUT a task", "PUT", "/api/tasks/" + id, "application/json", `{}`, 405, "", "GET, HEAD"},
		{"GET comments", "GET", "/api/tasks/" + id + "/comments", "", ``, 405, "", "POST"},
		{"GET abort", "GET", "/api/tasks/" + id + "/abort", "", ``, 405, "", "POST"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, w.url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+apiToken)
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			r := w.send(req)
			msg, _ := r.Body["error"].(string)
			if r.Status != tc.status || msg == "" || !strings.Contains(msg, tc.errorHas) {
				t.Errorf("got %d %s, want %d with an error containing %q", r.Status, r.Raw, tc.status, tc.errorHas)
			}
			if got := r.Header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow = %q, want %q", got, tc.allow)
			}
		})
	}
}

func TestAPIWorkspaceHidden(t *testing.T) {
	w := newAPIWorld(t, apiSetup{token: apiToken})
	// The agent quotes an absolute path in its answer.
	w.llm.Handle(func(req llmtest.Request) llmtest.Step {
		tasks, _ := w.store.Jobs(context.Background(), core.JobFilter{Limit: 1})
		task, _ := w.store.Task(context.Background(), tasks[0].TaskID)
		return llmtest.Transition("COMPLETE", "Wrote "+filepath.Join(task.Workspace, "output", "report.md")+".")
	})
	id := w.create(`{"text": "write the report"}`)
	v := w.waitJob(id, "succeeded")
	if got := v.Jobs[0].ResultSummary; got != "Wrote <workspace>/output/report.md." {
		t.Errorf("summary = %q", got)
	}
	if got := v.Comments[len(v.Comments)-1].Text; got != "Wrote <workspace>/output/report.md." {
		t.Errorf("answer comment = %q", got)
	}
	// checkNoPaths, at cleanup, looks at every body this test received.
}
