package slack

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat/chattest"
	"github.com/baton-bot/baton/core/llmtest"
)

// BenchmarkIngest sends signed app_mention events to the Events API
// endpoint at 200 events/s, each a new thread, and times each from the
// moment it was sent to the moment a worker claimed its job (from the
// job's own "claimed" event in the store, written in the claim's
// transaction); events whose job was not claimed within 60 s of the last
// send are counted as lost, and answers other than 200 (a full backlog
// answers 503, which Slack retries) as refused. The store keeps times in
// milliseconds, so the send time is cut to the millisecond too: each
// latency is exact within a millisecond. The whole system runs in this
// process: the Slack adapter in HTTP mode, the conversation service,
// SQLite, the in-process queue and 16 workers whose scripted model
// answers at once.
//
//	go test ./adapters/slack/ -run '^$' -bench Ingest -benchtime 1x
func BenchmarkIngest(b *testing.B) {
	const rate, seconds = 200, 10
	sys := chattest.Start(b, chattest.Options{Concurrency: 16})
	sys.LLM.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "ok") })
	f := newFakeSlack(b)
	_, base := startHTTP(b, sys.Service, f, Config{})

	var mu sync.Mutex
	refused := 0                   // answers other than 200 (503: the backlog was full)
	sent := map[string]time.Time{} // ts → when it was sent
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	b.ResetTimer()
	for i := range rate * seconds {
		<-tick.C
		ts := fmt.Sprintf("1800000000.%06d", i)
		body := mentionEvent(fmt.Sprintf("Ev%d", i), "U1", "<@UBOT> ping", ts, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := sign(b, base, "/slack/events", body, time.Now(), "application/json")
			mu.Lock()
			sent[ts] = time.Now()
			mu.Unlock()
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				mu.Lock()
				refused++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// Let the last jobs be claimed, polling the store's counts (cheap: the
	// poll runs while the system still works).
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := sys.Store.CountJobs(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var total int64
		for _, c := range n {
			total += c
		}
		if (total >= int64(len(sent)) && n[core.JobQueued] == 0) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.StopTimer()
	jobs, err := sys.Store.Jobs(ctx, core.JobFilter{})
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for _, j := range jobs {
		evs, err := sys.Store.Events(ctx, j.ID)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range evs {
			if e.Kind == core.EventClaimed {
				lat = append(lat, e.At.Sub(sent[j.TriggerMsgID].Truncate(time.Millisecond)))
				break
			}
		}
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		b.Fatal("no job was claimed")
	}
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(sent)-len(lat)), "lost")
	b.ReportMetric(float64(len(sent)), "events")
	b.ReportMetric(float64(refused), "refused")
	if len(jobs) > len(sent) {
		b.Errorf("%d jobs for %d events: an event started more than one job", len(jobs), len(sent))
	}
}
