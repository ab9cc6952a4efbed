package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/llmtest"
)

// TestReplaySuite runs the agent loop against every provider persona,
// plain and streamed: parallel tool calls (a Write, then a Read of what
// it wrote), a compaction of the movement, an ASK and its resumption, the
// COMPLETE, with each persona's opening quirk (a 400 naming max_tokens, a
// 429, a 503, an error inside a 200) got past on the way.
func TestReplaySuite(t *testing.T) {
	for _, p := range llmtest.Personas() {
		for _, stream := range []bool{false, true} {
			name := p.Name
			if p == &llmtest.PersonaOpenAIReasoning {
				name = "openai-reasoning"
			}
			name += map[bool]string{false: "/plain", true: "/stream"}[stream]
			t.Run(name, func(t *testing.T) { replay(t, p, stream) })
		}
	}
}

func replay(t *testing.T, p *llmtest.Persona, stream bool) {
	if len(p.Sources) == 0 {
		t.Fatalf("persona %s names no source", p.Title)
	}
	f := newFixtureLLM(t, map[string]string{"two-step": twoStep}, func(c *llm.Config) {
		c.Stream, c.Provider, c.Model, c.MaxRetries = stream, p.Name, p.Model, 2
		c.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	}, compactionOn, func(c *engine.Config) { c.Model = p.Model })
	f.srv.SetPersona(p)
	f.comment(core.RoleUser, "alice", "write the report")
	usage := !(stream && p.NoStreamUsage)
	summary := []llmtest.Step{}
	if usage {
		// Reported usage at 81 % of the window: the movement is
		// compacted before its next request. (Without usage there is no
		// such figure: Baton's own count of this short job stays low.)
		summary = append(summary, llmtest.Text("## Goal\nWrite the report.\n## State\noutput/draft.txt written and read.").WithUsage(30000, 200))
	}
	f.srv.Script(
		llmtest.Calls(
			llmtest.Text("Writing the draft, then reading it back."),
			llmtest.Call("Write", `{"path":"output/draft.txt","content":"draft — 下書き\nsecond line"}`),
			llmtest.Call("Read", `{"path":"output/draft.txt"}`),
		).WithReasoning("The draft first; then check it.").Streamed(6).WithUsage(81000, 60),
	)
	f.srv.Script(summary...)
	f.srv.Script(
		llmtest.Transition("second", "drafted").WithUsage(9000, 30),
		llmtest.Transition("ASK", "need the year", "question", "Which year?").WithUsage(5000, 30),
	)
	j := f.start("two-step", "write the report")
	fin := f.run(j)
	if len(fin.Comments) != 1 || fin.Comments[0].Text != "Which year?" {
		t.Fatalf("the ASK did not come: %+v", fin)
	}
	waiting := f.finish(j, fin)
	f.comment(core.RoleUser, "alice", "2025")
	if ok, err := f.store.ResumeJob(context.Background(), j.ID, waiting.WaitSeq); !ok || err != nil {
		t.Fatalf("resume = %v, %v", ok, err)
	}
	j2, err := f.store.StartJob(context.Background(), j.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Script(llmtest.Transition("COMPLETE", "report for 2025").WithUsage(6000, 30))
	if fin := f.run(j2); fin.To != core.JobSucceeded || fin.ResultSummary != "report for 2025" {
		t.Fatalf("finish = %+v", fin)
	}
	if f.srv.Pending() != 0 {
		t.Errorf("%d scripted answers left", f.srv.Pending())
	}

	if got, err := os.ReadFile(filepath.Join(f.ws, "output", "draft.txt")); err != nil || string(got) != "draft — 下書き\nsecond line" {
		t.Errorf("output/draft.txt = %q, %v", got, err)
	}
	if evs := f.contextEvents(j.ID); usage != slices.Contains(evs, "context_compacted") {
		t.Errorf("usage reported %v, context events %v: want a compaction exactly when usage is reported", usage, evs)
	}
	reqs := f.srv.Requests()
	var after llmtest.Request // the request that carries the calls' results
	for _, r := range reqs {
		checkPairs(t, "request", r)
		if r.Stream != stream {
			t.Errorf("a request with stream %v", r.Stream)
		}
		for _, m := range r.Messages {
			if m.Role == "tool" && strings.Contains(m.Text(), "second line") {
				after = r
			}
		}
	}
	results := 0
	for _, m := range after.Messages {
		if m.Role == "tool" {
			results++
		}
	}
	if results != 2 {
		t.Errorf("%d tool results after the parallel calls, want 2 (each call run once)", results)
	}
	for _, m := range after.Messages {
		if m.Role == "assistant" && strings.Contains(m.Content, "<tool_call>") {
			t.Errorf("a text tool call was sent back as text: %q", m.Content)
		}
		wantBack := ""
		if p.Name == "deepseek" && len(m.ToolCalls) > 0 {
			wantBack = "The draft first; then check it."
		}
		if m.Role == "assistant" && m.ReasoningContent != wantBack {
			t.Errorf("reasoning sent back %q, want %q", m.ReasoningContent, wantBack)
		}
	}
	if p.Quirk != nil && p != &llmtest.PersonaOpenAIReasoning && (len(reqs) < 2 || string(reqs[0].Raw) != string(reqs[1].Raw)) {
		t.Errorf("the persona's opening error was not answered by sending the same request again")
	}
	switch {
	case p.Name == "azure":
		if r := reqs[0]; r.Header.Get("api-key") != "test-key" || r.Header.Get("Authorization") != "" || r.Query.Get("api-version") == "" {
			t.Errorf("azure request: api-key %q, Authorization %q, api-version %q", r.Header.Get("api-key"), r.Header.Get("Authorization"), r.Query.Get("api-version"))
		}
	case p == &llmtest.PersonaOpenAIReasoning:
		// Refused once, learnt, and sent the right way from then on.
		for i, r := range reqs {
			if want := map[bool]string{true: "max_tokens", false: "max_completion_tokens"}[i == 0]; r.MaxTokensParam != want {
				t.Errorf("request %d sent %s, want %s", i+1, r.MaxTokensParam, want)
			}
		}
	case p.Name == "openrouter":
		if reqs[0].Header.Get("X-Title") != "Baton" {
			t.Errorf("no attribution headers: %v", reqs[0].Header)
		}
	}
	// The usage counted is what the persona reported (Ollama's streams
	// report none: the job's count is then Baton's own estimate).
	job, err := f.store.Job(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if job.PromptTokens == 0 {
		t.Errorf("no prompt tokens counted")
	}
}
