package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/configs"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/piece"
	"github.com/baton-bot/baton/core/sandbox"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/baton-bot/baton/core/tokens"
	"github.com/baton-bot/baton/core/tools"
	"github.com/baton-bot/baton/core/worker"
	"github.com/baton-bot/baton/core/workspace"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// fixed is the clock of every engine test.
var fixed = time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC)

// fixture is an engine over a real store, the built-in pieces plus test
// pieces, the real tools, and the scripted LLM server.
type fixture struct {
	t     testing.TB
	srv   *llmtest.Server
	store *sqlite.Store
	eng   *engine.Engine
	task  core.Task
	ws    string
}

type option func(*engine.Config)

func newFixture(t testing.TB, pieces map[string]string, opts ...option) *fixture {
	t.Helper()
	return newFixtureLLM(t, pieces, nil, opts...)
}

// newFixtureLLM is newFixture with the model client's configuration
// changed by llmCfg (when not nil).
func newFixtureLLM(t testing.TB, pieces map[string]string, llmCfg func(*llm.Config), opts ...option) *fixture {
	t.Helper()
	ctx := context.Background()
	// Workspaces where the sandbox's user can reach them (t.TempDir's
	// parent is private to its owner, root in CI).
	wsRoot, err := os.MkdirTemp("", "baton-engine-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(wsRoot) })
	if err := os.Chmod(wsRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "baton.db"), sqlite.Options{WorkspaceRoot: wsRoot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dir := t.TempDir()
	for name, src := range pieces {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := engine.Config{Model: "test-model", Location: time.UTC, Now: func() time.Time { return fixed }, ContextWindow: 100000, MaxOutputTokens: 1000}
	for _, o := range opts {
		o(&cfg)
	}
	sb, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.None})
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := cfg.Sandbox.(*sandbox.Sandbox); ok && cfg.Egress != nil {
		sb = s // Bash's commands reach the proxy only from inside the sandbox
	}
	bash, err := tools.NewBash(tools.BashConfig{Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	box := tools.Builtin(bash, nil)
	lib, err := piece.Load(configs.FS, dir, piece.Rules{KnownTool: func(n string) bool { _, ok := box.Lookup(n); return ok }})
	if err != nil {
		t.Fatal(err)
	}
	srv := llmtest.NewServer(t)
	lc := llm.Config{BaseURL: srv.URL(), APIKey: "test-key", Model: "test-model", MaxRetries: 0}
	if llmCfg != nil {
		llmCfg(&lc)
	}
	client, err := llm.New(lc)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(client, st, lib, box, tokens.Default(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	task, _, err := st.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformConsole, Channel: "c", Thread: "t"}, OwnerUser: "console:alice", Title: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := workspace.Open(task.Workspace); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, srv: srv, store: st, eng: eng, task: task, ws: task.Workspace}
}

func (f *fixture) comment(role core.Role, who, text string) {
	f.t.Helper()
	_, err := f.store.AddComment(context.Background(), core.Comment{TaskID: f.task.ID, Role: role, AuthorID: "console:" + who, AuthorName: who, Text: text, CreatedAt: fixed})
	if err != nil {
		f.t.Fatal(err)
	}
}

// start creates a job and marks it running, as a worker would.
func (f *fixture) start(pieceName, instruction string) core.Job {
	f.t.Helper()
	ctx := context.Background()
	j, err := f.store.CreateJob(ctx, core.Job{TaskID: f.task.ID, Piece: pieceName, Instruction: instruction})
	if err != nil {
		f.t.Fatal(err)
	}
	j, err = f.store.StartJob(ctx, j.ID, 1)
	if err != nil {
		f.t.Fatal(err)
	}
	return j
}

func (f *fixture) run(j core.Job) core.Finish {
	f.t.Helper()
	fin, err := f.eng.Run(context.Background(), worker.NewRun(j, f.store))
	if err != nil {
		f.t.Fatalf("engine run: %v", err)
	}
	return fin
}

// finish records fin as the store would at the end of the attempt and
// returns the job as it then stands.
func (f *fixture) finish(j core.Job, fin core.Finish) core.Job {
	f.t.Helper()
	got, err := f.store.FinishJob(context.Background(), j.ID, j.Attempt, fin)
	if err != nil {
		f.t.Fatal(err)
	}
	return got
}

// golden compares got with testdata/name, rewriting it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

const twoStep = `
name: two-step
description: test piece
max_movements: 6
movements:
  - name: first
    persona: You are the first step of a test.
    instruction: "Do the first part of: {task}"
    tools: [Read, Write, Checklist]
    next: [second, ABORT]
    default_next: second
    max_iterations: 4
  - name: second
    persona: You are the second step of a test.
    instruction: Do the second part.
    tools: [Read]
    next: [COMPLETE, first, ASK]
    verify: true
`

func TestEnrichedInstruction(t *testing.T) {
	f := newFixture(t, nil)
	f.comment(core.RoleUser, "alice", "comment one (too old to be sent)")
	f.comment(core.RoleUser, "alice", "comment two")
	f.comment(core.RoleBot, "baton", "a bot answer")
	f.comment(core.RoleUser, "bob", "!status")
	f.comment(core.RoleUser, "bob", strings.Repeat("é", 600))
	f.comment(core.RoleUser, "alice", "comment five")
	f.comment(core.RoleUser, "carol", "comment six")
	f.comment(core.RoleUser, "alice", "please summarise the report")
	if err := os.WriteFile(filepath.Join(f.ws, "input", "report.txt"), []byte("secret contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.ws, "logs", "old.log"), []byte("log contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.srv.Script(llmtest.Transition("COMPLETE", "done"))
	fin := f.run(f.start("chat", "please summarise the report"))
	if fin.To != core.JobSucceeded || fin.ResultSummary != "done" {
		t.Fatalf("finish = %+v", fin)
	}
	reqs := f.srv.Requests()
	user := reqs[0].Messages[1].Text()
	for _, want := range []string{"2026-11-30 09:30 (Monday), time zone UTC", "comment two", "a bot answer", "comment five", "comment six", strings.Repeat("é", 500) + " … [cut: 100 more characters]", "report.txt (15 B)", "## Request\nplease summarise the report"} {
		if !strings.Contains(user, want) {
			t.Errorf("first user prompt lacks %q", want)
		}
	}
	for _, unwanted := range []string{"comment one", "!status", "secret contents", "log contents", strings.Repeat("é", 501)} {
		if strings.Contains(user, unwanted) {
			t.Errorf("first user prompt holds %q", unwanted)
		}
	}
	if n := strings.Count(user, "please summarise the report"); n != 1 {
		t.Errorf("the request appears %d times, want once", n)
	}
	golden(t, "chat_system_en.txt", reqs[0].Messages[0].Text())
	golden(t, "chat_user_en.txt", user)
}

func TestJapanesePrompts(t *testing.T) {
	f := newFixture(t, map[string]string{"two-step": twoStep}, func(c *engine.Config) { c.Locale = "ja" })
	f.comment(core.RoleUser, "alice", "報告書を要約してください")
	f.srv.Script(llmtest.Transition("COMPLETE", "完了"))
	f.run(f.start("chat", "報告書を要約してください"))
	req := f.srv.Requests()[0]
	golden(t, "chat_system_ja.txt", req.Messages[0].Text())
	golden(t, "chat_user_ja.txt", req.Messages[1].Text())
}

func TestMovementsDoNotShareMessages(t *testing.T) {
	f := newFixture(t, map[string]string{"two-step": twoStep})
	f.srv.Script(
		llmtest.Call("Write", `{"path":"output/a.txt","content":"hello"}`),
		llmtest.Transition("second", "first done", "lessons", "the file is output/a.txt"),
		llmtest.Transition("COMPLETE", "all done"),
	)
	fin := f.run(f.start("two-step", "make a file"))
	if fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	second := reqs[2]
	if len(second.Messages) != 2 {
		t.Errorf("the second movement's first request has %d messages, want 2 (system, user)", len(second.Messages))
	}
	for _, m := range second.Messages {
		if strings.Contains(m.Text(), `"content":"hello"`) || len(m.ToolCalls) > 0 {
			t.Errorf("the second movement carries the first one's messages: %+v", m)
		}
	}
	user := second.Messages[1].Text()
	if !strings.Contains(user, "## Lessons from previous steps\n- [first → second] the file is output/a.txt") {
		t.Errorf("lessons not injected:\n%s", user)
	}
	if !strings.Contains(second.Messages[0].Text(), "**second** (this step)") {
		t.Errorf("system prompt does not mark the current step")
	}
	got, err := os.ReadFile(filepath.Join(f.ws, "output", "a.txt"))
	if err != nil || string(got) != "hello" {
		t.Errorf("output/a.txt = %q, %v", got, err)
	}
	lines, _ := os.ReadFile(filepath.Join(f.ws, "logs", "lessons.jsonl"))
	if n := strings.Count(string(lines), "\n"); n != 2 { // the lesson, and COMPLETE's summary as a lesson
		t.Errorf("lessons.jsonl has %d lines, want 2:\n%s", n, lines)
	}
	if !strings.Contains(string(lines), `"lessons":"all done"`) {
		t.Errorf("COMPLETE without lessons did not record its summary:\n%s", lines)
	}
}

func TestVerifyFeedbackAccumulates(t *testing.T) {
	f := newFixture(t, map[string]string{"two-step": twoStep})
	f.srv.Script(
		llmtest.Transition("second", "try 1"),
		llmtest.Transition("first", "missing tests"),
		llmtest.Transition("second", "try 2"),
		llmtest.Transition("first", "tests fail"),
		llmtest.Transition("second", "try 3"),
		llmtest.Transition("COMPLETE", "good"),
	)
	fin := f.run(f.start("two-step", "x"))
	if fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	third := f.srv.Requests()[4].Messages[1].Text() // the first movement's third run
	want := "## Feedback from verification\nFix every point before anything else.\nRound 1:\nmissing tests\n\nRound 2:\ntests fail"
	if !strings.Contains(third, want) {
		t.Errorf("feedback not accumulated; prompt:\n%s", third)
	}
}

func TestLessonsCap(t *testing.T) {
	f := newFixture(t, map[string]string{"two-step": twoStep})
	var steps []llmtest.Step
	for i := range 5 {
		next := "second"
		if i%2 == 1 {
			next = "first"
		}
		steps = append(steps, llmtest.Transition(next, "s", "lessons", fmt.Sprintf("lesson %d %s", i, strings.Repeat("x", 600))))
	}
	steps = append(steps, llmtest.Transition("COMPLETE", "ok"))
	f.srv.Script(steps...)
	f.run(f.start("two-step", "x"))
	last := f.srv.Requests()[5].Messages[1].Text()
	section := last[strings.Index(last, "## Lessons from previous steps"):]
	section = section[:strings.Index(section, "\n\n## ")]
	body := strings.TrimPrefix(section, "## Lessons from previous steps\n")
	if n := len([]rune(body)); n > 2000 {
		t.Errorf("lessons section is %d characters, want ≤ 2000", n)
	}
	if strings.Contains(body, "lesson 0") || !strings.Contains(body, "lesson 4") {
		t.Errorf("want the oldest dropped and the newest kept:\n%s", body)
	}
	golden(t, "lessons_section_en.txt", section)
}

func TestChecklistInjected(t *testing.T) {
	f := newFixture(t, map[string]string{"two-step": twoStep})
	f.srv.Script(
		llmtest.Call("Checklist", `{"action":"set","name":"plan","items":["read the report","write the summary"]}`),
		llmtest.Call("Checklist", `{"action":"check","name":"plan","items":["read the report"]}`),
		llmtest.Transition("second", "planned"),
		llmtest.Transition("COMPLETE", "ok"),
	)
	f.run(f.start("two-step", "x"))
	user := f.srv.Requests()[3].Messages[1].Text()
	if !strings.Contains(user, "## Checklists") || !strings.Contains(user, "read the report") || !strings.Contains(user, "write the summary") {
		t.Errorf("checklist not injected:\n%s", user)
	}
}

func TestTransitionValidation(t *testing.T) {
	f := newFixture(t, map[string]string{"two-step": twoStep})
	f.srv.Script(
		llmtest.Transition("COMPLETE", "not allowed in first"),
		llmtest.Call("transition", `{"next_step": "second"`),
		llmtest.Transition("second", "ok now"),
		llmtest.Transition("ASK", "need input"), // ASK without a question
		llmtest.Transition("ASK", "need input", "question", "Which file?"),
	)
	fin := f.run(f.start("two-step", "x"))
	if fin.To != core.JobWaitingHuman || fin.Question != "Which file?" || fin.ResumeMovement != "second" {
		t.Fatalf("finish = %+v, want waiting for 'Which file?' at second", fin)
	}
	reqs := f.srv.Requests()
	last := func(i int) string { m := reqs[i].Messages; return m[len(m)-1].Text() }
	if got := last(1); !strings.Contains(got, `next_step "COMPLETE" is not allowed here. Allowed values: second, ABORT.`) {
		t.Errorf("invalid step answer = %q", got)
	}
	if got := last(2); !strings.Contains(got, "not valid JSON") {
		t.Errorf("malformed JSON answer = %q", got)
	}
	if got := last(4); !strings.Contains(got, "ASK needs a question") {
		t.Errorf("ASK without question answer = %q", got)
	}
	var schema struct {
		Properties struct {
			NextStep struct {
				Enum []string `json:"enum"`
			} `json:"next_step"`
		} `json:"properties"`
	}
	for _, tool := range reqs[0].Tools {
		if tool.Name == "transition" {
			_ = json.Unmarshal(tool.Parameters, &schema)
		}
	}
	if diff := cmp.Diff([]string{"second", "ABORT"}, schema.Properties.NextStep.Enum); diff != "" {
		t.Errorf("transition enum (-want +got):\n%s", diff)
	}
}

func TestInvalidTransitionsForceDefaultNext(t *testing.T) {
	f := newFixture(t, map[string]string{"two-step": twoStep})
	f.srv.Script(
		llmtest.Transition("nowhere", "a"),
		llmtest.Transition("nowhere", "b"),
		llmtest.Transition("nowhere", "c"),
		llmtest.Transition("COMPLETE", "second done"),
	)
	fin := f.run(f.start("two-step", "x"))
	if fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	if n := len(f.srv.Requests()); n != 4 {
		t.Errorf("%d requests, want 4 (3 refused, then the second movement)", n)
	}
}

func TestTextOnlyReplies(t *testing.T) {
	f := newFixture(t, map[string]string{"two-step": twoStep})
	f.srv.Script(
		llmtest.Text("thinking"),
		llmtest.Text("still thinking"),
		llmtest.Text("my final words"),
		llmtest.Transition("COMPLETE", "done"),
	)
	fin := f.run(f.start("two-step", "x"))
	if fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	reqs := f.srv.Requests()
	reminders := 0
	for _, m := range reqs[2].Messages {
		if m.Role == "user" && strings.Contains(m.Text(), "You replied without calling a tool") {
			reminders++
		}
	}
	if reminders != 2 {
		t.Errorf("%d reminders before the third request, want 2", reminders)
	}
	second := reqs[3].Messages[1].Text()
	if !strings.Contains(second, "my final words") || !strings.Contains(second, "forced: the model replied 3 times without calling transition") {
		t.Errorf("the forced transition's summary did not reach the next movement; prompt:\n%s", second)
	}
}

func TestMaxIterationsForcesTransition(t *testing.T) {
	const noDefault = `
name: no-default
movements:
  - name: only
    persona: You are a test.
    instruction: Do it.
    tools: [Read]
    next: [COMPLETE]
    max_iterations: 2
`
	f := newFixture(t, map[string]string{"no-default": noDefault})
	f.srv.Script(
		llmtest.Call("Read", `{"path":"input/missing.txt"}`),
		llmtest.Call("Read", `{"path":"input/missing.txt"}`),
	)
	fin := f.run(f.start("no-default", "x"))
	if fin.To != core.JobFailed || !strings.Contains(fin.Error, "limit of 2 model calls") {
		t.Fatalf("finish = %+v, want failed (ABORT) naming the limit", fin)
	}
}

func TestCallsInContentRecognised(t *testing.T) {
	f := newFixture(t, map[string]string{"two-step": twoStep})
	f.srv.Script(
		llmtest.Text(`<tool_call>{"name": "transition", "arguments": {"next_step": "second", "summary": "from text"}}</tool_call>`),
		llmtest.Text(`{"name": "transition", "arguments": {"next_step": "COMPLETE", "summary": "bare json"}}`),
	)
	fin := f.run(f.start("two-step", "x"))
	if fin.To != core.JobSucceeded || fin.ResultSummary != "bare json" {
		t.Fatalf("finish = %+v", fin)
	}
}

func TestContextLevels(t *testing.T) {
	f := newFixture(t, map[string]string{"two-step": twoStep})
	// Window 100,000: 72k → warn, 86k → wrap-up prompt, 96k → forced.
	f.srv.Script(
		llmtest.Call("Read", `{"path":"input/none"}`).WithUsage(72000, 100),
		llmtest.Call("Read", `{"path":"input/none"}`).WithUsage(86000, 100),
		llmtest.Call("Read", `{"path":"input/none"}`).WithUsage(96000, 100),
		llmtest.Transition("COMPLETE", "second done").WithUsage(1000, 10),
	)
	j := f.start("two-step", "x")
	fin := f.run(j)
	if fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4 (three in first, one in second)", len(reqs))
	}
	wrapUps := func(r llmtest.Request) int {
		n := 0
		for _, m := range r.Messages {
			if m.Role == "user" && strings.Contains(m.Text(), "Wrap up your work now") {
				n++
			}
		}
		return n
	}
	if wrapUps(reqs[1]) != 0 || wrapUps(reqs[2]) != 1 {
		t.Errorf("wrap-up messages: %d in request 2, %d in request 3; want 0 and 1", wrapUps(reqs[1]), wrapUps(reqs[2]))
	}
	evs, _ := f.store.Events(context.Background(), j.ID)
	var kinds []string
	for _, e := range evs {
		if strings.HasPrefix(e.Kind, "context_") {
			kinds = append(kinds, e.Kind)
		}
	}
	if diff := cmp.Diff([]string{"context_warn", "context_prompt", "context_force_transition"}, kinds); diff != "" {
		t.Errorf("context events (-want +got):\n%s", diff)
	}
	second := reqs[3].Messages[1].Text()
	if !strings.Contains(second, "forced: the context window is 96% full") {
		t.Errorf("forced transition not recorded in the next movement's prompt")
	}
}

// TestContextWorkedExample is SPEC §8's example: window 100,000, the first
// response reports 96,000 prompt tokens, so before the second request the
// movement is forced to default_next — here ABORT, as it has none.
func TestContextWorkedExample(t *testing.T) {
	const oneStep = `
name: one-step
movements:
  - name: only
    persona: You are a test.
    instruction: Do it.
    tools: [Read]
    next: [COMPLETE]
`
	f := newFixture(t, map[string]string{"one-step": oneStep})
	f.srv.Script(llmtest.Call("Read", `{"path":"input/none"}`).WithUsage(96000, 50))
	fin := f.run(f.start("one-step", "x"))
	if fin.To != core.JobFailed || !strings.Contains(fin.Error, "96% full") {
		t.Fatalf("finish = %+v, want failed at 96%%", fin)
	}
	if n := len(f.srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestMaxMovementsBudget(t *testing.T) {
	f := newFixture(t, map[string]string{"two-step": twoStep})
	var steps []llmtest.Step
	for i := range 6 {
		if i%2 == 0 {
			steps = append(steps, llmtest.Transition("second", "s"))
		} else {
			steps = append(steps, llmtest.Transition("first", "again"))
		}
	}
	f.srv.Script(steps...)
	fin := f.run(f.start("two-step", "x"))
	if fin.To != core.JobFailed || !strings.Contains(fin.Error, "budget of 6 movements (max_movements)") {
		t.Fatalf("finish = %+v", fin)
	}
}

func TestModelFailureFailsJob(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Script(llmtest.Status(500))
	fin := f.run(f.start("chat", "x"))
	if fin.To != core.JobFailed || !strings.Contains(fin.Error, "language model") {
		t.Fatalf("finish = %+v", fin)
	}
	if strings.Contains(fin.Error, "test-key") {
		t.Errorf("the error shows the API key")
	}
}

func TestAskResumesAtMovementWithLastComments(t *testing.T) {
	f := newFixture(t, map[string]string{"two-step": twoStep})
	f.comment(core.RoleUser, "alice", "make the report")
	f.srv.Script(
		llmtest.Transition("second", "drafted"),
		llmtest.Transition("ASK", "need the year", "question", "Which year?"),
	)
	j := f.start("two-step", "make the report")
	fin := f.run(j)
	if len(fin.Comments) != 1 || fin.Comments[0].Role != core.RoleBot || fin.Comments[0].Text != "Which year?" {
		t.Fatalf("the question is not stored as a bot comment: %+v", fin.Comments)
	}
	waiting := f.finish(j, fin)
	f.comment(core.RoleUser, "alice", "2025, please")
	if ok, err := f.store.ResumeJob(context.Background(), j.ID, waiting.WaitSeq); !ok || err != nil {
		t.Fatalf("resume = %v, %v", ok, err)
	}
	j2, err := f.store.StartJob(context.Background(), j.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Script(llmtest.Transition("COMPLETE", "report for 2025"))
	fin = f.run(j2)
	if fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	reqs := f.srv.Requests()
	resumed := reqs[2]
	if len(resumed.Messages) != 2 {
		t.Errorf("the resumed movement starts with %d messages, want 2 (old messages not replayed)", len(resumed.Messages))
	}
	if !strings.Contains(resumed.Messages[0].Text(), "**second** (this step)") {
		t.Errorf("did not resume at the asking movement")
	}
	user := resumed.Messages[1].Text()
	if !strings.Contains(user, "Which year?") || !strings.Contains(user, "2025, please") {
		t.Errorf("question and answer not among the last comments:\n%s", user)
	}
}

func TestLongInstructionCutAndSaved(t *testing.T) {
	f := newFixture(t, nil)
	long := strings.Repeat("word ", 2000) // 10,000 characters
	f.srv.Script(llmtest.Transition("COMPLETE", "ok"))
	j := f.start("chat", long)
	f.run(j)
	user := f.srv.Requests()[0].Messages[1].Text()
	saved := fmt.Sprintf("input/request-%d.txt", j.ID)
	if !strings.Contains(user, "the full text (10000 characters) is in "+saved) {
		t.Errorf("no cut note naming %s", saved)
	}
	got, err := os.ReadFile(filepath.Join(f.ws, saved))
	if err != nil || string(got) != long {
		t.Errorf("saved request: %d bytes, %v", len(got), err)
	}
}

func TestGitContextAfterMovement(t *testing.T) {
	const gitPiece = `
name: git-step
movements:
  - name: change
    persona: You are a test.
    instruction: Change the file.
    tools: [Write]
    next: [check]
    git_context: true
  - name: check
    persona: You are a test.
    instruction: Check the change.
    tools: [Read]
    next: [COMPLETE]
`
	sb, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Bwrap})
	if err != nil {
		if os.Getenv("BATON_REQUIRE_BWRAP") != "1" {
			t.Skipf("bubblewrap does not work here: %v", err)
		}
		t.Fatal(err)
	}
	f := newFixture(t, map[string]string{"git-step": gitPiece}, func(c *engine.Config) { c.Sandbox = sb })
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", f.ws, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(f.ws, "output", "notes.txt"), []byte("old line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "output/notes.txt")
	git("commit", "-q", "-m", "start")
	f.srv.Script(
		llmtest.Call("Write", `{"path":"output/notes.txt","content":"new line\n"}`),
		llmtest.Transition("check", "changed notes"),
		llmtest.Transition("COMPLETE", "checked"),
	)
	f.run(f.start("git-step", "x"))
	user := f.srv.Requests()[2].Messages[1].Text()
	for _, want := range []string{"## Changes in the workspace (git)", " M output/notes.txt", "-old line", "+new line"} {
		if !strings.Contains(user, want) {
			t.Errorf("the next movement's prompt lacks %q:\n%s", want, user)
		}
	}
}

func TestReadImageSentAsImagePart(t *testing.T) {
	f := newFixture(t, nil)
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.ws, "input", "shot.png"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f.srv.Script(
		llmtest.Call("ReadImage", `{"path":"input/shot.png"}`),
		llmtest.Transition("COMPLETE", "a black square"),
	)
	f.run(f.start("chat", "what is in the screenshot?"))
	second := f.srv.Requests()[1]
	var found bool
	for _, m := range second.Messages {
		for _, p := range m.Parts {
			if p.Type == "image_url" && strings.HasPrefix(p.ImageURL, "data:image/png;base64,") {
				found = m.Role == "user"
			}
		}
	}
	if !found {
		t.Errorf("no PNG image part in a user message of the next request: %+v", second.Messages)
	}
}

func TestInvalidUTF8AndHugeComment(t *testing.T) {
	f := newFixture(t, nil)
	f.comment(core.RoleUser, "bob", "bad \xff\xfe bytes and "+strings.Repeat("x", 1<<20))
	f.srv.Script(llmtest.Transition("COMPLETE", "ok"))
	fin := f.run(f.start("chat", "look \xff here"))
	if fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	user := f.srv.Requests()[0].Messages[1].Text()
	if !utf8.ValidString(user) {
		t.Errorf("the prompt is not valid UTF-8")
	}
	if len(user) > 20000 {
		t.Errorf("a 1 MB comment made a %d-byte prompt", len(user))
	}
}

// TestRedeliveredJobResumesAtItsMovement: a job whose worker died in its
// second movement starts there again, with the lessons it had carried, not
// from the start.
func TestRedeliveredJobResumesAtItsMovement(t *testing.T) {
	f := newFixture(t, map[string]string{"two-step": twoStep})
	f.srv.Script(
		llmtest.Transition("second", "first done", "lessons", "remember the port is 8080"),
		llmtest.Call("Read", `{"path":"input/none"}`),
	)
	j := f.start("two-step", "x")
	// The first attempt dies during the second movement: its context ends
	// while the engine waits for the next scripted reply.
	ctx, cancel := context.WithCancel(context.Background())
	f.srv.Handle(func(llmtest.Request) llmtest.Step { cancel(); return llmtest.Text("late").After(time.Second) })
	if _, err := f.eng.Run(ctx, worker.NewRun(j, f.store)); err == nil {
		t.Fatal("the cancelled attempt returned no error")
	}
	// Redelivered: a new attempt takes the job over.
	j2, err := f.store.StartJob(context.Background(), j.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if j2.Movement != "second" || j2.MovementCount != 1 {
		t.Fatalf("persisted progress: movement %q count %d, want second and 1", j2.Movement, j2.MovementCount)
	}
	before := len(f.srv.Requests())
	f.srv.Script(llmtest.Transition("COMPLETE", "done"))
	f.srv.Handle(nil)
	fin := f.run(j2)
	if fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	first := f.srv.Requests()[before]
	if !strings.Contains(first.Messages[0].Text(), "**second** (this step)") {
		t.Errorf("the redelivered job did not resume at its movement")
	}
	if !strings.Contains(first.Messages[1].Text(), "remember the port is 8080") {
		t.Errorf("the carried lessons were lost")
	}
}

func TestSteeringReachesTheNextRequest(t *testing.T) {
	f := newFixture(t, nil)
	f.comment(core.RoleUser, "alice", "summarise the report")
	steps := []llmtest.Step{
		llmtest.Call("Read", `{"path":"input/none"}`),
		llmtest.Transition("COMPLETE", "done"),
	}
	n := 0
	f.srv.Handle(func(llmtest.Request) llmtest.Step {
		if n == 0 { // a person writes while the first request is out
			f.comment(core.RoleUser, "bob", "only the first chapter, please")
			f.comment(core.RoleUser, "bob", "!status")
		}
		n++
		return steps[n-1]
	})
	fin := f.run(f.start("chat", "summarise the report"))
	reqs := f.srv.Requests()
	var steered []string
	for _, m := range reqs[1].Messages {
		if m.Role == "user" && strings.HasPrefix(m.Text(), "New message in the thread") {
			steered = append(steered, m.Text())
		}
	}
	if diff := cmp.Diff([]string{"New message in the thread from bob: only the first chapter, please"}, steered); diff != "" {
		t.Errorf("steering messages (-want +got):\n%s", diff)
	}
	recent, _ := f.store.RecentComments(context.Background(), f.task.ID, 1)
	if fin.SeenCommentID != recent[0].ID {
		t.Errorf("SeenCommentID = %d, want the newest comment %d", fin.SeenCommentID, recent[0].ID)
	}
}

func TestPreviousAnswerGivenToNextJob(t *testing.T) {
	f := newFixture(t, nil)
	answer := strings.Repeat("long answer ", 250) // 3,000 characters, 2,999 once trimmed
	f.srv.Script(llmtest.Transition("COMPLETE", answer))
	j1 := f.start("chat", "first question")
	f.finish(j1, f.run(j1))
	f.srv.Script(llmtest.Transition("COMPLETE", "second answer"))
	j2 := f.start("chat", "a follow-up")
	f.run(j2)
	user := f.srv.Requests()[1].Messages[1].Text()
	i := strings.Index(user, "## Previous answer in this thread\n")
	if i < 0 {
		t.Fatalf("no previous answer in the follow-up's prompt:\n%s", user)
	}
	section := user[i:]
	section = section[:strings.Index(section, "\n\n## Workspace")]
	body := strings.TrimPrefix(section, "## Previous answer in this thread\n")
	if !strings.HasPrefix(body, strings.Repeat("long answer ", 166)) || !strings.Contains(body, "[cut: 999 more characters]") {
		t.Errorf("the previous answer is not its first 2,000 characters, marked:\n%s", body)
	}
	// The first job saw no previous answer.
	if strings.Contains(f.srv.Requests()[0].Messages[1].Text(), "## Previous answer") {
		t.Errorf("the first job got a previous answer")
	}
}
