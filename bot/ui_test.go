package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
)

// chromium returns the browser's path. The test is skipped without one,
// unless BATON_REQUIRE_CHROMIUM is set: then it fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("BATON_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium is not installed and BATON_REQUIRE_CHROMIUM is set")
	}
	t.Skip("chromium is not installed (set BATON_REQUIRE_CHROMIUM to make this a failure)")
	return ""
}

// browser starts a headless chromium and returns a context driving one
// tab of it.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.Headless,
		chromedp.Flag("disable-background-networking", true),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)
	ctx, cancelTime := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancelTime)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// uiModel is the scripted model of TestUIInBrowser: the piece
// plan-implement-verify's movements are told apart by their tools. A
// request of the task "blocker" waits until release is closed.
type uiModel struct {
	release chan struct{}
	once    sync.Once
}

func (m *uiModel) answer(req llmtest.Request) llmtest.Step {
	all := ""
	for _, msg := range req.Messages {
		all += msg.Text() + "\n"
	}
	last := req.Messages[len(req.Messages)-1]
	tools := req.ToolNames()
	switch {
	case strings.Contains(all, "blocker"):
		<-m.release
		return llmtest.Transition("COMPLETE", "Unblocked.")
	case strings.Contains(all, "doomed"):
		return llmtest.Transition("ABORT", "This cannot be done.")
	case slices.Contains(tools, "Write"): // implement
		if last.Role != "tool" {
			return llmtest.Call("Write", `{"path":"output/report.txt","content":"<script>alert('tool')</script> report"}`)
		}
		return llmtest.Transition("verify", "Implemented the report.", "lessons", "IMPLEMENT-LESSON")
	case slices.Contains(tools, "Bash"): // verify
		return llmtest.Transition("COMPLETE", "Report done.")
	default: // plan
		if last.Role != "tool" {
			return llmtest.Call("Glob", `{"pattern":"<script>alert('glob')</script>*"}`)
		}
		return llmtest.Transition("implement", "Planned the report.", "lessons", "PLAN-LESSON-7")
	}
}

// apiTask creates a task over the task API with the piece and returns its id.
func apiTask(t *testing.T, base, token, text, piece string) int64 {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"text": text, "piece": piece})
	req, _ := http.NewRequest("POST", base+"/api/tasks", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var created struct {
		Task struct{ ID int64 } `json:"task"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&created)
	if resp.StatusCode != http.StatusCreated || created.Task.ID == 0 {
		t.Fatalf("create task = %d", resp.StatusCode)
	}
	return created.Task.ID
}

// apiJobs returns the jobs of task id over the task API, newest first.
func apiJobs(t *testing.T, base, token string, id int64) []struct {
	ID    int64
	State string
} {
	t.Helper()
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/tasks/%d", base, id), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Jobs []struct {
			ID    int64
			State string
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.Jobs
}

// waitJobState waits until task id's newest job is in state.
func waitJobState(t *testing.T, base, token string, id int64, state string) int64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if js := apiJobs(t, base, token, id); len(js) > 0 && js[0].State == state {
			return js[0].ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %d's newest job never became %s: %+v", id, state, apiJobs(t, base, token, id))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUIInBrowser runs `baton serve` with the dashboard on admin.addr and
// drives it with chromium: log in, find a task by text, follow its job
// movement by movement and call by call, retry a dead job and see it
// queued, re-run a job from its second movement and see the new one
// linked (its first model request carrying the state the original had
// there), and refuse a re-run from a movement the piece does not have.
// With BATON_UPDATE_SCREENSHOTS=1 it writes the README's screenshots.
func TestUIInBrowser(t *testing.T) {
	ctx := browser(t)
	model := &uiModel{release: make(chan struct{})}
	llmSrv := llmtest.NewServer(t)
	t.Cleanup(func() { model.once.Do(func() { close(model.release) }) }) // before the server's Close
	llmSrv.Handle(model.answer)
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\nadmin:\n  addr: 127.0.0.1:0\nworkers:\n  concurrency: 1\ntools:\n  bash:\n    sandbox: none\n")
	env := map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_BASE_URL": llmSrv.URL(), "OPENAI_API_KEY": "sk-x",
		"BATON_API_TOKEN": "api-t0ken", "BATON_UI_TOKEN": "ui-s3cret"}
	r := runBackground(t, env, "serve", "--config", conf)
	defer r.stop()
	admin := "http://" + r.logged(t, `admin endpoints on" addr=(\S+)`)
	pub := "http://" + r.logged(t, `baton serve started" http=(\S+)`)
	const api = "api-t0ken"

	alpha := apiTask(t, pub, api, "Write the alpha report <script>alert('comment')</script>", "plan-implement-verify")
	alphaJob := waitJobState(t, pub, api, alpha, "succeeded")
	doomed := apiTask(t, pub, api, "A doomed request", "chat")
	doomedJob := waitJobState(t, pub, api, doomed, "failed")
	blocker := apiTask(t, pub, api, "A blocker request", "chat") // keeps the one worker busy
	waitJobState(t, pub, api, blocker, "running")

	// Without a session every page leads to the login form.
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(id string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(id)))
		if err != nil {
			t.Fatalf("read #%s: %v", id, err)
		}
		return v
	}
	strs := func(expr string) []string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return v
	}
	// submit clicks id and waits for the page it loads.
	submit := func(id string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if _, err := chromedp.Evaluate[bool](`window.batonOld = true`)(ctx, tg); err != nil {
				return err
			}
			if _, err := chromedp.Click(chromedp.ID(id))(ctx, tg); err != nil {
				return err
			}
			for {
				loaded, err := chromedp.Evaluate[bool](`!window.batonOld && document.readyState === "complete"`)(ctx, tg)
				if err == nil && loaded {
					return nil
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
	}
	location := func() string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	do("open the tasks unauthenticated", chromedp.Navigate(admin+"/ui/tasks"), chromedp.WaitVisible(chromedp.ID("token")))
	if loc := location(); !strings.HasSuffix(loc, "/ui/login") {
		t.Errorf("without a session /ui/tasks led to %s, want the login", loc)
	}
	do("log in wrongly", chromedp.SendKeys(chromedp.ID("token"), "wrong"), submit("login"), chromedp.WaitVisible(chromedp.ID("error")))
	if msg := text("error"); msg != "Login failed." {
		t.Errorf("a wrong login says %q", msg)
	}
	do("log in", chromedp.SendKeys(chromedp.ID("token"), "ui-s3cret"), submit("login"), chromedp.WaitVisible(chromedp.ID("tasks")))
	if loc := location(); !strings.HasSuffix(loc, "/ui/tasks") {
		t.Errorf("after the login: %s", loc)
	}
	shot(t, ctx, "ui-tasks.png")

	// Find the task by text and open its job.
	do("search", chromedp.SendKeys(chromedp.ID("q"), "alpha"), submit("search"), chromedp.WaitVisible(chromedp.ID("tasks")))
	if rows := strs(`[...document.querySelectorAll("#tasks a.task")].map(a => a.textContent)`); len(rows) != 1 || !strings.Contains(rows[0], "alpha") {
		t.Fatalf("searching alpha lists %q", rows)
	}
	do("open the task", chromedp.Navigate(admin+strs(`[...document.querySelectorAll("#tasks a.task")].map(a => a.getAttribute("href"))`)[0]), chromedp.WaitVisible(chromedp.ID("jobs")))
	if comments := text("comments"); !strings.Contains(comments, "<script>alert('comment')</script>") {
		t.Errorf("the comment's markup is not shown as text: %q", comments)
	}
	do("open the job", chromedp.Navigate(admin+strs(`[...document.querySelectorAll("#jobs a.job")].map(a => a.getAttribute("href"))`)[0]), chromedp.WaitVisible(chromedp.ID("timeline")))
	movements := strs(`[...document.querySelectorAll("#timeline .movement[data-movement]")].map(m => m.dataset.movement)`)
	if want := []string{"plan", "implement", "verify"}; !slices.Equal(movements, want) {
		t.Errorf("the timeline's movements are %q, want %q", movements, want)
	}
	timelineText := text("timeline")
	for _, want := range []string{"Glob", `{"pattern":"<script>alert('glob')</script>*"}`, "Write", "model request", "→ implement", "→ verify", "→ COMPLETE"} {
		if !strings.Contains(timelineText, want) {
			t.Errorf("the timeline lacks %q:\n%s", want, timelineText)
		}
	}
	if scripts := strs(`[...document.querySelectorAll("script")].map(s => s.src)`); len(scripts) != 2 { // htmx and live.js: the injected ones are text
		t.Errorf("the job page has the scripts %q, want htmx and live.js alone", scripts)
	}
	shot(t, ctx, "ui-job.png")

	// Retry the dead job from the queue: the one worker is busy, so the
	// retry stays queued.
	retry := chromedp.ID(fmt.Sprintf("retry-%d", doomedJob))
	do("retry the dead job", chromedp.Navigate(admin+"/ui/queue"), chromedp.WaitVisible(retry), submit(fmt.Sprintf("retry-%d", doomedJob)), chromedp.WaitVisible(chromedp.ID("linked")))
	if state, loc := text("state"), location(); state != "queued" || strings.HasSuffix(loc, fmt.Sprintf("/ui/jobs/%d", doomedJob)) {
		t.Errorf("after Retry: %s in state %q, want a new job queued", loc, state)
	}
	do("abort the retry", submit("abort"))
	if state := text("state"); state != "aborted" {
		t.Errorf("after Abort the job is %q", state)
	}
	// The running job's page follows it: once the model answers, the
	// timeline shows the movement's end without a reload.
	blockerJob := apiJobs(t, pub, api, blocker)[0].ID
	do("open the running job", chromedp.Navigate(fmt.Sprintf("%s/ui/jobs/%d", admin, blockerJob)), chromedp.WaitVisible(chromedp.ID("live")))
	if n := strs(`[...document.querySelectorAll("#timeline .ev.transition")].map(e => e.textContent)`); len(n) != 0 {
		t.Fatalf("the running job's page shows transitions already: %q", n)
	}
	model.once.Do(func() { close(model.release) })
	do("see the running job finish", chromedp.WaitVisible(chromedp.CSS("#timeline .ev.transition")))

	// A movement the piece does not have: a clear refusal.
	jobPage := fmt.Sprintf("%s/ui/jobs/%d", admin, alphaJob)
	do("re-run from a movement the piece lacks", chromedp.Navigate(jobPage), chromedp.WaitVisible(chromedp.ID("rerun-movement")),
		chromedp.SendKeys(chromedp.ID("rerun-movement"), "deploy"), submit("rerun"), chromedp.WaitVisible(chromedp.ID("error")))
	if refusal := text("error"); !strings.Contains(refusal, "has no movement deploy") {
		t.Errorf("a re-run from deploy says %q", refusal)
	}

	// Re-run from the second movement.
	waitJobState(t, pub, api, blocker, "succeeded") // the worker is free
	before := len(llmSrv.Requests())
	do("re-run from implement", chromedp.Navigate(jobPage), chromedp.WaitVisible(chromedp.ID("rerun-movement")),
		chromedp.SendKeys(chromedp.ID("rerun-movement"), "implement"), submit("rerun"), chromedp.WaitVisible(chromedp.ID("linked")))
	if linked, want := text("linked"), fmt.Sprintf("Re-run of job #%d from movement implement.", alphaJob); linked != want {
		t.Errorf("the new job says %q, want %q", linked, want)
	}
	loc := location()
	rerunJob := waitJobState(t, pub, api, alpha, "succeeded")
	if rerunJob == alphaJob || !strings.HasSuffix(loc, fmt.Sprintf("/ui/jobs/%d", rerunJob)) {
		t.Errorf("the re-run is job %d at %s (original %d)", rerunJob, loc, alphaJob)
	}
	do("the original links the re-run", chromedp.Navigate(jobPage), chromedp.WaitVisible(chromedp.ID("reruns")))
	if reruns := strs(`[...document.querySelectorAll("#reruns a.rerun")].map(a => a.textContent)`); !slices.Contains(reruns, fmt.Sprintf("job #%d", rerunJob)) {
		t.Errorf("the original's re-runs: %q", reruns)
	}
	// The re-run's first request is implement's, with the state the
	// original had there: plan's lessons and handover.
	var firstOfRerun *llmtest.Request
	for _, req := range llmSrv.Requests()[before:] {
		all := ""
		for _, m := range req.Messages {
			all += m.Text()
		}
		if strings.Contains(all, "alpha report") {
			firstOfRerun = &req
			break
		}
	}
	if firstOfRerun == nil {
		t.Fatal("the re-run made no model request")
	}
	all := ""
	for _, m := range firstOfRerun.Messages {
		all += m.Text() + "\n"
	}
	if !slices.Contains(firstOfRerun.ToolNames(), "Write") || !strings.Contains(all, "PLAN-LESSON-7") || !strings.Contains(all, "Planned the report.") {
		t.Errorf("the re-run's first request is not implement's with plan's lessons and handover (tools %v):\n%s", firstOfRerun.ToolNames(), all)
	}
	if strings.Contains(all, "IMPLEMENT-LESSON") {
		t.Errorf("the re-run's first request carries a lesson learnt after implement started:\n%s", all)
	}

	uiHTTPChecks(t, admin, pub)
}

// uiHTTPChecks: no session → the login; a POST without the CSRF token is
// refused; an unknown id is a 404 page; the UI is not on http.addr when
// admin.addr is set; wrong logins are rate-limited without a hint.
func uiHTTPChecks(t *testing.T, admin, pub string) {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, url, cookie string, form url.Values) (*http.Response, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, url, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, path := range []string{"/ui/tasks", "/ui/tasks/1", "/ui/jobs/1", "/ui/queue", "/ui/"} {
		if resp, _ := do("GET", admin+path, "", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
			t.Errorf("GET %s without a session = %d to %q, want the login", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp, _ := do("GET", pub+"/ui/login", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("http.addr /ui/login = %d, want 404 (the UI is on admin.addr)", resp.StatusCode)
	}
	resp, _ := do("POST", admin+"/ui/login", "", url.Values{"token": {"ui-s3cret"}})
	var cookie string
	for _, c := range resp.Cookies() {
		if c.Name == "baton_ui" {
			cookie = c.Name + "=" + c.Value
			if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
				t.Errorf("the session cookie is %+v, want secure, HTTP-only, SameSite=Strict", c)
			}
		}
	}
	if resp.StatusCode != http.StatusSeeOther || cookie == "" {
		t.Fatalf("login = %d, cookie %q", resp.StatusCode, cookie)
	}
	if resp, _ := do("POST", admin+"/ui/jobs/1/retry", cookie, url.Values{}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a POST without the CSRF token = %d, want 403", resp.StatusCode)
	}
	if resp, _ := do("POST", admin+"/ui/jobs/1/retry", cookie, url.Values{"csrf": {"forged"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a POST with a wrong CSRF token = %d, want 403", resp.StatusCode)
	}
	for _, path := range []string{"/ui/jobs/999999", "/ui/tasks/999999", "/ui/jobs/abc", "/ui/nothing", "/ui/jobs/1/logs/..%2f..%2fbaton.db"} {
		if resp, body := do("GET", admin+path, cookie, nil); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "There is nothing here") {
			t.Errorf("GET %s = %d, want the 404 page", path, resp.StatusCode)
		}
	}
	// Wrong logins: the same answer whatever was wrong, then 429.
	var bodies []string
	for i := 0; i < 5; i++ {
		resp, body := do("POST", admin+"/ui/login", "", url.Values{"token": {strings.Repeat("x", i)}})
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("wrong login %d = %d, want 401", i, resp.StatusCode)
		}
		bodies = append(bodies, body)
	}
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Errorf("wrong logins answer differently:\n%s\n%s", bodies[0], b)
		}
	}
	if resp, _ := do("POST", admin+"/ui/login", "", url.Values{"token": {"ui-s3cret"}}); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a login after 5 failures = %d, want 429", resp.StatusCode)
	}
}

// shot writes a screenshot of the page to docs/name when
// BATON_UPDATE_SCREENSHOTS is set.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("BATON_UPDATE_SCREENSHOTS") == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestThreadLink(t *testing.T) {
	for _, tc := range []struct {
		th   core.ThreadRef
		want string
	}{
		{core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: "1700.1"}, "https://app.slack.com/client/T1/C1/thread/C1-1700.1"},
		{core.ThreadRef{Platform: core.PlatformDiscord, Team: "G1", Channel: "C1", Thread: "42"}, "https://discord.com/channels/G1/42"},
		{core.ThreadRef{Platform: core.PlatformAPI, Thread: "x"}, ""},
	} {
		if got := threadLink(core.Task{Thread: tc.th}); got != tc.want {
			t.Errorf("threadLink(%+v) = %q, want %q", tc.th, got, tc.want)
		}
	}
}

// TestValidateUIOIDC: an OIDC login needs its client, its redirect, an
// allow list and the dashboard's token.
func TestValidateUIOIDC(t *testing.T) {
	ok := func(c *Config) {
		c.UI.Token = "t"
		c.UI.OIDC = UIOIDCConfig{Issuer: "https://idp.example", ClientID: "baton", RedirectURL: "https://baton.example/ui/login/oidc/callback", Allowed: []string{"@example.com"}}
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		key    string // "": accepted
	}{
		{"complete", func(*Config) {}, ""},
		{"no client id", func(c *Config) { c.UI.OIDC.ClientID = "" }, "ui.oidc.client_id"},
		{"no redirect", func(c *Config) { c.UI.OIDC.RedirectURL = "" }, "ui.oidc.redirect_url"},
		{"nobody allowed", func(c *Config) { c.UI.OIDC.Allowed = nil }, "ui.oidc.allowed"},
		{"issuer not a URL", func(c *Config) { c.UI.OIDC.Issuer = "idp.example" }, "ui.oidc.issuer"},
		{"no ui token", func(c *Config) { c.UI.Token = "" }, "ui.oidc.issuer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			ok(&cfg)
			tc.change(&cfg)
			err := cfg.Validate()
			var ce *ConfigError
			switch {
			case tc.key == "" && err != nil:
				t.Errorf("Validate = %v", err)
			case tc.key != "" && (!errors.As(err, &ce) || ce.Key != tc.key):
				t.Errorf("Validate = %v, want an error on %s", err, tc.key)
			}
		})
	}
}
