package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// stream is what a deliverer knows of one run's progress message (an
// outbox Ref made by chat.ProgressRef).
type stream struct {
	msgID    string // the live message; "" before the first view
	version  int64  // the newest view shown
	fallback bool   // the platform refused live messages: the status message shows the views
	closed   bool   // the final view was delivered: later views are stale
	stopped  bool   // the final view closed the live message
	shown    bool   // ... with the answer in it
}

// progress shows view v of outbox message m: in the run's live message
// when the poster is a chat.ProgressPoster that the platform lets stream,
// else as the text of the job's status message. A view older than one
// shown is skipped, and none after the final one: the final state wins.
// The final view's answer is delivered exactly once: in the closing of
// the live message when it fits one post, else as posts of its own
// (split or uploaded as any post).
func (d *Deliverer) progress(ctx context.Context, task core.Task, m core.OutboxMessage, p chat.Payload) (string, error) {
	v := *p.Progress
	v.Owner = task.OwnerUser
	d.mu.Lock()
	if d.streams == nil {
		d.streams = map[string]*stream{}
	}
	st, ok := d.streams[m.Ref]
	if !ok {
		if len(d.streams) >= pruneAt {
			for ref, old := range d.streams {
				if old.closed {
					delete(d.streams, ref)
				}
			}
		}
		st = &stream{}
		d.streams[m.Ref] = st
	}
	cur := *st
	d.mu.Unlock()
	if cur.closed || (v.Version < cur.version && !v.Final) {
		return cur.msgID, nil
	}
	if !v.Final && !m.CreatedAt.IsZero() && d.cfg.Now().Sub(m.CreatedAt) > staleView {
		// Delivery fell behind (a rate limit held the thread): later
		// views, each the whole state, follow this one, and the final
		// one closes the message whatever was skipped.
		return cur.msgID, nil
	}
	save := func(f func(st *stream)) {
		d.mu.Lock()
		defer d.mu.Unlock()
		f(st)
	}
	pp, live := d.poster.(chat.ProgressPoster)
	lim := d.poster.Limits()
	if live && !cur.fallback {
		answer := ""
		if v.Final && v.Answer != "" && len(d.split(v.Answer, lim.Post)) == 1 {
			answer = v.Answer
		}
		msgID := cur.msgID
		if msgID == "" && !cur.stopped {
			// A deliverer that restarted goes on with the message an
			// earlier one started.
			if id, err := d.store.RefMessage(ctx, task.ID, m.Ref); err == nil {
				msgID = id
			}
		}
		var id string
		answered := false
		err := error(nil)
		if !(v.Final && cur.stopped) {
			err = d.pace.do(ctx, task.Thread, d.cfg.Now, max(lim.Every, v.Every), func() (err error) {
				id, answered, err = pp.Progress(ctx, task.Thread, msgID, v, answer)
				if errors.Is(err, chat.ErrProgressGone) && msgID != "" {
					d.log.Info("the progress message is gone; starting another", "task_id", task.ID, "job_id", m.JobID)
					id, answered, err = pp.Progress(ctx, task.Thread, "", v, answer)
				}
				return err
			})
		}
		switch {
		case errors.Is(err, chat.ErrNoProgress):
			d.log.Info("the platform refuses live progress; editing the status message instead", "task_id", task.ID, "err", err)
			save(func(st *stream) { st.fallback = true })
		case err != nil:
			return "", fmt.Errorf("show the progress of job %d: %w", m.JobID, err)
		default:
			if id == "" {
				id = cur.msgID
			}
			shown := answered
			if cur.stopped { // an earlier try closed it; only the answer's post is left
				id, shown = cur.msgID, cur.shown
			}
			save(func(st *stream) {
				st.msgID, st.version = id, v.Version
				if v.Final {
					st.stopped, st.shown = true, shown
				}
			})
			if !v.Final {
				return id, nil
			}
			if !shown && v.Answer != "" {
				if _, err := d.post(ctx, task.Thread, m, v.Answer, nil); err != nil {
					return "", fmt.Errorf("post the answer of job %d: %w", m.JobID, err)
				}
			}
			save(func(st *stream) { st.closed = true })
			return id, nil
		}
	}
	// The status message shows the view; the final view's answer is a
	// post of its own.
	if v.Final {
		if v.Answer != "" {
			if _, err := d.post(ctx, task.Thread, m, v.Answer, nil); err != nil {
				return "", fmt.Errorf("post the answer of job %d: %w", m.JobID, err)
			}
		}
		save(func(st *stream) { st.closed = true })
		return "", nil
	}
	status := m
	status.Ref = ""
	id, err := d.update(ctx, task, status, chat.Payload{Text: chat.RenderProgress(d.cfg.Locale, v, progressLines), Buttons: p.Buttons})
	if err != nil {
		return "", err
	}
	save(func(st *stream) { st.version = v.Version })
	return id, nil
}

// staleView is the age at which a view that is not the final one is
// skipped rather than shown: the backlog a rate limit leaves coalesces.
const staleView = 3 * time.Second

// progressLines is how many of the last tool calls a status message
// shows.
const progressLines = 5
