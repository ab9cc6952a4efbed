package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
)

// TestBudgetsConfigRefused: a budget in dollars without the model's price,
// and negative or absurd budgets, stop Baton at start (exit 2) naming the
// key; token budgets need no price.
func TestBudgetsConfigRefused(t *testing.T) {
	data := map[string]string{"BATON_DATA_DIR": t.TempDir()}
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"cost without price", "llm:\n  model: big-model\nbudgets:\n  job:\n    cost: 2\n", "no price for model big-model"},
		{"channel cost without price", "llm:\n  model: big-model\nbudgets:\n  channels:\n    slack:C1:\n      channel_daily: {cost: 5}\n", "no price for model big-model"},
		{"negative tokens", "budgets:\n  task:\n    tokens: -1\n", "budgets.task.tokens"},
		{"negative cost", "llm:\n  prices:\n    gpt-4.1-mini: {input: 1, output: 2}\nbudgets:\n  user_daily:\n    cost: -3\n", "budgets.user_daily.cost"},
		{"absurd cost", "llm:\n  prices:\n    gpt-4.1-mini: {input: 1, output: 2}\nbudgets:\n  job:\n    cost: 1e12\n", "budgets.job.cost"},
		{"absurd tokens", "budgets:\n  job:\n    tokens: 1000000000000000\n", "budgets.job.tokens"},
		{"negative price", "llm:\n  prices:\n    m: {input: -1}\n", "llm.prices.m.input"},
		{"channel not qualified", "budgets:\n  channels:\n    C1:\n      job: {tokens: 5}\n", "budgets.channels.C1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeConfig(t, "log:\n  level: warn\n"+tc.yaml)
			code, _, stderr := runMain(t, data, "config", "--config", cfg)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, want 2 naming %q; stderr:\n%s", code, tc.want, stderr)
			}
		})
	}
	ok := writeConfig(t, "log:\n  level: warn\nllm:\n  model: big-model\n  max_tokens_per_job: 9000\nbudgets:\n  channel_daily:\n    tokens: 100000\n")
	if code, _, stderr := runMain(t, data, "config", "--config", ok); code != 0 {
		t.Errorf("token budgets without prices: exit %d\n%s", code, stderr)
	}
}

// TestEngineBudgets: llm.max_tokens_per_job is the job's token budget
// unless budgets.job.tokens is set; channels keep the scopes they set.
func TestEngineBudgets(t *testing.T) {
	c := DefaultConfig()
	c.LLM.MaxTokensPerJob = 9000
	c.Budgets.ChannelDaily.Cost = 3
	c.Budgets.Channels = map[string]BudgetScopes{"slack:C1": {Job: BudgetLimit{Cost: 1}}}
	b := engineBudgets(c)
	if got := b.For("slack:C2"); got[engine.ScopeJob].Tokens != 9000 || got[engine.ScopeChannelDaily].Cost != 3 {
		t.Errorf("defaults = %+v", got)
	}
	if got := b.For("slack:C1"); got[engine.ScopeJob].Cost != 1 || got[engine.ScopeChannelDaily].Cost != 3 {
		t.Errorf("slack:C1 = %+v", got)
	}
	c.Budgets.Job.Tokens = 500
	if got := engineBudgets(c).For("x:y")[engine.ScopeJob].Tokens; got != 500 {
		t.Errorf("budgets.job.tokens set: job tokens %d, want 500", got)
	}
}

// TestRunBudgetThenContinue: `baton run` whose job reaches its token budget
// (llm.max_tokens_per_job) exits 3 with the question; `continue abc` is
// refused (exit 2) changing nothing; `baton run --task N continue` resumes
// the job at the request it had not made, and it completes.
func TestRunBudgetThenContinue(t *testing.T) {
	n := newNewcomer(t)
	n.conf = writeConfig(t, "log:\n  level: warn\ntools:\n  bash:\n    sandbox: none\nllm:\n  max_tokens_per_job: 5000\n")
	n.srv.Script(
		llmtest.Call("Read", `{"path":"input/none.txt"}`).WithUsage(3000, 500),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Read it."}`).WithUsage(3600, 100),
	)
	code, stdout, stderr := n.run("read the file")
	if code != 3 || !strings.Contains(stdout, "This job has used 3,500 of its 5,000 tokens. Reply `continue`") {
		t.Fatalf("exit %d, want 3 with the budget question\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	task := regexp.MustCompile(`task #(\d+)`).FindStringSubmatch(stderr)[1]
	if !strings.Contains(stderr, "baton run --task "+task+" continue") {
		t.Errorf("stderr does not say how to go on:\n%s", stderr)
	}
	if code, _, stderr := n.run("--task", task, "continue abc"); code != 2 || !strings.Contains(stderr, "nothing changed") {
		t.Errorf("continue abc: exit %d, want 2\n%s", code, stderr)
	}
	if len(n.srv.Requests()) != 1 {
		t.Fatalf("%d requests, want 1", len(n.srv.Requests()))
	}
	code, stdout, stderr = n.run("--task", task, "continue")
	if code != 0 || strings.TrimSpace(stdout) != "Read it." {
		t.Fatalf("continue: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	reqs := n.srv.Requests()
	if len(reqs) != 2 || len(reqs[1].Messages) != len(reqs[0].Messages)+2 {
		t.Errorf("%d requests; the resumed one should follow the first with its call and result", len(reqs))
	}
}

// TestUsageJSONSumsTheJobs: `baton usage --json` sums what the jobs run
// recorded, request by request, with their cost by llm.prices; a row of a
// task that no longer exists still counts.
func TestUsageJSONSumsTheJobs(t *testing.T) {
	n := newNewcomer(t)
	n.conf = writeConfig(t, "log:\n  level: warn\ntools:\n  bash:\n    sandbox: none\nllm:\n  model: m1\n  prices:\n    m1: {input: 2, cached_input: 1, output: 10}\n")
	n.env["OPENAI_MODEL"] = "m1"
	n.srv.Script(
		llmtest.Call("Read", `{"path":"input/none.txt"}`).WithUsage(3000, 500).WithCached(1000),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"one"}`).WithUsage(4000, 100),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"two"}`).WithUsage(1000, 50),
	)
	for _, text := range []string{"first job", "second job"} {
		if code, stdout, stderr := n.run(text); code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", text, code, stdout, stderr)
		}
	}
	// A row of a task that is gone (its id was never used).
	st, err := openStore(context.Background(), func() Config { c := DefaultConfig(); c.DataDir = n.env["BATON_DATA_DIR"]; return c }(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddUsage(context.Background(), core.Usage{JobID: 999, TaskID: 999, Channel: "slack:C9", Model: "m1", PromptTokens: 10, Cost: 0.5}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	var out, errOut bytes.Buffer
	m := NewMain()
	m.Stdout, m.Stderr, m.Env = &out, &errOut, mapEnv(n.env)
	if code := m.Report(m.Run(context.Background(), []string{"usage", "--config", n.conf, "--json"})); code != 0 {
		t.Fatalf("baton usage: exit %d\n%s", code, errOut.String())
	}
	var r core.UsageReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// (3000-1000)*2 + 1000*1 + 500*10 = 10,000; 4000*2 + 100*10 = 9,000;
	// 1000*2 + 50*10 = 2,500 millionths of a dollar; and the gone task's $0.5.
	wantCost := (10000.0+9000+2500)/1e6 + 0.5
	if r.Total.Requests != 4 || r.Total.PromptTokens != 8010 || r.Total.CachedTokens != 1000 || r.Total.CompletionTokens != 650 ||
		math.Abs(r.Total.Cost-wantCost) > 1e-9 {
		t.Errorf("total = %+v, want 4 requests, 8,010 + 650 tokens, $%v", r.Total, wantCost)
	}
	var byTask, byModel core.UsageSum
	for _, s := range r.ByTask {
		byTask.Requests += s.Requests
		byTask.Cost += s.Cost
	}
	byModel = r.ByModel["m1"]
	if byTask.Requests != 4 || math.Abs(byTask.Cost-wantCost) > 1e-9 || byModel.Requests != 4 {
		t.Errorf("by task %+v, by model %+v: want them to sum to the total", byTask, byModel)
	}
	if _, ok := r.ByTask["999"]; !ok {
		t.Errorf("the gone task's usage is not reported: %v", r.ByTask)
	}
}

// TestCostBudgetNeedsPiecesModelsPriced: a movement naming a model of its
// own needs that model's price too when a budget is in dollars; baton
// refuses to start (exit 2) naming the model and the movement.
func TestCostBudgetNeedsPiecesModelsPriced(t *testing.T) {
	pieces := t.TempDir()
	mustWrite(t, filepath.Join(pieces, "pricey.yaml"), `name: pricey
description: {en: Answer with another model, ja: 別のモデルで答える}
movements:
  - name: answer
    model: other-model
    tools: [Read]
    next: [COMPLETE]
    default_next: COMPLETE
    instruction: {en: Answer the request., ja: 依頼に答えてください。}
`)
	data := map[string]string{"BATON_DATA_DIR": t.TempDir(), "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
	conf := writeConfig(t, fmt.Sprintf("log:\n  level: warn\npieces_dir: %s\nllm:\n  model: big-model\n  prices:\n    big-model: {input: 1, output: 2}\nbudgets:\n  job:\n    cost: 2\n", pieces))
	code, _, stderr := runMain(t, data, "run", "--config", conf, "--piece", "pricey", "hello")
	if code != 2 || !strings.Contains(stderr, "no price for model other-model") || !strings.Contains(stderr, "answer") {
		t.Errorf("exit %d, want 2 naming other-model and its movement; stderr:\n%s", code, stderr)
	}
}
