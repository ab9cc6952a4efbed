package e2e_test

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sse is one Server-Sent Event as a client reads it.
type sse struct {
	ID, Event, Data string
}

// readEvents reads the task's event stream from after lastID ("" from the
// start) until it ends or n events came (n <= 0: until it ends), then
// disconnects.
func (w *apiWorld) readEvents(id int64, lastID string, n int) []sse {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", w.url+"/api/tasks/"+strconv.FormatInt(id, 10)+"/events", nil)
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		w.t.Fatalf("events: status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []sse
	var cur sse
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			out = append(out, cur)
			cur = sse{}
			if n > 0 && len(out) >= n {
				return out
			}
		case strings.HasPrefix(line, "id: "):
			cur.ID = line[len("id: "):]
		case strings.HasPrefix(line, "event: "):
			cur.Event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			cur.Data = line[len("data: "):]
		}
	}
	if ctx.Err() != nil {
		w.t.Fatalf("the event stream did not end: %v", ctx.Err())
	}
	return out
}

// TestAPIEventsResume: a client of a task's event stream disconnects
// mid-job and reconnects with Last-Event-ID; what it got in the two
// connections is the whole stream, in order, none lost or repeated.
func TestAPIEventsResume(t *testing.T) {
	w := newAPIWorld(t, apiSetup{token: apiToken})
	script := progressScript(5, "Streamed.")
	script[2] = script[2].After(1500 * time.Millisecond) // the job still runs at the disconnect
	w.llm.Script(script...)
	id := w.create(`{"text": "build it", "piece": "plan-implement-verify"}`)

	first := w.readEvents(id, "", 3)
	if len(first) != 3 {
		t.Fatalf("%d events before the disconnect, want 3", len(first))
	}
	rest := w.readEvents(id, first[len(first)-1].ID, 0)
	w.waitJob(id, "succeeded")
	all := w.readEvents(id, "", 0)

	got := append(append([]sse(nil), first...), rest...)
	if !slices.Equal(got, all) {
		t.Fatalf("before and after the disconnect:\n%v\nthe whole stream:\n%v", got, all)
	}
	var kinds []string
	prev := int64(0)
	for _, e := range all {
		n, err := strconv.ParseInt(e.ID, 10, 64)
		if err != nil || n <= prev {
			t.Fatalf("event id %q after %d: want increasing ids", e.ID, prev)
		}
		prev = n
		if !slices.Contains(kinds, e.Event) {
			kinds = append(kinds, e.Event)
		}
	}
	for _, k := range []string{"movement_started", "tool_started", "tool_finished", "movement_ended"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("no %s event in the stream: %q", k, kinds)
		}
	}
	tools := 0
	for _, e := range all {
		if e.Event == "tool_finished" {
			tools++
		}
	}
	if tools != 7 {
		t.Errorf("%d tool_finished events, want 7 (2 in plan, 5 in implement)", tools)
	}
}
