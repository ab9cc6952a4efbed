package engine_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
)

// logEntry is one line of a movement log as written.
type logEntry struct {
	Role      string   `json:"role"`
	Content   string   `json:"content"`
	Parts     []string `json:"parts"`
	ToolCalls []struct {
		ID, Name, Arguments string
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
	Note       string `json:"note"`
}

// movementLog reads logs/movements/name back.
func (f *fixture) movementLog(name string) []logEntry {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.ws, "logs", "movements", name))
	if err != nil {
		f.t.Fatal(err)
	}
	var out []logEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var e logEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			f.t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// entryOf is a recorded request's message as the movement log writes it.
func entryOf(m llmtest.Message) logEntry {
	e := logEntry{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
	for _, p := range m.Parts {
		e.Parts = append(e.Parts, p.Text)
	}
	for _, c := range m.ToolCalls {
		e.ToolCalls = append(e.ToolCalls, struct{ ID, Name, Arguments string }{c.ID, c.Name, c.Arguments})
	}
	return e
}

const logged = `
name: logged
description: test piece whose movement log is read back
movements:
  - name: work
    persona: You are a test.
    instruction: Do it.
    tools: [Read, Write]
    next: [COMPLETE]
    max_iterations: 10
`

// TestMovementLogHoldsTheWholeMovement: the movement log holds every
// message of the movement in order — the prompts, the assistant turns with
// their calls, the tool results, the reminder after a text-only reply, the
// transition and its result — exactly as the model was sent them.
func TestMovementLogHoldsTheWholeMovement(t *testing.T) {
	f := newFixture(t, map[string]string{"logged": logged})
	write := llmtest.Step{Text: "Writing the file.", ToolCalls: []llmtest.ToolCall{{ID: "w1", Name: "Write", Arguments: `{"path":"output/a.txt","content":"hello"}`}}}
	reads := llmtest.Step{ToolCalls: []llmtest.ToolCall{
		{ID: "r1", Name: "Read", Arguments: `{"path":"output/a.txt"}`},
		{ID: "r2", Name: "Read", Arguments: `{"path":"input/missing.txt"}`},
	}}
	done := llmtest.Step{ToolCalls: []llmtest.ToolCall{{ID: "t1", Name: "transition", Arguments: `{"next_step":"COMPLETE","summary":"wrote a.txt"}`}}}
	f.srv.Script(write, llmtest.Text("Let me think."), reads, done)
	j := f.start("logged", "write a file")
	if fin := f.run(j); fin.To != core.JobSucceeded || fin.ResultSummary != "wrote a.txt" {
		t.Fatalf("finish = %+v", fin)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	var want []logEntry
	for _, m := range reqs[len(reqs)-1].Messages {
		want = append(want, entryOf(m))
	}
	want = append(want, entryOf(llmtest.Message{Role: "assistant", ToolCalls: done.ToolCalls}))
	got := f.movementLog("job1-01-work.jsonl")
	if len(got) != len(want)+1 {
		t.Fatalf("the log has %d entries, want %d (the last request, the final reply and the transition's result):\n%+v", len(got), len(want)+1, got)
	}
	if diff := cmp.Diff(want, got[:len(want)]); diff != "" {
		t.Errorf("the log differs from what the model was sent (-want +got):\n%s", diff)
	}
	if last := got[len(got)-1]; last.Role != "tool" || last.ToolCallID != "t1" || last.Name != "transition" {
		t.Errorf("the log's last entry = %+v, want the transition's result", last)
	}
	var roles []string
	for _, e := range got {
		roles = append(roles, e.Role)
	}
	wantRoles := []string{"system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "tool", "assistant", "tool"}
	if diff := cmp.Diff(wantRoles, roles); diff != "" {
		t.Errorf("roles (-want +got):\n%s", diff)
	}
}

// TestMovementLogKeepsWhatCompactionReplaced: after masking and
// compaction rebuilt the conversation, the movement log still holds every
// tool result in full, and the summary that replaced them.
func TestMovementLogKeepsWhatCompactionReplaced(t *testing.T) {
	f := newFixture(t, map[string]string{"one-step": oneStep}, compactionOn)
	var steps []llmtest.Step
	var files []string
	for i := range 8 {
		rel := f.inputFile("r"+string(rune('a'+i))+".txt", 300)
		files = append(files, rel)
		steps = append(steps, read(rel).WithUsage(30000+8000*i, 50))
	}
	f.srv.Script(steps...)
	f.srv.Handle(func(r llmtest.Request) llmtest.Step {
		if isSummaryRequest(r) {
			return llmtest.Text("## Done so far\nread the files").WithUsage(5000, 100)
		}
		return llmtest.Transition("COMPLETE", "read them all").WithUsage(20000, 50)
	})
	j := f.start("one-step", "x")
	if fin := f.run(j); fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	evs := f.contextEvents(j.ID)
	if !contains(evs, "context_compacted") {
		t.Fatalf("no compaction happened (events %v): the test needs one", evs)
	}
	got := f.movementLog("job1-01-only.jsonl")
	results, summaries := 0, 0
	for _, e := range got {
		if e.Role == "tool" && e.Name == "Read" && !strings.HasPrefix(e.Content, "[Output of") {
			results++
		}
		if e.Role == "user" && strings.Contains(e.Content, "read the files") {
			summaries++
		}
	}
	if results != len(files) || summaries != 1 {
		t.Errorf("the log holds %d whole Read results (want %d) and %d summaries (want 1)", results, len(files), summaries)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMovementLogWriteErrorsLogged: a movement log that cannot be written
// — logs/movements is a file, or the log cannot take its lines — is
// reported in Baton's log with the job and the movement; the job itself
// goes on.
func TestMovementLogWriteErrorsLogged(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, ws string)
	}{
		{"logs/movements is a file", func(t *testing.T, ws string) {
			if err := os.WriteFile(filepath.Join(ws, "logs", "movements"), []byte("not a directory"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"the disk is full", func(t *testing.T, ws string) {
			if _, err := os.Stat("/dev/full"); err != nil {
				t.Skip("no /dev/full")
			}
			dir := filepath.Join(ws, "logs", "movements")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/dev/full", filepath.Join(dir, "job1-01-work.jsonl")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out syncBuffer
			f := newFixture(t, map[string]string{"logged": logged}, func(c *engine.Config) {
				c.Logger = slog.New(slog.NewJSONHandler(&out, nil))
			})
			tt.setup(t, f.ws)
			f.srv.Script(llmtest.Transition("COMPLETE", "done"))
			if fin := f.run(f.start("logged", "x")); fin.To != core.JobSucceeded {
				t.Fatalf("finish = %+v", fin)
			}
			found := false
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				var rec map[string]any
				if json.Unmarshal([]byte(line), &rec) != nil {
					continue
				}
				msg, _ := rec["msg"].(string)
				if strings.Contains(msg, "movement log") && rec["job"] == float64(1) && rec["movement"] == "work" && rec["err"] != nil {
					found = true
				}
			}
			if !found {
				t.Errorf("no log record of the failed movement log with job 1 and movement work:\n%s", out.String())
			}
		})
	}
}
