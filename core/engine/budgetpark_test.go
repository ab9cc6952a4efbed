package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
)

// resume answers the job's question with text and runs its next attempt.
func (f *fixture) resume(j core.Job, waiting core.Job, attempt int64, text string) (core.Job, core.Finish) {
	f.t.Helper()
	ctx := context.Background()
	f.comment(core.RoleUser, "alice", text)
	if ok, err := f.store.ResumeJob(ctx, j.ID, waiting.WaitSeq); !ok || err != nil {
		f.t.Fatalf("resume = %v, %v", ok, err)
	}
	j2, err := f.store.StartJob(ctx, j.ID, attempt)
	if err != nil {
		f.t.Fatal(err)
	}
	return j2, f.run(j2)
}

// TestCostBudgetParksAndContinues: with requests of $0.045 each and a job
// budget of $0.10, the job parks before its third request with the
// question; `continue` resumes it at that request, which follows the two
// made (none made again), and the job completes within the raised limit.
// Every request's usage is in the store with its cost.
func TestCostBudgetParksAndContinues(t *testing.T) {
	f := newFixture(t, map[string]string{"reader": reader}, func(c *engine.Config) {
		c.Prices = map[string]engine.Price{"test-model": {Input: 3, Output: 15}}
		c.Budgets = engine.Budgets{Default: engine.Limits{engine.ScopeJob: {Cost: 0.10}}}
	})
	f.srv.Script(
		llmtest.Call("Read", `{"path":"input/a"}`).WithUsage(10000, 1000),
		llmtest.Call("Read", `{"path":"input/b"}`).WithUsage(10000, 1000),
		llmtest.Call("Read", `{"path":"input/c"}`).WithUsage(10000, 1000),
		llmtest.Transition("COMPLETE", "read them").WithUsage(10000, 1000),
	)
	j := f.start("reader", "read")
	fin := f.run(j)
	if fin.To != core.JobWaitingHuman || fin.WaitKind != core.WaitBudget {
		t.Fatalf("finish = %+v, want a budget question", fin)
	}
	if want := "This job has used $0.09 of its $0.10 budget. Reply `continue` to allow $0.10 more"; !strings.HasPrefix(fin.Question, want) {
		t.Errorf("question = %q, want it to start %q", fin.Question, want)
	}
	if n := len(f.srv.Requests()); n != 2 {
		t.Fatalf("%d requests before the park, want 2 (the third would pass the budget)", n)
	}
	waiting := f.finish(j, fin)

	_, fin = f.resume(j, waiting, 2, "continue")
	if fin.To != core.JobSucceeded {
		t.Fatalf("after continue: finish = %+v", fin)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests in all, want 4", len(reqs))
	}
	third := reqs[2]
	if len(third.Messages) != len(reqs[1].Messages)+2 {
		t.Errorf("the resumed request holds %d messages, want the second's %d plus its answer and result", len(third.Messages), len(reqs[1].Messages))
	}
	for _, m := range third.Messages {
		if strings.Contains(m.Text(), "continue") && m.Role == "user" {
			t.Errorf("the answer to the budget question was handed to the agent: %q", m.Text())
		}
	}
	sum, err := f.store.SumUsage(context.Background(), core.UsageFilter{JobID: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Requests != 4 || sum.PromptTokens != 40000 || sum.CompletionTokens != 4000 || sum.Cost < 0.1799 || sum.Cost > 0.1801 {
		t.Errorf("usage = %+v, want 4 requests of 10,000 + 1,000 tokens, $0.18", sum)
	}
}

// TestTokenBudget: llm.max_tokens_per_job is the job's token budget: a
// request that would pass it parks the job with the question instead.
func TestTokenBudget(t *testing.T) {
	f := newFixture(t, map[string]string{"two-step": twoStep}, func(c *engine.Config) { c.MaxTokensPerJob = 5000 })
	f.srv.Script(llmtest.Call("Read", `{"path":"input/none"}`).WithUsage(4000, 1200), llmtest.Transition("COMPLETE", "done"))
	fin := f.run(f.start("two-step", "x"))
	if fin.To != core.JobWaitingHuman || !strings.Contains(fin.Question, "5,200 of its 5,000 tokens") {
		t.Fatalf("finish = %+v", fin)
	}
}

// TestCompactionRequestWithinBudget: the compaction's summary request is
// budget-checked like the movement's: with a job budget of 500,000 tokens
// that the summary would pass, the job parks before it is sent (13
// requests, no summary among them); after `continue` the job goes on.
func TestCompactionRequestWithinBudget(t *testing.T) {
	f := newFixture(t, map[string]string{"one-step": oneStep}, func(c *engine.Config) {
		compactionOn(c)
		c.Budgets = engine.Budgets{Default: engine.Limits{engine.ScopeJob: {Tokens: 500000}}}
	})
	var files []string
	for i := range 14 {
		files = append(files, f.inputFile(fmt.Sprintf("r%02d.txt", i+1), 400))
	}
	var steps []llmtest.Step
	for i := range 10 {
		steps = append(steps, read(files[i]).WithUsage(10000+4000*i, 50))
	}
	steps = append(steps,
		read(files[10]).WithUsage(62000, 50),
		read(files[11]).WithUsage(72000, 50),
		read(files[12]).WithUsage(81000, 50), // before request 14: compaction due
	)
	f.srv.Script(steps...)
	j := f.start("one-step", "read the reports")
	fin := f.run(j)
	if fin.To != core.JobWaitingHuman || fin.WaitKind != core.WaitBudget {
		t.Fatalf("finish = %+v, want a budget question", fin)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 13 {
		t.Fatalf("%d requests before the park, want 13 (the summary would pass the budget)", len(reqs))
	}
	for i, r := range reqs {
		if isSummaryRequest(r) {
			t.Errorf("request %d is a summary request, sent past the budget", i+1)
		}
	}
	// The resumed movement's window is counted afresh from its messages
	// (the scripted usage above is far larger than they are), so it goes
	// on without compacting.
	f.srv.Script(read(files[13]).WithUsage(9000, 50), llmtest.Transition("COMPLETE", "all read").WithUsage(12000, 50))
	waiting := f.finish(j, fin)
	_, fin = f.resume(j, waiting, 2, "continue")
	if fin.To != core.JobSucceeded || len(f.srv.Requests()) != 15 {
		t.Fatalf("after continue: finish = %+v after %d requests, want success after 15", fin, len(f.srv.Requests()))
	}
}
