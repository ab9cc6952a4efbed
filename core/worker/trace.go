package worker

import (
	"context"

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
	return t.Start(ctx, "job.attempt",
		core.Attr{Key: "baton.job.id", Value: j.ID}, core.Attr{Key: "baton.task.id", Value: j.TaskID},
		core.Attr{Key: "baton.job.attempt", Value: j.Attempt}, core.Attr{Key: "baton.piece", Value: j.Piece})
}
