package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// eventsPoll is how often the event stream looks for new events.
const eventsPoll = 250 * time.Millisecond

// events serves GET /api/tasks/{id}/events: the task's progress events
// (chat.EventProgress job events, the same stream the chat threads show)
// as Server-Sent Events, oldest first, each with its id. A client that
// reconnects with Last-Event-ID (or ?after=) gets the events after that
// one: none lost, none repeated. The stream ends once the task's newest
// job is over and its events were sent; a task that never ran stays open
// until the client leaves.
func (a *API) events(w http.ResponseWriter, r *http.Request) {
	task, ok := a.task(w, r)
	if !ok {
		return
	}
	after := int64(0)
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("after")
	}
	if last != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(last), 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "Last-Event-ID must be the id of an event of this stream.")
			return
		}
		after = n
	}
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	ctx := r.Context()
	tick := time.NewTicker(eventsPoll)
	defer tick.Stop()
	for {
		evs, over, err := a.progressAfter(ctx, task.ID, after)
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("reading a task's progress events failed", "task_id", task.ID, "err", err)
			}
			return
		}
		for _, e := range evs {
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.id, e.kind, e.data); err != nil {
				return
			}
			after = e.id
		}
		if flusher != nil && len(evs) > 0 {
			flusher.Flush()
		}
		if over {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sseEvent is one event of the stream.
type sseEvent struct {
	id         int64
	kind, data string
}

// progressAfter returns the task's progress events after id after, in id
// order, and whether the stream is over: the task's newest job ended
// before the events were read, so that none can follow.
func (a *API) progressAfter(ctx context.Context, taskID, after int64) ([]sseEvent, bool, error) {
	jobs, err := a.store.Jobs(ctx, core.JobFilter{TaskID: taskID})
	if err != nil {
		return nil, false, fmt.Errorf("jobs of task %d: %w", taskID, err)
	}
	over := len(jobs) > 0 && jobs[0].State.Terminal() // newest first
	var out []sseEvent
	for _, j := range slices.Backward(jobs) {
		evs, err := a.store.Events(ctx, j.ID)
		if err != nil {
			return nil, false, fmt.Errorf("events of job %d: %w", j.ID, err)
		}
		for _, e := range evs {
			if e.Kind != chat.EventProgress || e.ID <= after {
				continue
			}
			kind := "progress"
			if k := progressKind(e.Detail); k != "" {
				kind = k
			}
			out = append(out, sseEvent{id: e.ID, kind: kind, data: strings.ReplaceAll(e.Detail, "\n", " ")})
		}
	}
	slices.SortFunc(out, func(x, y sseEvent) int { return int(x.id - y.id) })
	return out, over, nil
}

// progressKind is the kind a progress event's JSON names.
func progressKind(detail string) string {
	_, rest, ok := strings.Cut(detail, `"kind":"`)
	if !ok {
		return ""
	}
	k, _, _ := strings.Cut(rest, `"`)
	return k
}
