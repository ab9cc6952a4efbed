package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/baton-bot/baton/core"
)

// attemptSpan starts the span of job j's attempt, a child of the span that
// created the job (its newest core.EventTrace event) when there is one.
// With no tracer it reads nothing and starts nothing.
func (x *Executor) attemptSpan(ctx context.Context, j core.Job) (context.Context, core.Span) {
	t := x.cfg.Tracer
	if t == nil {
		return core.StartSpan(ctx, nil, "")
	}
	rctx, cancel := x.settleCtx(ctx)
	evs, err := x.store.Events(rctx, j.ID)
	cancel()
	if err != nil {
		x.log.Warn("the job's trace could not be read; its attempt starts a trace of its own", "job", j.ID, "err", err)
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == core.EventTrace {
			ctx = t.WithTraceParent(ctx, evs[i].Detail)
			break
		}
	}
	attrs := []core.Attr{{Key: "baton.job.id", Value: j.ID}, {Key: "baton.task.id", Value: j.TaskID},
		{Key: "baton.job.attempt", Value: j.Attempt}, {Key: "baton.piece", Value: j.Piece}}
	if !j.QueuedAt.IsZero() {
		// The queue's part of the story: how long the job waited for this
		// claim (as ExecutorMeter.QueueWait measures it).
		attrs = append(attrs, core.Attr{Key: "baton.queue.wait_ms", Value: time.Since(j.QueuedAt).Milliseconds()})
	}
	return t.Start(ctx, "job.attempt", attrs...)
}

// traceChildren records the traceparent of ctx's span (the parent's
// attempt) with the queued subtask jobs of parentID, so that their
// attempts join the parent's trace. With no tracer it does nothing.
func (x *Executor) traceChildren(ctx context.Context, parentID int64, log *slog.Logger) {
	t := x.cfg.Tracer
	if t == nil {
		return
	}
	tp := t.TraceParent(ctx)
	if tp == "" {
		return
	}
	children, err := x.store.Jobs(ctx, core.JobFilter{ParentJobID: parentID, States: []core.JobState{core.JobQueued}})
	if err != nil {
		log.Warn("the subtasks' trace could not be recorded; they start traces of their own", "err", err)
		return
	}
	for _, c := range children {
		if err := x.store.AddEvent(ctx, core.JobEvent{JobID: c.ID, At: time.Now(), Kind: core.EventTrace, Detail: tp}); err != nil {
			log.Warn("a subtask's trace could not be recorded; it starts a trace of its own", "subtask", c.ID, "err", err)
		}
	}
}
