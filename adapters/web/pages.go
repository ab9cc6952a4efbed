package web

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// Page sizes: a page never holds more.
const (
	tasksPage    = 50
	eventsPage   = 300
	commentsPage = 200
	logPage      = 64 << 10 // bytes of a movement log shown at once
)

// page is what every template gets.
type page struct {
	Title string
	CSRF  string
	Error string
	Data  any
}

type pages struct {
	t map[string]*template.Template
}

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"age": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return time.Since(t).Round(time.Second).String()
	},
	"add": func(a, b int) int { return a + b },
}

func parsePages() (*pages, error) {
	p := &pages{t: map[string]*template.Template{}}
	for _, name := range []string{"login", "signedin", "tasks", "task", "job", "queue", "log", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/timeline.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("parse the %s page: %w", name, err)
		}
		p.t[name] = t
	}
	return p, nil
}

// render writes page name; the whole page is rendered before anything is
// sent, so that a failure answers 500 and not half a page.
func (u *UI) render(w http.ResponseWriter, status int, name string, p page) {
	u.renderTemplate(w, status, name, "layout.html", p)
}

func (u *UI) renderTemplate(w http.ResponseWriter, status int, name, tmpl string, p page) {
	var b bytes.Buffer
	if err := u.pages.t[name].ExecuteTemplate(&b, tmpl, p); err != nil {
		u.log.Error("rendering a UI page failed", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func (u *UI) notFound(w http.ResponseWriter, _ *http.Request, s session) {
	u.render(w, http.StatusNotFound, "error", page{Title: "Not found", CSRF: s.csrf, Error: "There is nothing here: the page, task or job does not exist."})
}

// fail answers an error of the store: 404 for what does not exist.
func (u *UI) fail(w http.ResponseWriter, r *http.Request, s session, err error) {
	if errors.Is(err, core.ErrNotFound) || errors.Is(err, errNotFound) {
		u.notFound(w, r, s)
		return
	}
	u.log.Error("a UI page failed", "path", r.URL.Path, "err", err)
	u.render(w, http.StatusInternalServerError, "error", page{Title: "Error", CSRF: s.csrf, Error: "The page could not be made; the log says why."})
}

// pathID is the {id} of r, or errNotFound.
func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, errNotFound
	}
	return id, nil
}

// taskRow is a task in the list.
type taskRow struct {
	Task core.Task
	Job  core.Job // its newest job; zero when none
}

type tasksData struct {
	Rows                               []taskRow
	Q, State, Platform, Channel, Owner string
	States                             []core.JobState
	Next                               string // the next page's query; "" on the last
}

func (u *UI) tasks(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	d := tasksData{Q: q.Get("q"), State: q.Get("state"), Platform: q.Get("platform"), Channel: q.Get("channel"), Owner: q.Get("requester"), States: core.JobStates}
	f := core.TaskFilter{Text: strings.TrimSpace(d.Q), Platform: core.Platform(d.Platform), Channel: d.Channel, Owner: d.Owner, Limit: tasksPage + 1}
	if d.State != "" {
		if !core.JobState(d.State).Valid() {
			d.State = ""
		}
		f.State = core.JobState(d.State)
	}
	if b, err := strconv.ParseInt(q.Get("before"), 10, 64); err == nil && b > 0 {
		f.Before = b
	}
	ts, err := u.store.Tasks(r.Context(), f)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	if len(ts) > tasksPage {
		ts = ts[:tasksPage]
		next := r.URL.Query()
		next.Set("before", strconv.FormatInt(ts[len(ts)-1].ID, 10))
		d.Next = next.Encode()
	}
	for _, t := range ts {
		row := taskRow{Task: t}
		js, err := u.store.Jobs(r.Context(), core.JobFilter{TaskID: t.ID, Limit: 1})
		if err != nil {
			u.fail(w, r, s, err)
			return
		}
		if len(js) > 0 {
			row.Job = js[0]
		}
		d.Rows = append(d.Rows, row)
	}
	u.render(w, http.StatusOK, "tasks", page{Title: "Tasks", CSRF: s.csrf, Data: d})
}

type taskData struct {
	Task     core.Task
	Link     string
	Comments []core.Comment
	More     bool // older comments than those shown
	Jobs     []core.Job
}

func (u *UI) task(w http.ResponseWriter, r *http.Request, s session) {
	id, err := pathID(r)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	t, err := u.store.Task(r.Context(), id)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	d := taskData{Task: t}
	if u.cfg.Links != nil {
		d.Link = u.cfg.Links(t)
	}
	cs, err := u.store.RecentComments(r.Context(), id, commentsPage+1)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	if len(cs) > commentsPage {
		cs, d.More = cs[1:], true
	}
	d.Comments = cs
	if d.Jobs, err = u.store.Jobs(r.Context(), core.JobFilter{TaskID: id, Limit: 200}); err != nil {
		u.fail(w, r, s, err)
		return
	}
	u.render(w, http.StatusOK, "task", page{Title: fmt.Sprintf("Task #%d", t.ID), CSRF: s.csrf, Data: d})
}

// row is one entry of a movement in the timeline.
type row struct {
	At     time.Time
	Class  string // model, tool, transition, question, approval, egress, context, error, note
	Title  string
	Detail string
}

// movementView is one run of a movement in the timeline.
type movementView struct {
	Name      string
	Started   time.Time
	Count     string // "2/10"
	Continued bool   // started on an earlier page
	Rows      []row
	Models    int
	Tools     int
	Next      string // where it went; "" while it runs
}

// jobData is the job page's.
type jobData struct {
	Job       core.Job
	Task      core.Task
	TraceID   string
	Before    []row // events before the first movement (created, claimed)
	Movements []movementView
	Page      int
	Pages     int
	Live      bool
	Logs      []string
	Ran       []string // the movements the job started, for a re-run
	RerunOf   *core.Job
	RerunFrom string
	Reruns    []core.Job
	Original  *core.Job // the job this one retries or re-runs, side by side
	Transits  []string
	OrigTrans []string
}

func (u *UI) loadJob(r *http.Request) (jobData, error) {
	id, err := pathID(r)
	if err != nil {
		return jobData{}, err
	}
	ctx := r.Context()
	j, err := u.store.Job(ctx, id)
	if err != nil {
		return jobData{}, err
	}
	t, err := u.store.Task(ctx, j.TaskID)
	if err != nil {
		return jobData{}, err
	}
	evs, err := u.store.Events(ctx, id)
	if err != nil {
		return jobData{}, err
	}
	d := jobData{Job: j, Task: t, Live: !j.State.Terminal()}
	if u.cfg.TraceID != nil {
		d.TraceID = u.cfg.TraceID(j)
	}
	for _, e := range evs {
		switch e.Kind {
		case core.EventTrace:
			if id := core.TraceIDOf(e.Detail); id != "" && u.cfg.TraceID == nil {
				d.TraceID = id // the newest trace the job joined
			}
		case core.EventMovementState:
			if !slices.Contains(d.Ran, e.Movement) {
				d.Ran = append(d.Ran, e.Movement)
			}
		case "movement_finished":
			d.Transits = append(d.Transits, e.Movement+" → "+e.Detail)
		case core.EventRerun:
			d.RerunFrom = e.Movement
		}
	}
	d.Pages = max(1, (len(evs)+eventsPage-1)/eventsPage)
	d.Page, _ = strconv.Atoi(r.URL.Query().Get("page"))
	d.Page = min(max(d.Page, 0), d.Pages-1)
	d.Before, d.Movements = timeline(evs, d.Page*eventsPage, min(len(evs), (d.Page+1)*eventsPage))
	if j.RetryOf != 0 {
		o, err := u.store.Job(ctx, j.RetryOf)
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			return jobData{}, err
		}
		if err == nil {
			d.Original = &o
			oevs, err := u.store.Events(ctx, o.ID)
			if err != nil {
				return jobData{}, err
			}
			for _, e := range oevs {
				if e.Kind == "movement_finished" {
					d.OrigTrans = append(d.OrigTrans, e.Movement+" → "+e.Detail)
				}
			}
		}
	}
	siblings, err := u.store.Jobs(ctx, core.JobFilter{TaskID: j.TaskID, Limit: 200})
	if err != nil {
		return jobData{}, err
	}
	for _, s := range siblings {
		if s.RetryOf == j.ID {
			d.Reruns = append(d.Reruns, s)
		}
	}
	d.Logs = movementLogs(t.Workspace, j.ID)
	return d, nil
}

// timeline groups events [from, to) by movement run.
func timeline(evs []core.JobEvent, from, to int) (before []row, mvs []movementView) {
	// The movement running at from, for a page that starts inside one.
	var cur *movementView
	for i := from - 1; i >= 0; i-- {
		if evs[i].Kind == "movement_started" || evs[i].Kind == "movement_resumed" {
			mvs = append(mvs, movementView{Name: evs[i].Movement, Started: evs[i].At, Count: evs[i].Detail, Continued: true})
			cur = &mvs[0]
			break
		}
		if evs[i].Kind == "movement_finished" {
			break
		}
	}
	for _, e := range evs[from:to] {
		if e.Kind == "movement_started" || e.Kind == "movement_resumed" {
			mvs = append(mvs, movementView{Name: e.Movement, Started: e.At, Count: e.Detail})
			cur = &mvs[len(mvs)-1]
			if e.Kind == "movement_resumed" {
				cur.Rows = append(cur.Rows, row{At: e.At, Class: "approval", Title: "resumed", Detail: e.Detail})
			}
			continue
		}
		if e.Kind == core.EventMovementState {
			continue
		}
		rw := eventRow(e)
		if cur == nil {
			before = append(before, rw)
			continue
		}
		switch rw.Class {
		case "model":
			cur.Models++
		case "tool":
			cur.Tools++
		}
		if e.Kind == "movement_finished" {
			cur.Next = e.Detail
		}
		cur.Rows = append(cur.Rows, rw)
	}
	return before, mvs
}

// eventRow is how event e is shown.
func eventRow(e core.JobEvent) row {
	rw := row{At: e.At, Class: "note", Title: strings.ReplaceAll(e.Kind, "_", " "), Detail: e.Detail}
	switch {
	case e.Kind == "usage":
		rw.Class, rw.Title = "model", "model request"
	case e.Kind == "tool":
		name, rest, _ := strings.Cut(e.Detail, " ")
		rw.Class, rw.Title, rw.Detail = "tool", name, rest
		if strings.Contains(rest, " → error: ") {
			rw.Class = "tool error"
		}
	case e.Kind == "tool_denied":
		rw.Class = "tool error"
	case e.Kind == "movement_finished":
		rw.Class, rw.Title = "transition", "→ "+e.Detail
		rw.Detail = ""
	case e.Kind == "transition_refused":
		rw.Class = "transition"
	case e.Kind == core.EventParked:
		rw.Class = "question"
	case e.Kind == core.EventApprovalAsked || e.Kind == core.EventApprovalDecided:
		rw.Class = "approval"
	case e.Kind == core.EventEgress || strings.HasPrefix(e.Kind, "mcp"):
		rw.Class = "egress"
	case strings.HasPrefix(e.Kind, "context_"):
		rw.Class = "context"
	case e.Kind == core.EventError || e.Kind == core.EventLeaseLost:
		rw.Class = "error"
	}
	return rw
}

func (u *UI) job(w http.ResponseWriter, r *http.Request, s session) {
	d, err := u.loadJob(r)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	u.render(w, http.StatusOK, "job", page{Title: fmt.Sprintf("Job #%d", d.Job.ID), CSRF: s.csrf, Data: d})
}

// jobTimeline is the job page's timeline alone, which htmx fetches again
// while the job runs.
func (u *UI) jobTimeline(w http.ResponseWriter, r *http.Request, s session) {
	d, err := u.loadJob(r)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	u.renderTemplate(w, http.StatusOK, "job", "timeline", page{CSRF: s.csrf, Data: d})
}

// logName is what a movement log's name looks like.
var logName = regexp.MustCompile(`^job[0-9]+-[0-9]+-[A-Za-z0-9_.-]+\.jsonl$`)

// movementLogs lists the movement logs of job in workspace dir.
func movementLogs(dir string, job int64) []string {
	if dir == "" {
		return nil
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "logs", "movements", fmt.Sprintf("job%d-*.jsonl", job)))
	var out []string
	for _, m := range matches {
		if n := filepath.Base(m); logName.MatchString(n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

type logData struct {
	Job    core.Job
	Name   string
	Text   string
	Offset int64
	Next   int64 // 0: the end
	Size   int64
}

// movementLog shows one page (logPage bytes, cut at a line end) of a
// movement log, from ?offset=.
func (u *UI) movementLog(w http.ResponseWriter, r *http.Request, s session) {
	id, err := pathID(r)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	j, err := u.store.Job(r.Context(), id)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	t, err := u.store.Task(r.Context(), j.TaskID)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	name := r.PathValue("name")
	if !slices.Contains(movementLogs(t.Workspace, j.ID), name) {
		u.notFound(w, r, s)
		return
	}
	f, err := os.Open(filepath.Join(t.Workspace, "logs", "movements", name))
	if err != nil {
		u.fail(w, r, s, fmt.Errorf("open movement log: %w", err))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	off, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	off = min(max(off, 0), st.Size())
	buf := make([]byte, logPage)
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		u.fail(w, r, s, err)
		return
	}
	buf = buf[:n]
	d := logData{Job: j, Name: name, Offset: off, Size: st.Size()}
	if off+int64(n) < st.Size() {
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			buf = buf[:i+1]
		}
		d.Next = off + int64(len(buf))
	}
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(buf))
	sc.Buffer(make([]byte, 0, 64<<10), logPage)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteString("\n")
	}
	d.Text = b.String()
	u.render(w, http.StatusOK, "log", page{Title: name, CSRF: s.csrf, Data: d})
}

// usageRow is the tokens of one day and channel.
type usageRow struct {
	Day, Channel       string
	Prompt, Completion int64
	Jobs               int
}

type queueData struct {
	Counts  []stateCount
	Running []core.Job
	Dead    []core.Job
	Usage   []usageRow
}

type stateCount struct {
	State core.JobState
	N     int64
}

// usageJobs is how many of the newest jobs the usage table adds up.
const usageJobs = 2000

func (u *UI) queue(w http.ResponseWriter, r *http.Request, s session) {
	ctx := r.Context()
	counts, err := u.store.CountJobs(ctx)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	var d queueData
	for _, st := range core.JobStates {
		d.Counts = append(d.Counts, stateCount{State: st, N: counts[st]})
	}
	if d.Running, err = u.store.Jobs(ctx, core.JobFilter{States: []core.JobState{core.JobRunning}, Limit: 100}); err != nil {
		u.fail(w, r, s, err)
		return
	}
	if d.Dead, err = u.store.Jobs(ctx, core.JobFilter{States: []core.JobState{core.JobFailed}, Limit: 50}); err != nil {
		u.fail(w, r, s, err)
		return
	}
	recent, err := u.store.Jobs(ctx, core.JobFilter{Limit: usageJobs})
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	byKey := map[[2]string]*usageRow{}
	channels := map[int64]string{}
	for _, j := range recent {
		if j.PromptTokens+j.CompletionTokens == 0 {
			continue
		}
		ch, ok := channels[j.TaskID]
		if !ok {
			if t, err := u.store.Task(ctx, j.TaskID); err == nil {
				ch = string(t.Thread.Platform) + ":" + t.Thread.Channel
			}
			channels[j.TaskID] = ch
		}
		k := [2]string{j.CreatedAt.UTC().Format("2006-01-02"), ch}
		ur := byKey[k]
		if ur == nil {
			ur = &usageRow{Day: k[0], Channel: k[1]}
			byKey[k] = ur
		}
		ur.Prompt += j.PromptTokens
		ur.Completion += j.CompletionTokens
		ur.Jobs++
	}
	for _, ur := range byKey {
		d.Usage = append(d.Usage, *ur)
	}
	slices.SortFunc(d.Usage, func(a, b usageRow) int { return cmp.Or(-cmp.Compare(a.Day, b.Day), cmp.Compare(a.Channel, b.Channel)) })
	u.render(w, http.StatusOK, "queue", page{Title: "Queue", CSRF: s.csrf, Data: d})
}

// act answers an action's outcome: to the job it made, or back to the
// job page with the sentence of a refusal.
func (u *UI) act(w http.ResponseWriter, r *http.Request, s session, from int64, j core.Job, err error) {
	var refused string
	switch {
	case errors.Is(err, chat.ErrRerun):
		refused = err.Error()
	case errors.Is(err, core.ErrNotFound):
		u.notFound(w, r, s)
		return
	case err != nil:
		u.fail(w, r, s, err)
		return
	}
	if refused != "" {
		d, err := u.loadJob(r)
		if err != nil {
			u.fail(w, r, s, err)
			return
		}
		u.render(w, http.StatusConflict, "job", page{Title: fmt.Sprintf("Job #%d", from), CSRF: s.csrf, Error: refused, Data: d})
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/ui/jobs/%d", j.ID), http.StatusSeeOther)
}

func (u *UI) retry(w http.ResponseWriter, r *http.Request, s session) {
	id, err := pathID(r)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	j, err := u.svc.RetryJob(r.Context(), id, "ui")
	u.log.Info("a job retried from the UI", "job", id, "new", j.ID, "err", err)
	u.act(w, r, s, id, j, err)
}

func (u *UI) abort(w http.ResponseWriter, r *http.Request, s session) {
	id, err := pathID(r)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	j, err := u.svc.AbortJob(r.Context(), id, "ui")
	u.log.Info("a job aborted from the UI", "job", id, "err", err)
	u.act(w, r, s, id, j, err)
}

func (u *UI) rerun(w http.ResponseWriter, r *http.Request, s session) {
	id, err := pathID(r)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	req := chat.Rerun{JobID: id, Movement: strings.TrimSpace(r.PostFormValue("movement")),
		Model: strings.TrimSpace(r.PostFormValue("model")), Note: r.PostFormValue("note"), By: "ui"}
	j, err := u.svc.Rerun(r.Context(), req)
	u.log.Info("a job re-run from the UI", "job", id, "movement", req.Movement, "new", j.ID, "err", err)
	u.act(w, r, s, id, j, err)
}
