package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/baton-bot/baton/core"
)

// Engine runs a job that the executor marked running. It returns how the
// job ends; an error is a failed run, retried until MaxFailures.
//
// Run must watch ctx: when it is cancelled (context.Cause says why), Run
// returns promptly and whatever it returns is discarded in favour of the
// cancellation's outcome.
type Engine interface {
	Run(ctx context.Context, r *Run) (core.Finish, error)
}

// EngineFunc adapts a function to Engine.
type EngineFunc func(ctx context.Context, r *Run) (core.Finish, error)

// Run calls f.
func (f EngineFunc) Run(ctx context.Context, r *Run) (core.Finish, error) { return f(ctx, r) }

// Run is one attempt of a job as the engine sees it. Its writes are fenced
// on the attempt: once another attempt has taken the job over they fail with
// core.ErrStale and change nothing.
type Run struct {
	Job   core.Job
	store core.JobStore
}

// NewRun returns the run of job j, whose attempt is j.Attempt, writing to
// store. Executors make runs; engines' tests do too.
func NewRun(j core.Job, store core.JobStore) *Run { return &Run{Job: j, store: store} }

// Attempt returns the fencing token of this run.
func (r *Run) Attempt() int64 { return r.Job.Attempt }

// Save persists the job's progress (at every movement boundary).
func (r *Run) Save(ctx context.Context, p core.Progress) error {
	if err := r.store.SaveProgress(ctx, r.Job.ID, r.Job.Attempt, p); err != nil {
		return fmt.Errorf("save progress of job %d: %w", r.Job.ID, err)
	}
	return nil
}

// Event appends to the job's history while this run's attempt holds the
// job (fenced: an error wrapping core.ErrStale once it lost it or ended).
func (r *Run) Event(ctx context.Context, kind, movement, detail string) error {
	return r.store.AddEvent(ctx, core.JobEvent{JobID: r.Job.ID, At: time.Now(), Kind: kind, Movement: movement, Detail: detail,
		Attempt: r.Job.Attempt})
}

// Notifier says in a job's thread what happens to it. The messages it
// returns are written to the outbox with the change they describe.
type Notifier interface {
	// Claimed returns the messages of job j, about to start running under
	// j.Attempt (the claim's attempt); they are written with the claim, in
	// its transaction.
	Claimed(ctx context.Context, j core.Job) []core.OutboxMessage
	// Finishing returns the messages that go with fin, the end of j's run.
	Finishing(ctx context.Context, j core.Job, fin core.Finish) []core.OutboxMessage
	// Finished is told the job as the finish left it, once committed.
	Finished(ctx context.Context, j core.Job, fin core.Finish)
}

// Store is what an Executor needs of the store.
type Store interface {
	core.JobStore
	AddOutbox(ctx context.Context, msgs ...core.OutboxMessage) error
}

// ExecutorMeter records the executor's measurements (Prometheus in
// production). Implementations are safe for concurrent use and return
// quickly.
type ExecutorMeter interface {
	// QueueWait is how long a job waited for a worker: from becoming
	// queued in the store (created, resumed or requeued; a retry's backoff
	// included) to its claim committed. Jobs taken over from a worker that
	// lost its lease are not measured.
	QueueWait(d time.Duration)
}

// ExecutorConfig configures an Executor.
type ExecutorConfig struct {
	Notify      Notifier                  // optional
	Meter       ExecutorMeter             // optional
	MaxFailures int                       // failed runs before a job fails for good (5)
	Backoff     func(n int) time.Duration // delay before the n-th retry (core.RetryBackoff)
	// SettleTimeout bounds each store write that claims or settles an
	// attempt (30 s). Each write gets its own deadline, taken when it
	// starts, so a run of any length can still record its outcome.
	SettleTimeout time.Duration
	// Tracer traces each attempt (see core.Tracer); nil: no tracing.
	Tracer core.Tracer
	Logger *slog.Logger
}

// Executor is the Handler that runs the store's jobs: it marks the job
// running under the lease's attempt, runs the engine, and records the
// outcome with a fenced write before the lease is settled. A job whose row is
// already terminal is acked without running; one taken over by a newer
// attempt is dropped.
type Executor struct {
	store    Store
	dispatch Dispatch // the jobs a finish creates or resumes
	engine   Engine
	cfg      ExecutorConfig
	log      *slog.Logger
}

var _ Handler = (*Executor)(nil)

// NewExecutor returns an executor of store's jobs. q is used to dispatch the
// jobs a finish creates or resumes (subtasks and their parent).
func NewExecutor(store Store, q core.Queue, e Engine, cfg ExecutorConfig) *Executor {
	if cfg.MaxFailures <= 0 {
		cfg.MaxFailures = 5
	}
	if cfg.Backoff == nil {
		cfg.Backoff = core.RetryBackoff
	}
	if cfg.SettleTimeout <= 0 {
		cfg.SettleTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Executor{store: store, dispatch: Dispatch{Store: store, Queue: q}, engine: e, cfg: cfg, log: cfg.Logger}
}

// Handle runs the job of lease l.
func (x *Executor) Handle(ctx context.Context, l core.Lease) Result {
	log := x.log.With("job", l.JobID, "attempt", l.Attempt)
	j, err := x.start(ctx, l)
	var terr *core.TransitionError
	switch {
	case errors.Is(err, core.ErrStale):
		log.Info("claim is stale: a newer attempt owns the job")
		return Result{Action: Drop}
	case errors.Is(err, core.ErrNotFound):
		log.Warn("claimed job is not in the store: dropping it from the queue")
		return Result{Action: Ack}
	case errors.As(err, &terr):
		if terr.From.Waiting() {
			wctx, cancel := x.settleCtx(ctx)
			cur, jerr := x.store.Job(wctx, l.JobID)
			cancel()
			if jerr == nil && cur.State == terr.From {
				return Result{Action: Park, WaitSeq: cur.WaitSeq}
			}
		}
		log.Info("claimed job is not runnable: acking", "state", terr.From)
		return Result{Action: Ack}
	case err != nil:
		log.Warn("start job failed", "err", err)
		return Result{Action: Nack, Delay: x.cfg.Backoff(l.Failures + 1)}
	}
	if x.cfg.Meter != nil && !j.QueuedAt.IsZero() {
		x.cfg.Meter.QueueWait(time.Since(j.QueuedAt))
	}
	log = log.With("task", j.TaskID)
	ctx, span := x.attemptSpan(ctx, j)
	defer span.End()
	log = core.TraceLogger(ctx, x.cfg.Tracer, log)

	var fin core.Finish
	var runErr error
	if !j.AbortRequestedAt.IsZero() {
		runErr = core.ErrAborted // aborted while no worker held it
	} else {
		fin, runErr = x.runEngine(ctx, j)
		if runErr == nil && !finishes(fin.To) {
			runErr = fmt.Errorf("engine ended the job with state %q", fin.To)
		}
	}

	switch cause := context.Cause(ctx); {
	case errors.Is(runErr, core.ErrAborted) || errors.Is(cause, core.ErrAborted):
		fin = core.Finish{To: core.JobAborted} // the store keeps who asked
	case errors.Is(cause, core.ErrLeaseLost):
		return Result{Action: Drop}
	case errors.Is(cause, ErrShutdown):
		fin = core.Finish{To: core.JobQueued}
	case runErr != nil:
		if j.Failures+1 >= x.cfg.MaxFailures {
			fin = core.Finish{To: core.JobFailed, Error: fmt.Sprintf("the job failed %d times; last error: %v", j.Failures+1, runErr)}
		} else {
			log.Warn("job run failed; it will be retried", "err", runErr, "failures", j.Failures+1)
			fin = core.Finish{To: core.JobQueued, CountFailure: true, Error: runErr.Error()}
		}
	}

	span.Fail(runErr)
	// The run may have taken far longer than any deadline set before it:
	// settling starts its own clock now.
	done, err := x.finish(ctx, j, fin)
	if errors.Is(err, core.ErrAborted) {
		// The abort was requested while the run was ending: it wins.
		fin = core.Finish{To: core.JobAborted}
		done, err = x.finish(ctx, j, fin)
	}
	switch {
	case errors.Is(err, core.ErrStale):
		log.Info("finish refused: a newer attempt owns the job")
		return Result{Action: Drop}
	case err != nil:
		log.Error("recording the job's outcome failed", "err", err)
		return Result{Action: Nack, Delay: x.cfg.Backoff(l.Failures + 1)}
	}
	if x.cfg.Tracer != nil {
		span.SetAttributes(core.Attr{Key: "baton.job.state", Value: string(done.State)})
	}
	wctx, cancel := x.settleCtx(ctx)
	defer cancel()
	x.afterFinish(wctx, done, log)
	if x.cfg.Notify != nil {
		x.cfg.Notify.Finished(wctx, done, fin)
	}

	switch done.State {
	case core.JobWaitingHuman, core.JobWaitingSubtasks, core.JobWaitingApproval:
		return Result{Action: Park, WaitSeq: done.WaitSeq}
	case core.JobQueued:
		if fin.CountFailure {
			return Result{Action: Nack, Delay: x.cfg.Backoff(done.Failures)}
		}
		return Result{Action: Requeue}
	default:
		return Result{Action: Ack}
	}
}

// settleCtx returns the context of one store write that claims or settles
// an attempt: it lands even when ctx is cancelled (abort, shutdown, a lost
// lease), within SettleTimeout from now.
func (x *Executor) settleCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), x.cfg.SettleTimeout)
}

// start marks the job of l running under its attempt, with the claim's
// notices (the status message, a reaction) in the same transaction.
func (x *Executor) start(ctx context.Context, l core.Lease) (core.Job, error) {
	ctx, cancel := x.settleCtx(ctx)
	defer cancel()
	var notes []core.OutboxMessage
	if x.cfg.Notify != nil {
		pre, err := x.store.Job(ctx, l.JobID)
		if err == nil && (pre.State == core.JobQueued || pre.State == core.JobRunning) {
			pre.Attempt = l.Attempt // the job as this run holds it: its progress is fenced on it
			notes = x.cfg.Notify.Claimed(ctx, pre)
		}
	}
	return x.store.StartJob(ctx, l.JobID, l.Attempt, notes...)
}

// finish records fin with the notifier's messages for it, under a deadline
// of its own.
func (x *Executor) finish(ctx context.Context, j core.Job, fin core.Finish) (core.Job, error) {
	ctx, cancel := x.settleCtx(ctx)
	defer cancel()
	if x.cfg.Notify != nil {
		fin.Outbox = append(fin.Outbox, x.cfg.Notify.Finishing(ctx, j, fin)...)
	}
	return x.store.FinishJob(ctx, j.ID, j.Attempt, fin)
}

// finishes reports whether an engine may end a run with state s.
func finishes(s core.JobState) bool {
	return s != core.JobRunning && core.CanTransition(core.JobRunning, s)
}

// runEngine calls the engine, turning a panic into an error: the log gets
// the whole stack, the error (and so the job's error field) its first
// maxPanicStack bytes.
func (x *Executor) runEngine(ctx context.Context, j core.Job) (fin core.Finish, err error) {
	defer func() {
		if r := recover(); r != nil {
			stack := debug.Stack()
			x.log.Error("engine panicked", "job", j.ID, "attempt", j.Attempt, "panic", fmt.Sprint(r), "stack", string(stack))
			err = &panicError{value: r, stack: capStack(stack, maxPanicStack)}
		}
	}()
	return x.engine.Run(ctx, NewRun(j, x.store))
}

// maxPanicStack caps the stack trace a panic leaves in the job's error.
const maxPanicStack = 4 << 10

// panicError is an engine's panic as a failed run. Its first line is a
// plain sentence, for people; the stack follows on the next lines, for
// whoever reads the job's error field.
type panicError struct {
	value any
	stack string
}

func (e *panicError) Error() string { return fmt.Sprintf("engine panicked: %v\n%s", e.value, e.stack) }

// capStack returns the first limit bytes of stack, cut at the end of a line,
// saying so when it cut.
func capStack(stack []byte, limit int) string {
	s := strings.TrimRight(string(stack), "\n")
	if len(s) <= limit {
		return s
	}
	cut := s[:limit]
	if i := strings.LastIndexByte(cut, '\n'); i > 0 {
		cut = cut[:i]
	}
	return cut + fmt.Sprintf("\n… (%d more bytes of stack in the log)", len(s)-len(cut))
}

// afterFinish dispatches what a finish set in motion: the children a parent
// waits for, and the parent once its last child ended. What fails is left
// to the reconciler and logged.
func (x *Executor) afterFinish(ctx context.Context, j core.Job, log *slog.Logger) {
	if j.State == core.JobWaitingSubtasks {
		x.traceChildren(ctx, j.ID, log)
		if err := x.dispatch.EnqueueChildren(ctx, j.ID); err != nil {
			log.Error("dispatching subtask jobs failed; the reconciler will dispatch them", "err", err)
		}
		// Children that all ended before the parent parked resume it now.
		x.resumeParent(ctx, j.ID, log)
	}
	if j.ParentJobID != 0 && j.State.Terminal() {
		x.resumeParent(ctx, j.ParentJobID, log)
	}
}

// resumeParent resumes parentID once none of its subtasks is active.
func (x *Executor) resumeParent(ctx context.Context, parentID int64, log *slog.Logger) {
	if _, err := x.dispatch.ResumeParent(ctx, parentID); err != nil {
		log.Error("resuming the parent job failed; the reconciler will dispatch it", "parent", parentID, "err", err)
	}
}

// DeadJobs returns a DeadFunc that fails in store the jobs the queue gave up
// on.
func DeadJobs(store core.JobStore, log *slog.Logger) DeadFunc {
	return func(ctx context.Context, l core.Lease) {
		reason := fmt.Sprintf("the job was interrupted %d times (its worker stopped or lost contact) and was given up", l.Failures)
		if _, err := store.FailJob(ctx, l.JobID, reason); err != nil {
			log.Error("failing a dead job failed", "job", l.JobID, "err", err)
		}
	}
}
