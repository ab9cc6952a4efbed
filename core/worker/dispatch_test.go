package worker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/baton-bot/baton/core/worker"
	"github.com/baton-bot/baton/queue"
)

// family is a top-level job that splits into one subtask on a task of its
// own and, once resumed, succeeds.
type family struct {
	store  *sqlite.Store
	parent core.Job
	engine worker.EngineFunc
}

func newFamily(t *testing.T, q core.Queue) *family {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/baton.db", sqlite.Options{WorkspaceRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	task := func(name string) core.Task {
		task, _, err := st.EnsureTask(context.Background(), core.Task{Thread: core.ThreadRef{Platform: core.PlatformConsole, Channel: "family", Thread: name}})
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	parentTask, childTask := task("parent"), task("child")
	f := &family{store: st}
	f.engine = func(ctx context.Context, r *worker.Run) (core.Finish, error) {
		switch {
		case r.Job.ParentJobID != 0:
			return core.Finish{To: core.JobSucceeded, ResultSummary: "part done"}, nil
		case r.Job.WaitSeq == 0:
			return core.Finish{To: core.JobWaitingSubtasks, ResumeMovement: "merge",
				Children: []core.Job{{TaskID: childTask.ID, Piece: "test", Instruction: "part"}}}, nil
		default:
			return core.Finish{To: core.JobSucceeded, ResultSummary: "merged"}, nil
		}
	}
	if f.parent, err = (worker.Dispatch{Store: st, Queue: q}).Create(context.Background(), core.Job{TaskID: parentTask.ID, Piece: "test", Instruction: "split"}); err != nil {
		t.Fatal(err)
	}
	return f
}

// claimAndRun claims the next job of q and runs it with x.
func claimAndRun(t *testing.T, q core.Queue, x *worker.Executor) (core.Lease, worker.Result) {
	t.Helper()
	l, err := q.Claim(context.Background(), time.Second)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return l, x.Handle(context.Background(), l)
}

func memoryQueue(t *testing.T) *queue.Memory {
	t.Helper()
	q := queue.NewMemory(queue.Options{Lease: time.Minute})
	t.Cleanup(func() { q.Close() })
	return q
}

// TestParentResumedOnAQueueThatLostIt: the in-process queue restarts while
// a parent waits for its subtask, so the new queue knows nothing of the
// parked parent. The subtask's end still dispatches the parent again.
func TestParentResumedOnAQueueThatLostIt(t *testing.T) {
	before := memoryQueue(t)
	f := newFamily(t, before)
	x := worker.NewExecutor(f.store, before, f.engine, worker.ExecutorConfig{})
	if l, res := claimAndRun(t, before, x); l.JobID != f.parent.ID || res.Action != worker.Park {
		t.Fatalf("first run: job %d %v, want the parent %d parked", l.JobID, res.Action, f.parent.ID)
	}

	after := memoryQueue(t) // the process restarted: the parked parent is gone
	rec := &worker.Reconciler{Store: f.store, Queue: after, Grace: time.Nanosecond}
	if n, err := rec.Once(context.Background()); err != nil || n != 1 {
		t.Fatalf("reconcile = %d, %v; want the queued subtask dispatched", n, err)
	}
	x = worker.NewExecutor(f.store, after, f.engine, worker.ExecutorConfig{})
	if l, res := claimAndRun(t, after, x); l.JobID == f.parent.ID || res.Action != worker.Ack {
		t.Fatalf("second run: job %d %v, want the subtask acked", l.JobID, res.Action)
	}
	if l, res := claimAndRun(t, after, x); l.JobID != f.parent.ID || res.Action != worker.Ack {
		t.Fatalf("third run: job %d %v, want the parent resumed and acked", l.JobID, res.Action)
	}
	if got, err := f.store.Job(context.Background(), f.parent.ID); err != nil || got.State != core.JobSucceeded || got.ResultSummary != "merged" {
		t.Errorf("parent = %s %q (%v), want succeeded %q", got.State, got.ResultSummary, err, "merged")
	}
}

// refusing is a queue that fails every Enqueue and Resume.
type refusing struct{ core.Queue }

var errRefused = errors.New("queue refused")

func (refusing) Enqueue(context.Context, int64) error { return errRefused }

func (refusing) Resume(context.Context, int64, int64) (bool, error) { return false, errRefused }

// TestDispatchErrorsAreLoggedWithTheJob: when the queue refuses the
// subtask a finish created, and then the parent's resume, each failure is
// logged naming the job it left to the reconciler.
func TestDispatchErrorsAreLoggedWithTheJob(t *testing.T) {
	mem := memoryQueue(t)
	f := newFamily(t, mem)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	x := worker.NewExecutor(f.store, refusing{mem}, f.engine, worker.ExecutorConfig{Logger: log})
	if _, res := claimAndRun(t, mem, x); res.Action != worker.Park {
		t.Fatalf("parent run: %v, want park", res.Action)
	}
	children, err := f.store.Jobs(context.Background(), core.JobFilter{ParentJobID: f.parent.ID})
	if err != nil || len(children) != 1 {
		t.Fatalf("children = %v, %v; want one", children, err)
	}
	child := children[0]
	if want := fmt.Sprintf("enqueue job %d: %v", child.ID, errRefused); !strings.Contains(logs.String(), want) {
		t.Errorf("the log does not say %q:\n%s", want, logs.String())
	}

	// The child runs (the reconciler dispatched it); its end resumes the
	// parent in the store, and the queue refuses it.
	if err := mem.Enqueue(context.Background(), child.ID); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	if _, res := claimAndRun(t, mem, x); res.Action != worker.Ack {
		t.Fatalf("child run: %v, want ack", res.Action)
	}
	if want := fmt.Sprintf("resume job %d in the queue: %v", f.parent.ID, errRefused); !strings.Contains(logs.String(), want) {
		t.Errorf("the log does not say %q:\n%s", want, logs.String())
	}
	if got, _ := f.store.Job(context.Background(), f.parent.ID); got.State != core.JobQueued {
		t.Errorf("parent %s, want queued in the store (for the reconciler)", got.State)
	}
}

// TestRecoverTakesOverAnEarlierProcesssJobs: a store holds a job that an
// earlier process was running when it died, created a moment ago (within
// the reconciler's grace). On a fresh in-process queue Recover dispatches
// it at once, and its claim takes the job over from the dead attempt
// although the queue's lease is an hour.
func TestRecoverTakesOverAnEarlierProcesssJobs(t *testing.T) {
	earlier := queue.NewMemory(queue.Options{Lease: time.Hour})
	f := newFamily(t, earlier)
	l, err := earlier.Claim(context.Background(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.StartJob(context.Background(), l.JobID, l.Attempt); err != nil {
		t.Fatal(err)
	}
	earlier.Close() // the process died with the job running

	q := queue.NewMemory(queue.Options{Lease: time.Hour})
	t.Cleanup(func() { q.Close() })
	rec := &worker.Reconciler{Store: f.store, Queue: q}
	if n, err := rec.Once(context.Background()); err != nil || n != 0 {
		t.Fatalf("Once = %d, %v; want the new job left to its creator (grace)", n, err)
	}
	if n, err := rec.Recover(context.Background()); err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want the running job dispatched", n, err)
	}
	x := worker.NewExecutor(f.store, q, f.engine, worker.ExecutorConfig{})
	if l, res := claimAndRun(t, q, x); l.JobID != f.parent.ID || l.Attempt != 2 || res.Action != worker.Park {
		t.Fatalf("run after the restart: job %d attempt %d %v, want job %d at attempt 2, run (parked for its subtask)", l.JobID, l.Attempt, res.Action, f.parent.ID)
	}
	evs, err := f.store.Events(context.Background(), f.parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	took := false
	for _, e := range evs {
		took = took || e.Kind == core.EventLeaseLost
	}
	if !took {
		t.Errorf("no takeover recorded among the job's events: %+v", evs)
	}
}
