package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/baton-bot/baton/core/worker"
	"github.com/baton-bot/baton/queue"
)

// These tests restart the in-process queue under core/worker's executor and
// reconciler: the new queue knows nothing of the jobs the store holds, and
// the worker's side must dispatch them again.

// family is a top-level job that splits into one subtask on a task of its
// own and, once resumed, succeeds.
type family struct {
	store  *sqlite.Store
	parent core.Job
	engine worker.EngineFunc
}

// newFamily stores the family's parent and enqueues it on q.
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

// TestParentResumedOnAQueueThatLostIt: the in-process queue restarts while
// a parent waits for its subtask, so the new queue knows nothing of the
// parked parent. The subtask's end still dispatches the parent again.
func TestParentResumedOnAQueueThatLostIt(t *testing.T) {
	before := newMemory(t, queue.Options{Lease: time.Minute})
	f := newFamily(t, before)
	x := worker.NewExecutor(f.store, before, f.engine, worker.ExecutorConfig{})
	if l, res := claimAndRun(t, before, x); l.JobID != f.parent.ID || res.Action != worker.Park {
		t.Fatalf("first run: job %d %v, want the parent %d parked", l.JobID, res.Action, f.parent.ID)
	}

	after := newMemory(t, queue.Options{Lease: time.Minute}) // the process restarted: the parked parent is gone
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
