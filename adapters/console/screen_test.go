package console_test

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/adapters/console"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/engine"
)

// vt is a small terminal: it keeps the rows that the escapes the Screen
// writes leave on it (carriage return, newline, cursor up, erase line and
// below, save and restore the cursor).
type vt struct {
	rows     [][]rune
	row, col int
	saved    [2]int
}

func (v *vt) write(s string) {
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\r':
			v.col = 0
		case r == '\n':
			v.row++
			v.col = 0
		case r == 0x1b && i+1 < len(rs) && rs[i+1] == '7':
			v.saved = [2]int{v.row, v.col}
			i++
		case r == 0x1b && i+1 < len(rs) && rs[i+1] == '8':
			v.row, v.col = v.saved[0], v.saved[1]
			i++
		case r == 0x1b && i+1 < len(rs) && rs[i+1] == '[':
			j := i + 2
			for j < len(rs) && rs[j] >= '0' && rs[j] <= '9' {
				j++
			}
			n, _ := strconv.Atoi(string(rs[i+2 : j]))
			switch rs[j] {
			case 'A':
				v.row = max(v.row-max(n, 1), 0)
			case 'K':
				v.grow()
				v.rows[v.row] = v.rows[v.row][:min(v.col, len(v.rows[v.row]))]
			case 'J':
				v.grow()
				v.rows[v.row] = v.rows[v.row][:min(v.col, len(v.rows[v.row]))]
				v.rows = v.rows[:v.row+1]
			}
			i = j
		default:
			v.grow()
			line := v.rows[v.row]
			for len(line) < v.col {
				line = append(line, ' ')
			}
			if v.col < len(line) {
				line[v.col] = r
			} else {
				line = append(line, r)
			}
			v.rows[v.row] = line
			v.col++
		}
	}
}

func (v *vt) grow() {
	for len(v.rows) <= v.row {
		v.rows = append(v.rows, nil)
	}
}

// lines are the rows on the terminal, trailing empty ones dropped.
func (v *vt) lines() []string {
	var out []string
	for _, r := range v.rows {
		out = append(out, strings.TrimRight(string(r), " "))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// screenOut is a writer that is also a vt.
type screenOut struct {
	mu  sync.Mutex
	raw bytes.Buffer
	vt  vt
}

func (s *screenOut) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw.Write(p)
	s.vt.write(string(p))
	return len(p), nil
}

func (s *screenOut) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vt.lines()
}

func (s *screenOut) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw.String()
}

var at = time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC)

// TestTerminalBottom: on a terminal the tool calls are lines of the
// conversation, the spinner (with what the job does and its status) sits
// above the prompt while the job works, and once it is done the prompt is
// the last row, with no spinner left behind.
func TestTerminalBottom(t *testing.T) {
	out := &screenOut{}
	c := console.New(&service{}, strings.NewReader(""), out, "alice", console.Options{Terminal: true, Width: func() int { return 40 }})
	ctx := context.Background()
	if _, err := c.PostButtons(ctx, thread, "⏳ Working on it — piece chat.", []chat.Button{{Action: "stop:7", Label: "Stop"}}); err != nil {
		t.Fatal(err)
	}
	c.Step(ctx, engine.Step{JobID: 7, Kind: engine.StepThinking, At: time.Now()})
	got := out.lines()
	if n := len(got); n < 2 || !strings.Contains(got[n-2], "thinking 0s · Working on it") || got[n-1] != ">" {
		t.Fatalf("the bottom is not the spinner, then the prompt:\n%s", strings.Join(got, "\n"))
	}
	c.Step(ctx, engine.Step{JobID: 7, Kind: engine.StepTool, Tool: "Bash", Subject: "go test ./... -run 'a very long pattern that does not fit'", At: time.Now()})
	c.Step(ctx, engine.Step{JobID: 7, Kind: engine.StepTool, Tool: "Read", Subject: "core/job.go", At: time.Now()})
	c.Step(ctx, engine.Step{JobID: 7, Kind: engine.StepThinking, At: time.Now()})
	if _, err := c.Post(ctx, thread, "The tests pass."); err != nil {
		t.Fatal(err)
	}
	c.Step(ctx, engine.Step{JobID: 7, Kind: engine.StepDone, At: time.Now()})
	if err := c.UpdateButtons(ctx, thread, "1-1", "✅ Done — job #7.", nil); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"  Bash: go test ./... -run 'a very lon…",
		"  Read core/job.go",
		"",
		"baton: The tests pass.",
		"  ✅ Done — job #7.",
		">",
	}
	if diff := cmp.Diff(want, out.lines()); diff != "" {
		t.Errorf("terminal (-want +got):\n%s\nraw: %q", diff, out.String())
	}
}

// TestTerminalTypedLineStays: the line a person typed (the terminal echoed
// it) stays after its prompt, and the spinner is redrawn below it.
func TestTerminalTypedLineStays(t *testing.T) {
	out := &screenOut{}
	scr := console.NewScreen(out, console.ScreenOptions{Terminal: true})
	scr.SetPrompt("> ")
	scr.Begin(1, "thinking", time.Now())
	out.Write([]byte("!status\n")) // the terminal's echo
	scr.Entered("!status", true)
	scr.Println("job #1 running")
	got := out.lines()
	if len(got) != 4 || got[0] != "> !status" || got[1] != "job #1 running" || !strings.Contains(got[2], "thinking") || got[3] != ">" {
		t.Errorf("terminal:\n%s", strings.Join(got, "\n"))
	}
}

// TestApprovalOnTerminal: an approval asked while a job's spinner turns
// puts its prompt at the bottom; the answer decides it and the prompt is
// back to messages.
func TestApprovalOnTerminal(t *testing.T) {
	out := &screenOut{}
	svc := &service{}
	r, w := ioPipe()
	c := console.New(svc, r, out, "alice", console.Options{Terminal: true})
	ctx := context.Background()
	c.Step(ctx, engine.Step{JobID: 7, Kind: engine.StepThinking, At: time.Now()})
	postApproval(t, c, "7.1")
	c.Step(ctx, engine.Step{JobID: 7, Kind: engine.StepDone, At: time.Now()})
	if got := out.lines(); got[len(got)-1] != strings.TrimSpace(console.AnswerPrompt) {
		t.Fatalf("the approval prompt is not at the bottom:\n%s", strings.Join(got, "\n"))
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	w.Write([]byte("y\n"))
	w.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"approve:7.1"}, svc.values()); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if strings.Contains(strings.Join(out.lines(), "\n"), "thinking") {
		t.Errorf("a spinner was left behind:\n%s", strings.Join(out.lines(), "\n"))
	}
}

// TestEcho: with input that is not a terminal, each line shows after its
// prompt, Settle runs after each, and nothing is an escape code or a
// spinner.
func TestEcho(t *testing.T) {
	var out bytes.Buffer
	svc := &service{}
	settled := 0
	var c *console.Console
	c = console.New(svc, strings.NewReader("hello\n\nsecond\n"), &out, "alice", console.Options{Echo: true, Settle: func(ctx context.Context) error {
		settled++
		c.Step(ctx, engine.Step{JobID: int64(settled), Kind: engine.StepThinking, At: time.Now()})
		c.Step(ctx, engine.Step{JobID: int64(settled), Kind: engine.StepTool, Tool: "Read", Subject: "input/a.txt", At: time.Now()})
		c.Step(ctx, engine.Step{JobID: int64(settled), Kind: engine.StepDone, At: time.Now()})
		_, err := c.Post(ctx, thread, "answer "+strconv.Itoa(settled))
		return err
	}})
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := "Baton — type a request; /new starts a new thread, /quit leaves. !help lists the commands.\n" +
		"> hello\n  Read input/a.txt\n\nbaton: answer 1\n" +
		"  Read input/a.txt\n\nbaton: answer 2\n" +
		"> second\n  Read input/a.txt\n\nbaton: answer 3\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"hello", "second"}, svc.messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// TestHelpListsConsoleCommands: !help adds the console's own commands to
// the thread's.
func TestHelpListsConsoleCommands(t *testing.T) {
	svc := &service{messageReply: chat.Reply{Text: "Commands: `!status`, `!help`."}}
	out := session(t, svc, "!help\n", nil)
	for _, want := range []string{"`!status`", "/new", "/quit"} {
		if !strings.Contains(out, want) {
			t.Errorf("!help does not list %s:\n%s", want, out)
		}
	}
}

// TestFailurePrintedOnce: a failure is posted, then is the job's status:
// it is printed once.
func TestFailurePrintedOnce(t *testing.T) {
	var out bytes.Buffer
	c := console.New(&service{}, strings.NewReader(""), &out, "alice", console.Options{})
	ctx := context.Background()
	status, err := c.PostButtons(ctx, thread, "⏳ Working on it — piece chat.", []chat.Button{{Action: "stop:7", Label: "Stop"}})
	if err != nil {
		t.Fatal(err)
	}
	failed := "❌ Job #7 failed: the language model could not be reached."
	if _, err := c.PostButtons(ctx, thread, failed, []chat.Button{{Action: "retry:7", Label: "Retry"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateButtons(ctx, thread, status, failed, nil); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "failed"); n != 1 {
		t.Errorf("the failure was printed %d times:\n%s", n, out.String())
	}
}

// TestPostFileNamesThePath: a file the job produced is listed with its
// path.
func TestPostFileNamesThePath(t *testing.T) {
	var out bytes.Buffer
	c := console.New(&service{}, strings.NewReader(""), &out, "alice", console.Options{})
	if _, err := c.PostFile(context.Background(), thread, "/data/workspaces/1/output/report.md", 42, "output/report.md"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "/data/workspaces/1/output/report.md (42 bytes)") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestStepLine(t *testing.T) {
	for _, tc := range []struct {
		tool, subject, want string
	}{
		{"Read", "core/job.go", "Read core/job.go"},
		{"Bash", "go test ./...\necho done", "Bash: go test ./... echo done"},
		{"Glob", `{"pattern":"**/*.go"}`, "Glob **/*.go"},
		{"Grep", `{"path":"core","pattern":"TODO","ignore_case":true}`, "Grep TODO core"},
		{"Checklist", `{"items":[{"text":"a"}]}`, "Checklist"},
		{"Odd", `not json`, "Odd not json"},
	} {
		if got := console.StepLine(engine.Step{Tool: tc.tool, Subject: tc.subject}); got != tc.want {
			t.Errorf("StepLine(%s, %q) = %q, want %q", tc.tool, tc.subject, got, tc.want)
		}
	}
}

// TestPlainScreenHasNoEscapes: a Screen on a writer that is not a terminal
// writes lines and never an escape code or the spinner.
func TestPlainScreenHasNoEscapes(t *testing.T) {
	var out bytes.Buffer
	scr := console.NewScreen(&out, console.ScreenOptions{})
	scr.SetPrompt("> ")
	scr.Begin(1, "thinking", time.Now())
	scr.Line("  Read a.txt")
	scr.Detail(1, "chat: 1 movement")
	scr.End(1)
	if got := out.String(); got != "  Read a.txt\n" {
		t.Errorf("output = %q", got)
	}
}

// ioPipe is io.Pipe, for input that comes while the console runs.
func ioPipe() (*io.PipeReader, *io.PipeWriter) { return io.Pipe() }

// TestTerminalTypedAhead: lines typed while Baton is idle stay as the
// terminal echoed them, each once.
func TestTerminalTypedAhead(t *testing.T) {
	out := &screenOut{}
	scr := console.NewScreen(out, console.ScreenOptions{Terminal: true})
	scr.SetPrompt("> ")
	out.Write([]byte("/new\nhello\n")) // typed ahead, echoed
	scr.Entered("/new", true)
	scr.Println("(a new thread)")
	scr.Entered("hello", true)
	if diff := cmp.Diff([]string{"> /new", "hello", "(a new thread)", ">"}, out.lines()); diff != "" {
		t.Errorf("terminal (-want +got):\n%s", diff)
	}
}

// TestStreamOnSharedTerminal: stdout and stderr on one terminal, the
// answer's text streams in on stdout with the spinner off and no escape
// of the model's own; the next step ends its line and brings the spinner
// back below it.
func TestStreamOnSharedTerminal(t *testing.T) {
	out := &screenOut{}
	now := at
	scr := console.NewScreen(out, console.ScreenOptions{Terminal: true, Text: out, Now: func() time.Time { return now }})
	scr.Begin(1, "thinking", at)
	scr.Stream("Let me ")
	scr.Stream("look\x1b[2J at it.")
	scr.Detail(1, "chat: 1 movement") // no spinner drawn over the text
	if got := out.lines(); len(got) != 1 || got[0] != "Let me look[2J at it." {
		t.Fatalf("while streaming, terminal:\n%s\nraw %q", strings.Join(got, "\n"), out.String())
	}
	scr.Line("  Read a.txt")
	scr.Begin(1, "Read", at)
	want := []string{"Let me look[2J at it.", "  Read a.txt", "⠋ Read 0s · chat: 1 movement"}
	if diff := cmp.Diff(want, out.lines()); diff != "" {
		t.Errorf("terminal (-want +got):\n%s\nraw: %q", diff, out.String())
	}
	scr.Stream("Done.\n")
	scr.End(1)
	scr.Close()
	want = []string{"Let me look[2J at it.", "  Read a.txt", "Done."}
	if diff := cmp.Diff(want, out.lines()); diff != "" {
		t.Errorf("at the end, terminal (-want +got):\n%s\nraw: %q", diff, out.String())
	}
}

// TestStreamWithoutText: a Screen without a Text writer streams nothing.
func TestStreamWithoutText(t *testing.T) {
	var out bytes.Buffer
	scr := console.NewScreen(&out, console.ScreenOptions{})
	scr.Stream("hidden")
	scr.Line("shown")
	if out.String() != "shown\n" {
		t.Errorf("output = %q", out.String())
	}
}
