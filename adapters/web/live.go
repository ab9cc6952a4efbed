package web

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/baton-bot/baton/core"
)

// Live streams are bounded: one ends after liveFor, and the page opens a
// new one (EventSource reconnects).
const (
	liveFor   = 30 * time.Minute
	liveWrite = 10 * time.Second // a write that takes longer ends the stream
)

// live is a job's server-sent events: "change" whenever the job moves
// (state, movement, model call, tokens), read from the store every
// LiveEvery, and "end" once it is finished. static/live.js then fetches
// the timeline again.
func (u *UI) live(w http.ResponseWriter, r *http.Request, s session) {
	id, err := pathID(r)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	j, err := u.store.Job(r.Context(), id)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event string, n int) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(liveWrite))
		if _, err := io.WriteString(w, fmt.Sprintf("event: %s\ndata: %d\n\n", event, n)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	tick := time.NewTicker(u.cfg.LiveEvery)
	defer tick.Stop()
	end := time.NewTimer(liveFor)
	defer end.Stop()
	last, n := fingerprint(j), 0
	if !send("open", n) {
		return
	}
	for {
		if j.State.Terminal() {
			send("end", n)
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-end.C:
			return
		case <-tick.C:
		}
		if j, err = u.store.Job(r.Context(), id); err != nil {
			return
		}
		if f := fingerprint(j); f != last {
			last, n = f, n+1
			if !send("change", n) {
				return
			}
		}
	}
}

// fingerprint changes whenever the job moves.
func fingerprint(j core.Job) string {
	return fmt.Sprintf("%s|%s|%d|%d|%d|%d|%d", j.State, j.Movement, j.MovementCount, j.Iteration, j.PromptTokens, j.CompletionTokens, j.Attempt)
}
