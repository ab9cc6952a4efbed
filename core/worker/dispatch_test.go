package worker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/baton-bot/baton/core/worker"
)

// These tests hand the executor leases themselves and give it small queues
// that implement only the calls the test expects; tests of the pool and
// executor over Baton's real queues live in the queue package.

// newStore opens a store of t's own.
func newStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/baton.db", sqlite.Options{WorkspaceRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newTask stores a console task named name.
func newTask(t *testing.T, st *sqlite.Store, name string) core.Task {
	t.Helper()
	task, _, err := st.EnsureTask(context.Background(), core.Task{Thread: core.ThreadRef{Platform: core.PlatformConsole, Channel: "test", Thread: name}})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// family is a top-level job that splits into one subtask on a task of its
// own and, once resumed, succeeds.
type family struct {
	store  *sqlite.Store
	parent core.Job
	engine worker.EngineFunc
}

// newFamily stores the family's parent, queued; no queue is told of it.
func newFamily(t *testing.T) *family {
	t.Helper()
	st := newStore(t)
	parentTask, childTask := newTask(t, st, "parent"), newTask(t, st, "child")
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
	var err error
	if f.parent, err = st.CreateJob(context.Background(), core.Job{TaskID: parentTask.ID, Piece: "test", Instruction: "split"}); err != nil {
		t.Fatal(err)
	}
	return f
}

// runNext runs job id with x under the lease a queue's next claim of it
// would carry: the attempt after the store's.
func runNext(t *testing.T, st *sqlite.Store, x *worker.Executor, id int64) (core.Lease, worker.Result) {
	t.Helper()
	j, err := st.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	l := core.Lease{JobID: id, Attempt: j.Attempt + 1, Failures: j.Failures}
	return l, x.Handle(context.Background(), l)
}

// silent is the queue of an executor whose jobs dispatch nothing (no
// subtask, no parent): it implements no method, so any call panics.
type silent struct{ core.Queue }

// refusing is a queue that fails every Enqueue and Resume, the only calls
// an executor's dispatching makes that fail.
type refusing struct{ core.Queue }

var errRefused = errors.New("queue refused")

func (refusing) Enqueue(context.Context, int64) error { return errRefused }

func (refusing) Resume(context.Context, int64, int64) (bool, error) { return false, errRefused }

// TestDispatchErrorsAreLoggedWithTheJob: when the queue refuses the
// subtask a finish created, and then the parent's resume, each failure is
// logged naming the job it left to the reconciler.
func TestDispatchErrorsAreLoggedWithTheJob(t *testing.T) {
	f := newFamily(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	x := worker.NewExecutor(f.store, refusing{}, f.engine, worker.ExecutorConfig{Logger: log})
	if _, res := runNext(t, f.store, x, f.parent.ID); res.Action != worker.Park {
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
	logs.Reset()
	if _, res := runNext(t, f.store, x, child.ID); res.Action != worker.Ack {
		t.Fatalf("child run: %v, want ack", res.Action)
	}
	if want := fmt.Sprintf("resume job %d in the queue: %v", f.parent.ID, errRefused); !strings.Contains(logs.String(), want) {
		t.Errorf("the log does not say %q:\n%s", want, logs.String())
	}
	if got, _ := f.store.Job(context.Background(), f.parent.ID); got.State != core.JobQueued {
		t.Errorf("parent %s, want queued in the store (for the reconciler)", got.State)
	}
}

// forgetful is a queue that lost every parked job (an in-process queue
// restarted): Resume reports false, and Reconcile records what it is asked
// to dispatch again.
type forgetful struct {
	core.Queue
	resumes    int
	reconciled []core.ReconcileItem
}

func (q *forgetful) Resume(context.Context, int64, int64) (bool, error) {
	q.resumes++
	return false, nil
}

func (q *forgetful) Reconcile(_ context.Context, items []core.ReconcileItem) (int, error) {
	q.reconciled = append(q.reconciled, items...)
	return len(items), nil
}

// TestResumeDispatchesAgainAJobTheQueueLost: Resume writes the store first;
// when the queue no longer knows the parked job, the job is dispatched
// again from the store's row, once however often the reply comes.
func TestResumeDispatchesAgainAJobTheQueueLost(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	j, err := st.CreateJob(ctx, core.Job{TaskID: newTask(t, st, "ask").ID, Piece: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.StartJob(ctx, j.ID, 1); err != nil {
		t.Fatal(err)
	}
	w, err := st.FinishJob(ctx, j.ID, 1, core.Finish{To: core.JobWaitingHuman, Question: "which one?", ResumeMovement: "work"})
	if err != nil {
		t.Fatal(err)
	}
	q := &forgetful{}
	d := worker.Dispatch{Store: st, Queue: q}
	for i, want := range []bool{true, false} { // the same reply delivered twice
		if ok, err := d.Resume(ctx, j.ID, w.WaitSeq); ok != want || err != nil {
			t.Errorf("resume %d = %v, %v; want %v, nil", i+1, ok, err, want)
		}
	}
	want := []core.ReconcileItem{{JobID: j.ID, State: core.JobQueued, Attempt: 1}}
	if diff := cmp.Diff(want, q.reconciled); diff != "" || q.resumes != 1 {
		t.Errorf("queue resumed %d times (want 1), reconciled (-want +got):\n%s", q.resumes, diff)
	}
	if got, _ := st.Job(ctx, j.ID); got.State != core.JobQueued {
		t.Errorf("job %s, want queued in the store", got.State)
	}
}
