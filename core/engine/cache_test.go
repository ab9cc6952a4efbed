package engine_test

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llmtest"
)

// statusRecorder keeps the last status it is told.
type statusRecorder struct {
	mu   sync.Mutex
	last engine.Status // guarded by mu
}

func (r *statusRecorder) Observe(_ context.Context, s engine.Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = s
}

// TestCachedShareRecorded: the tokens a provider's prompt cache served
// are in each usage event with the job's share so far, and in the status
// the observer is told; Baton's requests within a movement keep their
// prefix byte for byte, so every request after the first is served from
// the cache up to its new messages.
func TestCachedShareRecorded(t *testing.T) {
	rec := &statusRecorder{}
	f := newFixture(t, map[string]string{"two-step": twoStep}, func(c *engine.Config) { c.Observer = rec })
	f.srv.ModelPromptCache()
	big := f.inputFile("big.txt", 3000)
	f.srv.Script(
		read(big).WithUsage(2000, 10),
		llmtest.Call("Checklist", `{}`).WithUsage(5300, 10),
		llmtest.Transition("second", "read it").WithUsage(5400, 10),
		llmtest.Transition("COMPLETE", "done").WithUsage(1500, 10),
	)
	j := f.start("two-step", "read big")
	if fin := f.run(j); fin.To != core.JobSucceeded {
		t.Fatalf("finish = %+v", fin)
	}
	evs := eventsOf(t, f, j, "usage")
	if len(evs) != 4 {
		t.Fatalf("usage events %q", evs)
	}
	re := regexp.MustCompile(`^prompt=(\d+) completion=\d+ cached=(\d+) reported=true cached_share=(\d+)%$`)
	var prompt, cached int
	for i, d := range evs {
		m := re.FindStringSubmatch(d)
		if m == nil {
			t.Fatalf("usage event %q", d)
		}
		p, _ := strconv.Atoi(m[1])
		c, _ := strconv.Atoi(m[2])
		share, _ := strconv.Atoi(m[3])
		prompt, cached = prompt+p, cached+c
		if want := cached * 100 / prompt; share != want {
			t.Errorf("event %d: share %d%%, want %d%%", i, share, want)
		}
		switch {
		case i == 1 && c < 1024:
			t.Errorf("event 1: %d of %d prompt tokens cached, want the first request's prompt", c, p)
		case i == 2 && c < p*90/100:
			// Only the Checklist call and its result are new.
			t.Errorf("event 2: %d of %d prompt tokens cached, want over 90 %%", c, p)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.last.CachedTokens != int64(cached) || rec.last.PromptTokens != int64(prompt) {
		t.Errorf("status %+v, want %d cached of %d", rec.last, cached, prompt)
	}
}
