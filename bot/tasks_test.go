package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/llmtest"
)

// baton runs `baton args…` in-process with the newcomer's configuration
// and data directory.
func (n *newcomer) baton(args ...string) (int, string, string) {
	n.t.Helper()
	var out, errOut bytes.Buffer
	m := NewMain()
	m.Stdin = strings.NewReader("")
	m.Stdout, m.Stderr = &out, &errOut
	m.Env = mapEnv(n.env)
	if len(args) > 1 {
		args = append([]string{args[0], args[1], "--config", n.conf}, args[2:]...)
	}
	code := m.Report(m.Run(context.Background(), args))
	return code, out.String(), errOut.String()
}

// TestTasksListShowLogs: after a job that ran (a Write, then COMPLETE),
// `baton tasks` lists the task, shows its comment and job, and prints the
// job's tool calls and movement log, in text and in JSON.
func TestTasksListShowLogs(t *testing.T) {
	n := newNewcomer(t)
	// Nothing has run: no store, and reading makes none.
	code, stdout, stderr := n.baton("tasks", "list")
	if code != 0 || !strings.Contains(stdout, "no tasks") {
		t.Fatalf("tasks list before any run: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(n.env["BATON_DATA_DIR"], "baton.db")); !os.IsNotExist(err) {
		t.Errorf("tasks list created the store (%v)", err)
	}

	n.srv.Script(
		llmtest.Call("Write", `{"path":"output/hello.txt","content":"hi"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Wrote output/hello.txt."}`),
	)
	if code, stdout, stderr := n.run("write a greeting file"); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, stdout, stderr)
	}
	n.srv.Script(llmtest.Call("transition", `{"next_step":"ASK","summary":"need scope","question":"Which sources?"}`))
	if code, stdout, stderr := n.run("--piece", "research", "look into queues"); code != 3 {
		t.Fatalf("second run: exit %d, want 3\n%s%s", code, stdout, stderr)
	}

	code, stdout, stderr = n.baton("tasks", "list")
	if code != 0 {
		t.Fatalf("tasks list: exit %d\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^ID\s+STATE\s+PIECE\s+PLATFORM\s+AGE\s+TITLE$`),
		regexp.MustCompile(`^2\s+waiting_human\s+research\s+console\s+\d+s\s+look into queues$`),
		regexp.MustCompile(`^1\s+succeeded\s+chat\s+console\s+\d+s\s+write a greeting file$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("tasks list printed %d lines, want %d:\n%s", len(lines), len(want), stdout)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("tasks list line %d = %q, want %s", i, lines[i], re)
		}
	}
	if strings.Index(lines[1], "research") != strings.Index(lines[2], "chat") {
		t.Errorf("the columns are not aligned:\n%s", stdout)
	}

	code, stdout, _ = n.baton("tasks", "list", "--state", "succeeded", "--json")
	var rows []taskRow
	if err := json.Unmarshal([]byte(stdout), &rows); code != 0 || err != nil {
		t.Fatalf("tasks list --json: exit %d, %v\n%s", code, err, stdout)
	}
	if len(rows) != 1 || rows[0].ID != 1 || rows[0].State != "succeeded" || rows[0].Piece != "chat" || rows[0].Platform != "console" || rows[0].Title != "write a greeting file" {
		t.Errorf("tasks list --state succeeded --json = %+v", rows)
	}
	if code, stdout, _ := n.baton("tasks", "list", "--limit", "1"); code != 0 || strings.Count(stdout, "\n") != 2 || !strings.Contains(stdout, "look into queues") {
		t.Errorf("tasks list --limit 1: exit %d\n%s", code, stdout)
	}
	if code, stdout, _ := n.baton("tasks", "list", "--state", "failed"); code != 0 || strings.TrimSpace(stdout) != "no tasks" {
		t.Errorf("tasks list --state failed: exit %d\n%s", code, stdout)
	}

	code, stdout, stderr = n.baton("tasks", "show", "1")
	if code != 0 {
		t.Fatalf("tasks show 1: exit %d\n%s", code, stderr)
	}
	for _, w := range []string{
		"task #1: write a greeting file\n",
		"owner      console:alice\n",
		"Comments (2):\n",
		"alice\n      write a greeting file\n",
		"(bot)\n      Wrote output/hello.txt.\n",
		"Jobs (1):\n",
		"baton tasks logs 1",
	} {
		if !strings.Contains(stdout, w) {
			t.Errorf("tasks show 1 lacks %q:\n%s", w, stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^  1\s+succeeded\s+chat\s+1\s+\d+\+\d+\s+\d+s\s+Wrote output/hello.txt.$`).MatchString(stdout) {
		t.Errorf("tasks show 1 has no job line:\n%s", stdout)
	}
	code, stdout, _ = n.baton("tasks", "show", "2", "--json")
	var d taskDetail
	if err := json.Unmarshal([]byte(stdout), &d); code != 0 || err != nil {
		t.Fatalf("tasks show 2 --json: exit %d, %v\n%s", code, err, stdout)
	}
	if len(d.Jobs) != 1 || d.Jobs[0].State != "waiting_human" || d.Jobs[0].Question != "Which sources?" || len(d.Comments) < 1 || d.Comments[0].Author != "alice" || d.Comments[0].Text != "look into queues" {
		t.Errorf("tasks show 2 --json = %+v", d)
	}

	code, stdout, stderr = n.baton("tasks", "logs", "1")
	if code != 0 {
		t.Fatalf("tasks logs 1: exit %d\n%s", code, stderr)
	}
	for _, w := range []string{
		"job #1 of task #1: succeeded, piece chat, 1 movement\n",
		"tool",
		`Write {"path":"output/hello.txt","content":"hi"}`,
		"Movement logs (1):\n",
		"== logs/movements/job1-01-",
		"[user]\n    ",
		"write a greeting file",
		"[assistant]\n    → Write {\"path\":\"output/hello.txt\",\"content\":\"hi\"}\n",
		"[tool Write]\n",
		"→ transition",
	} {
		if !strings.Contains(stdout, w) {
			t.Errorf("tasks logs 1 lacks %q:\n%s", w, stdout)
		}
	}
	code, stdout, _ = n.baton("tasks", "logs", "1", "--job", "1", "--json")
	var jl jobLogs
	if err := json.Unmarshal([]byte(stdout), &jl); code != 0 || err != nil {
		t.Fatalf("tasks logs --json: exit %d, %v\n%s", code, err, stdout)
	}
	tools := 0
	for _, e := range jl.Events {
		if e.Kind == "tool" && strings.HasPrefix(e.Detail, "Write ") {
			tools++
		}
	}
	if jl.Job.ID != 1 || tools != 1 || len(jl.Logs) != 1 || len(jl.Logs[0].Messages) < 3 || jl.Missing != "" {
		t.Errorf("tasks logs --json: job %d, %d Write events, %d logs (%s)", jl.Job.ID, tools, len(jl.Logs), jl.Missing)
	}

	// The workspace gone (retention): the events still show.
	if err := os.RemoveAll(d.Workspace); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := n.baton("tasks", "logs", "2"); code != 0 || !strings.Contains(stdout, "the workspace cannot be read") || !strings.Contains(stdout, "movement_started") {
		t.Errorf("tasks logs of a removed workspace: exit %d\n%s", code, stdout)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"tasks", "show", "9"}, "there is no task #9"},
		{[]string{"tasks", "logs", "1", "--job", "2"}, "task #1 has no job #2"},
		{[]string{"tasks", "logs", "1", "--job", "99"}, "task #1 has no job #99"},
		{[]string{"tasks", "show"}, "name one task"},
		{[]string{"tasks", "show", "x"}, `"x" is not a task number`},
		{[]string{"tasks", "list", "--state", "done"}, `no state "done"`},
		{[]string{"tasks", "list", "extra"}, `unexpected argument "extra"`},
		{[]string{"tasks", "frob"}, `unknown subcommand "frob"`},
	} {
		if code, _, stderr := n.baton(tt.args...); code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("baton %s: exit %d, stderr %q; want 2 and %q", strings.Join(tt.args, " "), code, stderr, tt.want)
		}
	}
}

func TestTasksAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:         "0s",
		40 * time.Second:     "40s",
		12 * time.Minute:     "12m",
		5 * time.Hour:        "5h",
		47 * time.Hour:       "47h",
		72 * time.Hour:       "3d",
		400 * 24 * time.Hour: "400d",
	} {
		if got := age(d); got != want {
			t.Errorf("age(%v) = %q, want %q", d, got, want)
		}
	}
}
