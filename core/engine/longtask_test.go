package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/tokens"
)

// The long-task benchmark: one movement reads 40 chunks of 5–15k tokens
// each, with facts planted early, in the middle and late, and reports the
// facts it found. The scripted model behaves like a careful agent: each
// turn it notes the facts of the results it just got and reads the next
// chunk; after the last chunk it transitions with every fact present in
// what it was sent. The scripted summariser keeps every fact present in
// what it was sent. The same script runs in three arms:
//
//   - raw: a window so large that no level fires (the reference);
//   - note: compaction off, a 128k window — the design note's ladder;
//   - compaction: compaction on, the same 128k window;
//   - summary-only: compaction on with masking off, the same window — to
//     show what the summaries alone do.
//
// The server reports usage as a provider would: its own count, 10 % above
// the offline tokenizer's, which the engine's correction learns; and it
// models a provider's prompt cache (llmtest.CacheStats), whose share of
// the prompt tokens each arm reports beside the limit no client could pass.
//
//	go test ./core/engine/ -run '^$' -bench LongTask -benchtime 1x

const (
	longChunks   = 40
	longWindow   = 128_000
	rawWindow    = 10_000_000
	serverFactor = 1.10 // the provider's tokens per offline token
)

// factPlaces are the chunks that carry planted facts: early, middle, late.
var factPlaces = []int{2, 4, 19, 22, 36, 39}

var factRE = regexp.MustCompile(`FACT-[0-9]+-[A-Z0-9]{6}`)

const longPiece = `
name: long
movements:
  - name: work
    persona: You are a careful analyst.
    instruction: "Read input/chunk-01.txt to input/chunk-40.txt in order, one at a time, and report every FACT you find. {task}"
    tools: [Read]
    next: [COMPLETE]
    default_next: COMPLETE
    max_iterations: 80
`

// longResult is one run of the long task.
type longResult struct {
	forced      bool // the movement was force-transitioned
	facts       int  // planted facts in the final summary
	planted     int
	prompt      int // prompt tokens reported over the run
	calls       int // LLM requests
	compactions int
	masks       int
	cache       llmtest.CacheStats // the server's prompt cache
}

// longModel is the scripted model and summariser of one run.
type longModel struct {
	counter tokens.Counter

	mu     sync.Mutex
	counts map[string]int // guarded by mu: tokens of message texts seen
	reads  int            // chunks read so far (the script's own state)
	prompt int
	calls  int
}

func (m *longModel) count(s string) int {
	m.mu.Lock()
	n, ok := m.counts[s]
	m.mu.Unlock()
	if ok {
		return n
	}
	n = m.counter.Count(s)
	m.mu.Lock()
	m.counts[s] = n
	m.mu.Unlock()
	return n
}

// usage is what the provider reports for req: its tokens are 10 % more
// than the offline tokenizer's.
func (m *longModel) usage(req llmtest.Request) int {
	n := 0
	for _, msg := range req.Messages {
		n += 4 + m.count(msg.Text())
		for _, c := range msg.ToolCalls {
			n += m.count(c.Name) + m.count(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += m.count(t.Name) + m.count(t.Description) + m.count(string(t.Parameters))
	}
	return int(float64(n) * serverFactor)
}

// facts returns the distinct facts in texts, in order of appearance.
func facts(texts ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range texts {
		for _, f := range factRE.FindAllString(t, -1) {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	return out
}

func (m *longModel) answer(req llmtest.Request) llmtest.Step {
	prompt := m.usage(req)
	var all []string
	for _, msg := range req.Messages {
		all = append(all, msg.Text())
		for _, c := range msg.ToolCalls {
			all = append(all, c.Arguments)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	m.prompt += prompt
	if len(req.Tools) == 0 {
		// The summariser: the sections, and every fact it was sent.
		text := "## Goal\nRead the 40 chunks and report every FACT.\n## Done\nChunks read so far.\n## State\nFacts found: " +
			strings.Join(facts(all...), ", ") + "\n## Next step\nRead the next chunk.\n## Transition\ncontinue"
		return llmtest.Text(text).WithUsage(prompt, 200)
	}
	if m.reads >= longChunks {
		return llmtest.Transition("COMPLETE", "Facts: "+strings.Join(facts(all...), ", ")).WithUsage(prompt, 100)
	}
	// Note the facts of the results since the model's last message.
	var fresh []string
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role == "tool"; i-- {
		fresh = append(fresh, req.Messages[i].Text())
	}
	m.reads++
	step := read(fmt.Sprintf("input/chunk-%02d.txt", m.reads))
	step.Text = fmt.Sprintf("Reading chunk %d.", m.reads)
	if f := facts(fresh...); len(f) > 0 {
		step.Text = "Found " + strings.Join(f, ", ") + ". " + step.Text
	}
	return step.WithUsage(prompt, 60)
}

// writeChunks writes the 40 chunks of run seed into the fixture's input/
// and returns the planted facts.
func writeChunks(f *fixture, seed int) []string {
	f.t.Helper()
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	counter := tokens.Default()
	var planted []string
	words := strings.Fields("request latency cache miss worker queue lease retry backoff shard replica index commit rollback timeout socket buffer header payload token schema column")
	for c := 1; c <= longChunks; c++ {
		target := 5000 + rng.IntN(10001)
		var b strings.Builder
		fact := -1
		for _, p := range factPlaces {
			if p == c {
				fact = rng.IntN(40) // where in the chunk, in lines
			}
		}
		line := 0
		for counter.Count(b.String()) < target {
			for range 25 {
				if line == fact {
					id := fmt.Sprintf("FACT-%d-%06X", c, rng.IntN(1<<24))
					planted = append(planted, id)
					fmt.Fprintf(&b, "note: %s is the value to report\n", id)
				}
				fmt.Fprintf(&b, "2026-11-30T09:%02d:%02d %s", line/60%60, line%60, words[rng.IntN(len(words))])
				for range 10 {
					fmt.Fprintf(&b, " %s=%d", words[rng.IntN(len(words))], rng.IntN(10000))
				}
				b.WriteByte('\n')
				line++
			}
		}
		if err := os.WriteFile(filepath.Join(f.ws, "input", fmt.Sprintf("chunk-%02d.txt", c)), []byte(b.String()), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	return planted
}

// runLong runs the long task once in arm ("raw", "note", "compaction",
// "summary-only").
func runLong(tb testing.TB, arm string, seed int) longResult {
	tb.Helper()
	f := newFixture(tb, map[string]string{"long": longPiece}, func(c *engine.Config) {
		c.ContextWindow = longWindow
		c.MaxOutputTokens = 4096
		switch arm {
		case "raw":
			c.ContextWindow = rawWindow
		case "compaction":
			c.Compaction.Enabled = true
		case "summary-only":
			c.Compaction = engine.Compaction{Enabled: true, Mask: 1}
		}
	})
	planted := writeChunks(f, seed)
	model := &longModel{counter: tokens.Default(), counts: map[string]int{}}
	f.srv.ModelPromptCache()
	f.srv.Handle(model.answer)
	j := f.start("long", "Be thorough.")
	fin := f.run(j)
	evs, err := f.store.Events(context.Background(), j.ID)
	if err != nil {
		tb.Fatal(err)
	}
	res := longResult{planted: len(planted), prompt: model.prompt, calls: model.calls, cache: f.srv.CacheStats()}
	for _, e := range evs {
		switch e.Kind {
		case "context_force_transition":
			res.forced = true
		case "context_compacted":
			res.compactions++
		case "context_masked":
			res.masks++
		}
	}
	if fin.To != core.JobSucceeded {
		tb.Fatalf("%s: job ended %s: %s", arm, fin.To, fin.Error)
	}
	got := map[string]bool{}
	for _, x := range facts(fin.ResultSummary) {
		got[x] = true
	}
	for _, p := range planted {
		if got[p] {
			res.facts++
		}
	}
	return res
}

// BenchmarkLongTask reports, per arm over five runs of the long task:
// movements completed and force-transitioned, the share of planted facts
// reported, the prompt tokens and LLM calls per run, and compactions.
func BenchmarkLongTask(b *testing.B) {
	for _, arm := range []string{"raw", "note", "compaction", "summary-only"} {
		b.Run(arm, func(b *testing.B) {
			var completed, forced, facts, planted, prompt, calls, compactions, masks int
			var cache llmtest.CacheStats
			const runs = 5
			for range b.N {
				for seed := 1; seed <= runs; seed++ {
					r := runLong(b, arm, seed)
					if r.forced {
						forced++
					} else {
						completed++
					}
					facts += r.facts
					planted += r.planted
					prompt += r.prompt
					calls += r.calls
					compactions += r.compactions
					masks += r.masks
					cache.PromptTokens += r.cache.PromptTokens
					cache.CachedTokens += r.cache.CachedTokens
					cache.NewTokens += r.cache.NewTokens
				}
			}
			n := float64(b.N * runs)
			b.ReportMetric(float64(completed)/n, "completed/run")
			b.ReportMetric(float64(forced)/n, "forced/run")
			b.ReportMetric(100*float64(facts)/float64(planted), "facts%")
			b.ReportMetric(float64(prompt)/n, "prompt_tokens/run")
			b.ReportMetric(float64(calls)/n, "llm_calls/run")
			b.ReportMetric(float64(compactions)/n, "compactions/run")
			b.ReportMetric(float64(masks)/n, "maskings/run")
			// The share of prompt tokens the provider's cache served, and
			// beside it the limit: what was new in each request (never sent
			// before, byte for byte) could not have been cached.
			b.ReportMetric(100*float64(cache.CachedTokens)/float64(cache.PromptTokens), "cached%")
			b.ReportMetric(100*(1-float64(cache.NewTokens)/float64(cache.PromptTokens)), "cache_limit%")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// TestLongTaskTargets holds the compaction arm to its targets on one run
// of the long task: no forced transition, at least 80 % of the planted
// facts reported (the raw arm reports them all), at most 60 % of the raw
// arm's prompt tokens; and shows the note's ladder forcing the same task.
func TestLongTaskTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("long task: skipped with -short")
	}
	raw := runLong(t, "raw", 1)
	note := runLong(t, "note", 1)
	comp := runLong(t, "compaction", 1)
	t.Logf("raw %+v\nnote %+v\ncompaction %+v", raw, note, comp)
	if raw.forced || raw.facts != raw.planted || raw.compactions+raw.masks != 0 {
		t.Errorf("raw arm: %+v, want every fact, nothing forced, masked or compacted", raw)
	}
	if !note.forced {
		t.Errorf("note arm: %+v, want the ladder to force the transition", note)
	}
	if comp.forced {
		t.Errorf("compaction arm: forced transition")
	}
	if comp.facts*100 < comp.planted*80 {
		t.Errorf("compaction arm reported %d of %d facts, want at least 80 %%", comp.facts, comp.planted)
	}
	if comp.prompt*100 > raw.prompt*60 {
		t.Errorf("compaction arm spent %d prompt tokens, over 60 %% of the raw arm's %d", comp.prompt, raw.prompt)
	}
	// Byte-stable prefixes: without masking every request is served from
	// the cache up to its new messages (the limit, less the 128-token
	// steps); with it, each masking re-sends what follows the first result
	// masked, but no more.
	share := func(c llmtest.CacheStats) (cached, limit float64) {
		return float64(c.CachedTokens) / float64(c.PromptTokens), 1 - float64(c.NewTokens)/float64(c.PromptTokens)
	}
	if cached, limit := share(raw.cache); cached < limit-0.01 {
		t.Errorf("raw arm: %.1f %% of prompt tokens cached, want its limit %.1f %%: a request's prefix changed", 100*cached, 100*limit)
	}
	if cached, limit := share(comp.cache); cached < 0.6 {
		t.Errorf("compaction arm: %.1f %% of prompt tokens cached (limit %.1f %%), want at least 60 %%", 100*cached, 100*limit)
	}
}
