package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/workspace"
)

// The most comments `baton tasks show` prints, and the most of a
// movement log `baton tasks logs` reads (the engine caps each at 2 MiB).
const (
	showComments = 10000
	maxLogBytes  = 16 << 20
)

// tasksOptions are the flags of `baton tasks list|show|logs`.
type tasksOptions struct {
	cf    commonFlags
	state string
	limit int
	job   int64
	json  bool
}

// tasksFlags returns the flag sets of the three subcommands, each showing
// the help of all three.
func (m *Main) tasksFlags(o *tasksOptions) []namedFlags {
	list := m.flagSet("tasks", &o.cf, true)
	list.StringVar(&o.state, "state", "", "only the tasks whose newest job is in this `state` (queued, running, waiting_human, waiting_subtasks, waiting_approval, succeeded, failed, aborted)")
	list.IntVar(&o.limit, "limit", 20, "at most `N` tasks, the newest")
	list.BoolVar(&o.json, "json", false, "print JSON")
	show := m.flagSet("tasks", &o.cf, true)
	show.BoolVar(&o.json, "json", false, "print JSON")
	logs := m.flagSet("tasks", &o.cf, true)
	logs.Int64Var(&o.job, "job", 0, "the task's job `J` (default: its newest)")
	logs.BoolVar(&o.json, "json", false, "print JSON")
	sets := []namedFlags{{sub: "list", fs: list}, {sub: "show", fs: show}, {sub: "logs", fs: logs}}
	for _, s := range sets {
		onHelp(s.fs, func() { m.showHelp("tasks", sets...) })
	}
	return sets
}

// tasks runs `baton tasks list|show N|logs N`: what the store and the
// workspaces hold, read only (the store is opened as every command opens
// it, which migrates it when an older Baton made it).
func (m *Main) tasks(ctx context.Context, args []string) error {
	var o tasksOptions
	sets := m.tasksFlags(&o)
	if len(args) == 0 {
		return usageErr("baton tasks: a subcommand is required: list, show N or logs N")
	}
	if wantsHelp(args[:1]) {
		m.showHelp("tasks", sets...)
		return &exitError{code: exitOK, err: flag.ErrHelp, reported: true}
	}
	i := slices.IndexFunc(sets, func(s namedFlags) bool { return s.sub == args[0] })
	if i < 0 {
		return usageErr("baton tasks: unknown subcommand %q: want list, show N or logs N", args[0])
	}
	sub, set := args[0], sets[i].fs
	if err := parse(set, args[1:]); err != nil {
		return err
	}
	var id int64
	switch {
	case sub == "list":
		if err := noArgs("tasks list", set); err != nil {
			return err
		}
		if o.state != "" && !core.JobState(o.state).Valid() {
			return usageErr("baton tasks list: --state: no state %q (states: %s)", o.state, joinStates())
		}
		if o.limit < 0 {
			return usageErr("baton tasks list: --limit must be 0 (no limit) or more, got %d", o.limit)
		}
	case set.NArg() != 1:
		return usageErr("baton tasks %s: name one task: baton tasks %s N", sub, sub)
	default:
		n, err := strconv.ParseInt(strings.TrimPrefix(set.Arg(0), "#"), 10, 64)
		if err != nil || n <= 0 {
			return usageErr("baton tasks %s: %q is not a task number", sub, set.Arg(0))
		}
		id = n
	}
	if err := m.setup("tasks", o.cf); err != nil {
		return err
	}
	// Reading creates no store: without one there are no tasks.
	if _, err := os.Stat(storePath(m.Config)); storePath(m.Config) != "" && errors.Is(err, fs.ErrNotExist) {
		if sub == "list" {
			if o.json {
				fmt.Fprintln(m.Stdout, "[]")
			} else {
				fmt.Fprintf(m.Stdout, "no tasks (no store at %s yet)\n", storePath(m.Config))
			}
			return nil
		}
		return usageErr("baton tasks %s: there is no task #%d (no store at %s)", sub, id, storePath(m.Config))
	}
	st, err := openStore(ctx, m.Config, m.Logger)
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now()
	switch sub {
	case "list":
		return m.listTasks(ctx, st, o, now)
	case "show":
		return m.showTask(ctx, st, id, o, now)
	default:
		return m.taskLogs(ctx, st, id, o)
	}
}

func joinStates() string {
	var s []string
	for _, st := range core.JobStates {
		s = append(s, string(st))
	}
	return strings.Join(s, ", ")
}

// taskRow is a task as `baton tasks list --json` prints it.
type taskRow struct {
	ID         int64     `json:"id"`
	ParentTask int64     `json:"parent_task,omitempty"`
	Title      string    `json:"title"`
	Platform   string    `json:"platform"`
	Channel    string    `json:"channel,omitempty"`
	Owner      string    `json:"owner"`
	Job        int64     `json:"job,omitempty"` // the newest job; 0: none
	State      string    `json:"state,omitempty"`
	Piece      string    `json:"piece,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	Workspace  string    `json:"workspace"`
}

func newTaskRow(t core.Task, newest *core.Job) taskRow {
	r := taskRow{ID: t.ID, ParentTask: t.ParentTaskID, Title: t.Title, Platform: string(t.Thread.Platform), Channel: t.Thread.Channel,
		Owner: t.OwnerUser, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Workspace: t.Workspace}
	if newest != nil {
		r.Job, r.State, r.Piece = newest.ID, string(newest.State), newest.Piece
	}
	return r
}

// newestJob returns the task's newest job, nil when it has none.
func newestJob(ctx context.Context, st store, taskID int64) (*core.Job, error) {
	js, err := st.Jobs(ctx, core.JobFilter{TaskID: taskID, Limit: 1})
	if err != nil || len(js) == 0 {
		return nil, err
	}
	return &js[0], nil
}

func (m *Main) listTasks(ctx context.Context, st store, o tasksOptions, now time.Time) error {
	tasks, err := st.Tasks(ctx, core.TaskFilter{State: core.JobState(o.state), Limit: o.limit})
	if err != nil {
		return err
	}
	rows := make([]taskRow, 0, len(tasks))
	for _, t := range tasks {
		j, err := newestJob(ctx, st, t.ID)
		if err != nil {
			return err
		}
		rows = append(rows, newTaskRow(t, j))
	}
	if o.json {
		return writeJSON(m.Stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(m.Stdout, "no tasks")
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tPIECE\tPLATFORM\tAGE\tTITLE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.ID, orDash(r.State), orDash(r.Piece), r.Platform, age(now.Sub(r.CreatedAt)), clip(r.Title, 60))
	}
	return tw.Flush()
}

// taskDetail is a task as `baton tasks show --json` prints it.
type taskDetail struct {
	taskRow
	Comments []commentRow `json:"comments"`
	Jobs     []jobRow     `json:"jobs"`
}

type commentRow struct {
	ID        int64     `json:"id"`
	Author    string    `json:"author"`
	AuthorID  string    `json:"author_id"`
	Role      string    `json:"role"`
	Text      string    `json:"text"`
	Files     []string  `json:"files,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

type jobRow struct {
	ID               int64     `json:"id"`
	State            string    `json:"state"`
	Piece            string    `json:"piece"`
	Movements        int       `json:"movements"`
	PromptTokens     int64     `json:"prompt_tokens"`
	CompletionTokens int64     `json:"completion_tokens"`
	Result           string    `json:"result,omitempty"`
	Question         string    `json:"question,omitempty"`
	Error            string    `json:"error,omitempty"`
	CreatedAt        time.Time `json:"created_at"`
	FinishedAt       time.Time `json:"finished_at,omitzero"`
}

func newJobRow(j core.Job) jobRow {
	r := jobRow{ID: j.ID, State: string(j.State), Piece: j.Piece, Movements: j.MovementCount,
		PromptTokens: j.PromptTokens, CompletionTokens: j.CompletionTokens, Result: j.ResultSummary, Error: j.Error,
		CreatedAt: j.CreatedAt, FinishedAt: j.FinishedAt}
	if j.State == core.JobWaitingHuman {
		r.Question = j.Question
	}
	return r
}

// outcome is the one line that says how a job stands.
func (r jobRow) outcome() string {
	switch {
	case r.Error != "":
		line, _, _ := strings.Cut(r.Error, "\n")
		return "error: " + line
	case r.Question != "":
		return "asks: " + r.Question
	}
	return r.Result
}

func (m *Main) showTask(ctx context.Context, st store, id int64, o tasksOptions, now time.Time) error {
	t, err := taskOrUsage(ctx, st, "show", id)
	if err != nil {
		return err
	}
	comments, err := st.RecentComments(ctx, id, showComments)
	if err != nil {
		return err
	}
	jobs, err := st.Jobs(ctx, core.JobFilter{TaskID: id})
	if err != nil {
		return err
	}
	slices.Reverse(jobs) // oldest first, as the comments
	var newest *core.Job
	if len(jobs) > 0 {
		newest = &jobs[len(jobs)-1]
	}
	d := taskDetail{taskRow: newTaskRow(t, newest), Comments: []commentRow{}, Jobs: []jobRow{}}
	for _, c := range comments {
		d.Comments = append(d.Comments, commentRow{ID: c.ID, Author: c.AuthorName, AuthorID: c.AuthorID, Role: string(c.Role), Text: c.Text, Files: c.Files, CreatedAt: c.CreatedAt})
	}
	for _, j := range jobs {
		d.Jobs = append(d.Jobs, newJobRow(j))
	}
	if o.json {
		return writeJSON(m.Stdout, d)
	}
	w := m.Stdout
	fmt.Fprintf(w, "task #%d: %s\n", t.ID, t.Title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	where := string(t.Thread.Platform)
	if t.Thread.Channel != "" {
		where += ", channel " + t.Thread.Channel
	}
	fmt.Fprintf(tw, "platform\t%s\n", where)
	if t.ParentTaskID != 0 {
		fmt.Fprintf(tw, "subtask of\t#%d\n", t.ParentTaskID)
	}
	fmt.Fprintf(tw, "owner\t%s\n", orDash(t.OwnerUser))
	fmt.Fprintf(tw, "created\t%s (%s ago)\n", t.CreatedAt.Local().Format(time.DateTime), age(now.Sub(t.CreatedAt)))
	fmt.Fprintf(tw, "workspace\t%s\n", t.Workspace)
	tw.Flush()

	fmt.Fprintf(w, "\nComments (%d):\n", len(d.Comments))
	if len(comments) == showComments {
		fmt.Fprintf(w, "  (the last %d only)\n", showComments)
	}
	for _, c := range d.Comments {
		author := orDash(c.Author)
		if c.Role == string(core.RoleBot) {
			author += " (bot)"
		}
		fmt.Fprintf(w, "  #%d  %s  %s\n", c.ID, c.CreatedAt.Local().Format(time.DateTime), author)
		for line := range strings.SplitSeq(strings.TrimRight(c.Text, "\n"), "\n") {
			fmt.Fprintf(w, "      %s\n", line)
		}
		for _, f := range c.Files {
			fmt.Fprintf(w, "      [file] %s\n", f)
		}
	}

	fmt.Fprintf(w, "\nJobs (%d):\n", len(d.Jobs))
	if len(d.Jobs) == 0 {
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  JOB\tSTATE\tPIECE\tMOVEMENTS\tTOKENS\tAGE\tOUTCOME")
	for _, j := range d.Jobs {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%d+%d\t%s\t%s\n", j.ID, j.State, j.Piece, j.Movements, j.PromptTokens, j.CompletionTokens,
			age(now.Sub(j.CreatedAt)), orDash(clip(j.outcome(), 80)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nbaton tasks logs %d [--job J] shows a job's movement logs and tool calls.\n", t.ID)
	return nil
}

// taskOrUsage returns task id, or a usage error when there is none.
func taskOrUsage(ctx context.Context, st store, sub string, id int64) (core.Task, error) {
	t, err := st.Task(ctx, id)
	if errors.Is(err, core.ErrNotFound) {
		return core.Task{}, usageErr("baton tasks %s: there is no task #%d (baton tasks list shows them)", sub, id)
	}
	return t, err
}

// logMessage is one line of a movement log (see core/engine's
// writeMovementLog): a message of the movement's conversation, or the
// note where the log was cut.
type logMessage struct {
	Role      string   `json:"role,omitempty"`
	Content   string   `json:"content,omitempty"`
	Parts     []string `json:"parts,omitempty"`
	ToolCalls []struct {
		ID, Name, Arguments string
	} `json:"tool_calls,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
	Note       string `json:"note,omitempty"`
}

// movementLog is one file of logs/movements/ and what it holds.
type movementLog struct {
	File     string            `json:"file"` // workspace-relative
	Messages []json.RawMessage `json:"messages"`
}

// jobLogs is what `baton tasks logs --json` prints.
type jobLogs struct {
	Task   int64         `json:"task"`
	Job    jobRow        `json:"job"`
	Events []eventRow    `json:"events"`
	Logs   []movementLog `json:"logs"`
	// Missing says why there are no logs to read: the workspace is gone
	// (retention removed it) or cannot be opened.
	Missing string `json:"missing,omitempty"`
}

type eventRow struct {
	At       time.Time `json:"at"`
	Kind     string    `json:"kind"`
	Movement string    `json:"movement,omitempty"`
	Detail   string    `json:"detail,omitempty"`
}

func (m *Main) taskLogs(ctx context.Context, st store, id int64, o tasksOptions) error {
	t, err := taskOrUsage(ctx, st, "logs", id)
	if err != nil {
		return err
	}
	var j core.Job
	if o.job != 0 {
		j, err = st.Job(ctx, o.job)
		if errors.Is(err, core.ErrNotFound) || err == nil && j.TaskID != t.ID {
			return usageErr("baton tasks logs: task #%d has no job #%d (baton tasks show %d lists its jobs)", t.ID, o.job, t.ID)
		}
		if err != nil {
			return err
		}
	} else {
		newest, err := newestJob(ctx, st, t.ID)
		if err != nil {
			return err
		}
		if newest == nil {
			return usageErr("baton tasks logs: task #%d has no jobs", t.ID)
		}
		j = *newest
	}
	evs, err := st.Events(ctx, j.ID)
	if err != nil {
		return err
	}
	out := jobLogs{Task: t.ID, Job: newJobRow(j), Events: []eventRow{}, Logs: []movementLog{}}
	for _, e := range evs {
		out.Events = append(out.Events, eventRow{At: e.At, Kind: e.Kind, Movement: e.Movement, Detail: e.Detail})
	}
	out.Logs, out.Missing = readMovementLogs(t.Workspace, j.ID)
	if o.json {
		return writeJSON(m.Stdout, out)
	}
	w := m.Stdout
	fmt.Fprintf(w, "job #%d of task #%d: %s, piece %s, %s\n", j.ID, t.ID, j.State, j.Piece, plural(j.MovementCount, "movement", "movements"))
	if oc := out.Job.outcome(); oc != "" {
		fmt.Fprintf(w, "%s\n", oc)
	}
	fmt.Fprintf(w, "\nEvents (%d):\n", len(out.Events))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range out.Events {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", e.At.Local().Format(time.TimeOnly), e.Kind, orDash(e.Movement), clip(e.Detail, 200))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nMovement logs (%d):\n", len(out.Logs))
	if out.Missing != "" {
		fmt.Fprintf(w, "  %s\n", out.Missing)
	}
	for _, l := range out.Logs {
		fmt.Fprintf(w, "\n== %s\n", l.File)
		for _, raw := range l.Messages {
			writeLogMessage(w, raw)
		}
	}
	return nil
}

// readMovementLogs reads job's movement logs from the workspace at dir,
// through the workspace's confined access (no symlink leads out of it, no
// named pipe blocks), in name order: movement by movement. missing says
// why there are none, "" when the job simply wrote none.
func readMovementLogs(dir string, job int64) (logs []movementLog, missing string) {
	logs = []movementLog{}
	ws, err := workspace.OpenExisting(dir)
	if err != nil {
		return logs, fmt.Sprintf("the workspace cannot be read (removed after workspaces.retention?): %v", err)
	}
	defer ws.Close()
	const sub = "logs/movements"
	entries, err := ws.ReadDir(sub)
	if errors.Is(err, fs.ErrNotExist) {
		return logs, ""
	}
	if err != nil {
		return logs, fmt.Sprintf("cannot list %s: %v", sub, err)
	}
	prefix := fmt.Sprintf("job%d-", job)
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), prefix) || path.Ext(e.Name()) != ".jsonl" {
			continue
		}
		rel := sub + "/" + e.Name()
		l := movementLog{File: rel, Messages: []json.RawMessage{}}
		f, _, err := ws.OpenRead(rel)
		if err != nil {
			l.Messages = append(l.Messages, noteJSON(fmt.Sprintf("cannot read: %v", err)))
			logs = append(logs, l)
			continue
		}
		b, err := io.ReadAll(io.LimitReader(f, maxLogBytes))
		f.Close()
		if err != nil {
			l.Messages = append(l.Messages, noteJSON(fmt.Sprintf("cannot read: %v", err)))
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			if !json.Valid([]byte(line)) {
				l.Messages = append(l.Messages, noteJSON("a line that is not JSON: "+clip(line, 120)))
				continue
			}
			l.Messages = append(l.Messages, json.RawMessage(line))
		}
		logs = append(logs, l)
	}
	return logs, ""
}

func noteJSON(s string) json.RawMessage {
	b, _ := json.Marshal(logMessage{Note: s})
	return b
}

// writeLogMessage prints one message of a movement log as people read a
// conversation: who speaks, then what was said, indented.
func writeLogMessage(w io.Writer, raw json.RawMessage) {
	var lm logMessage
	if err := json.Unmarshal(raw, &lm); err != nil {
		fmt.Fprintf(w, "[?] %s\n", raw)
		return
	}
	if lm.Note != "" {
		fmt.Fprintf(w, "[note] %s\n", lm.Note)
		return
	}
	head := "[" + lm.Role
	if lm.Role == "tool" && lm.Name != "" {
		head += " " + lm.Name
	}
	fmt.Fprintf(w, "%s]\n", head)
	text := lm.Content
	if len(lm.Parts) > 0 {
		text = strings.Join(append([]string{text}, lm.Parts...), "\n")
	}
	if text = strings.TrimSpace(text); text != "" {
		for line := range strings.SplitSeq(text, "\n") {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
	for _, c := range lm.ToolCalls {
		fmt.Fprintf(w, "    → %s %s\n", c.Name, c.Arguments)
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// age says how long ago in one short word: 40s, 12m, 5h, 3d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
