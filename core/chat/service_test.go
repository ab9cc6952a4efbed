package chat_test

// These tests check the service's own ingest: what it stores (tasks,
// comments, jobs, files, the outbox), what it answers, and what it hands
// the queue. No worker runs: jobs stay queued. The tests that need jobs
// run (the whole stack) are in bot/e2e.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/configs"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/piece"
	"github.com/baton-bot/baton/core/sqlite"
)

// recordingQueue is the part of core.Queue the service calls on ingest:
// Enqueue, recorded. Any other method panics (the embedded interface is
// nil), so a test that reaches one says so.
type recordingQueue struct {
	core.Queue

	mu       sync.Mutex
	enqueued []int64  // guarded by mu: job ids, in order
	resumed  []string // guarded by mu: approval keys, in order
}

func (q *recordingQueue) Enqueue(_ context.Context, jobID int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.enqueued = append(q.enqueued, jobID)
	return nil
}

// Resume records a job resumed after a decision and reports it resumed.
func (q *recordingQueue) Resume(_ context.Context, jobID, waitSeq int64) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.resumed = append(q.resumed, core.ApprovalKey(jobID, waitSeq))
	return true, nil
}

// Resumed returns the (job, wait) keys resumed so far, in order.
func (q *recordingQueue) Resumed() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.resumed)
}

// Enqueued returns the ids of the jobs enqueued so far, in order.
func (q *recordingQueue) Enqueued() []int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.enqueued)
}

// world is the conversation service over a real SQLite store, with the
// built-in pieces, and a recording queue.
type world struct {
	t     *testing.T
	store *sqlite.Store
	queue *recordingQueue
	svc   *chat.Service
	msgN  atomic.Int64
}

func newWorld(t *testing.T, access chat.Access, opts ...func(*chat.Config)) *world {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "baton.db"), sqlite.Options{WorkspaceRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lib, err := piece.Load(configs.FS, "", piece.Rules{KnownTool: func(string) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	q := &recordingQueue{}
	cfg := chat.Config{DefaultPiece: "chat", Pieces: lib, Access: access}
	for _, o := range opts {
		o(&cfg)
	}
	svc := chat.NewService(st, q, cfg)
	return &world{t: t, store: st, queue: q, svc: svc}
}

var thread = core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: "1700.1"}

func (w *world) say(who, text string) chat.Reply {
	w.t.Helper()
	return w.sayIn(thread, who, text, fmt.Sprintf("1700.%d", 100+w.msgN.Add(1)))
}

func (w *world) sayIn(th core.ThreadRef, who, text, msgID string) chat.Reply {
	w.t.Helper()
	r, err := w.svc.HandleMessage(context.Background(), chat.Message{
		Thread: th, Channel: "slack:" + th.Channel, MsgID: msgID, Author: chat.Author{ID: "slack:" + who, Name: who},
		Text: text, Addressed: true,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

// send posts a message with attachments in the test thread.
func (w *world) send(text string, files ...chat.File) {
	w.t.Helper()
	_, err := w.svc.HandleMessage(context.Background(), chat.Message{
		Thread: thread, Channel: "slack:" + thread.Channel, MsgID: fmt.Sprintf("1700.%d", 100+w.msgN.Add(1)),
		Author: chat.Author{ID: "slack:alice", Name: "alice"}, Text: text, Files: files, Addressed: true,
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) task() core.Task {
	w.t.Helper()
	task, err := w.store.TaskByThread(context.Background(), thread)
	if err != nil {
		w.t.Fatal(err)
	}
	return task
}

// jobs returns the jobs of the task of th, newest first, and checks that
// each was handed to the queue once.
func (w *world) jobs(th core.ThreadRef) []core.Job {
	w.t.Helper()
	ctx := context.Background()
	task, err := w.store.TaskByThread(ctx, th)
	if err != nil {
		w.t.Fatal(err)
	}
	jobs, err := w.store.Jobs(ctx, core.JobFilter{TaskID: task.ID})
	if err != nil {
		w.t.Fatal(err)
	}
	enqueued := w.queue.Enqueued()
	for _, j := range jobs {
		if n := countOf(enqueued, j.ID); n != 1 {
			w.t.Errorf("job %d was enqueued %d times, want once (enqueued: %v)", j.ID, n, enqueued)
		}
	}
	return jobs
}

func countOf(ids []int64, id int64) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// outbox returns the task's pending outbox messages as "kind text|emoji",
// delivering them (marking them sent) as it goes.
func (w *world) outbox() []string {
	w.t.Helper()
	var out []string
	for {
		msgs, err := w.store.DueOutbox(context.Background(), core.PlatformSlack, time.Now().Add(time.Hour), 10)
		if err != nil {
			w.t.Fatal(err)
		}
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			p, _ := chat.DecodePayload(m.Payload)
			v := p.Text
			if p.Emoji != "" {
				v = p.Emoji + " on " + p.MsgID
			}
			out = append(out, string(m.Kind)+" "+v)
			if err := w.store.OutboxSent(context.Background(), m.ID, fmt.Sprint("sent-", m.ID)); err != nil {
				w.t.Fatal(err)
			}
		}
	}
}

func contains(t *testing.T, list []string, want ...string) {
	t.Helper()
	for _, w := range want {
		found := false
		for _, l := range list {
			if strings.Contains(l, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %q among:\n%s", w, strings.Join(list, "\n"))
		}
	}
}

func file(name, content string) chat.File {
	return chat.File{Name: name, Size: int64(len(content)), Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(content)), nil
	}}
}

func TestAccessRefusedChangesNothing(t *testing.T) {
	w := newWorld(t, chat.Access{AllowedUsers: []string{"slack:alice"}})
	if r := w.say("mallory", "do something"); !strings.Contains(r.Text, "not allowed") {
		t.Errorf("reply = %q", r.Text)
	}
	if _, err := w.store.TaskByThread(context.Background(), thread); err == nil {
		t.Error("a refused message created a task")
	}
	if got := w.queue.Enqueued(); len(got) != 0 {
		t.Errorf("a refused message enqueued jobs %v", got)
	}
}

func TestNewInDirectMessages(t *testing.T) {
	w := newWorld(t, chat.Access{})
	dm := core.ThreadRef{Platform: core.PlatformDiscord, Channel: "D1", Thread: "D1"}
	send := func(text string, n int) chat.Reply {
		r, err := w.svc.HandleMessage(context.Background(), chat.Message{Thread: dm, MsgID: fmt.Sprint(n), Author: chat.Author{ID: "discord:7", Name: "ann"}, Text: text, Addressed: true, Direct: true})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	send("first request", 1)
	first, err := w.store.TaskByThread(context.Background(), dm)
	if err != nil {
		t.Fatal(err)
	}
	if jobs := w.jobs(dm); len(jobs) != 1 || jobs[0].Instruction != "first request" {
		t.Errorf("the first request's jobs: %+v", jobs)
	}
	if r := send("!new", 2); !strings.Contains(r.Text, "Started afresh") {
		t.Errorf("!new = %q", r.Text)
	}
	send("second request", 3)
	second, err := w.store.TaskByThread(context.Background(), dm)
	if err != nil || second.ID == first.ID {
		t.Errorf("after !new the DM is task %d (%v), want a new task after %d", second.ID, err, first.ID)
	}
	if jobs := w.jobs(dm); len(jobs) != 1 || jobs[0].Instruction != "second request" {
		t.Errorf("the new task's jobs: %+v", jobs)
	}
	if r := w.say("alice", "!new"); !strings.Contains(r.Text, "direct messages") {
		t.Errorf("!new outside a DM = %q", r.Text)
	}
}

// TestStatusNotesCompaction: a job whose context was compacted says so in
// its status message.
func TestStatusNotesCompaction(t *testing.T) {
	w := newWorld(t, chat.Access{})
	ctx := context.Background()
	task, _, err := w.store.EnsureTask(ctx, core.Task{Thread: thread})
	if err != nil {
		t.Fatal(err)
	}
	j, err := w.store.CreateJob(ctx, core.Job{TaskID: task.ID, Piece: "chat", Instruction: "x"})
	if err != nil {
		t.Fatal(err)
	}
	w.svc.Observe(ctx, engine.Status{JobID: j.ID, TaskID: task.ID, Piece: "chat", Movement: "answer", MovementCount: 1, MaxMovements: 5, Iteration: 3, Level: "warn", Compactions: 2})
	contains(t, w.outbox(), "context: warn. Context compacted ×2 to keep going.")
}

// TestFailureShowsThePlainReason: a job's error may carry detail below its
// first line (a panic's stack trace); the thread hears only the sentence.
func TestFailureShowsThePlainReason(t *testing.T) {
	w := newWorld(t, chat.Access{})
	w.say("alice", "do it")
	jobs := w.jobs(thread)
	if len(jobs) != 1 {
		t.Fatalf("%d jobs for the request, want 1", len(jobs))
	}
	j := jobs[0]
	reason := "the job failed 5 times; last error: engine panicked: boom"
	msgs := w.svc.Finishing(context.Background(), j, core.Finish{To: core.JobFailed,
		Error: reason + "\ngoroutine 7 [running]:\nruntime/debug.Stack()\n\t/usr/local/go/src/runtime/debug/stack.go:26 +0x5e"})
	var texts []string
	for _, m := range msgs {
		if m.Kind == core.OutboxPost || m.Kind == core.OutboxUpdate {
			p, err := chat.DecodePayload(m.Payload)
			if err != nil {
				t.Fatal(err)
			}
			texts = append(texts, p.Text)
		}
	}
	want := fmt.Sprintf("❌ Job #%d failed: %s", j.ID, reason)
	if len(texts) == 0 {
		t.Fatal("no message about the failure")
	}
	for _, text := range texts {
		if text != want {
			t.Errorf("the thread hears %q, want %q", text, want)
		}
	}
}

// TestAttachmentNames: attachments land in the task's input/ under safe
// names, unique, however hostile the names they came with.
func TestAttachmentNames(t *testing.T) {
	w := newWorld(t, chat.Access{})
	long := strings.Repeat("n", 300) + ".txt"
	var files []chat.File
	for _, name := range []string{"../../x", "input", ".", "a\x00b.txt", long, "a/b/c.txt", `..\..\win.txt`, "x", "../input/.."} {
		files = append(files, file(name, "content of "+name))
	}
	w.send("files", files...)
	if jobs := w.jobs(thread); len(jobs) != 1 {
		t.Errorf("%d jobs for the message, want 1", len(jobs))
	}
	ws := w.task().Workspace
	entries, err := os.ReadDir(filepath.Join(ws, "input"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{"a_b.txt", "attachment", "attachment-2", "c.txt", "input", strings.Repeat("n", 196) + ".txt", "win.txt", "x", "x-2"}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("input/ (-want +got):\n%s", diff)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "input", "x")); string(b) != "content of ../../x" {
		t.Errorf("input/x holds %q", b)
	}
	// Nothing beside the workspace: the store's workspace root holds only it.
	around, _ := os.ReadDir(filepath.Dir(ws))
	if len(around) != 1 {
		t.Errorf("the workspaces' folder holds %d entries, want the task's only", len(around))
	}
	for _, o := range w.outbox() {
		if strings.Contains(o, "could not take") {
			t.Errorf("a file was refused: %q", o)
		}
	}
}

// TestMessagePiece: a message that names its piece (the task API's
// "piece") starts a job of that piece with its text as the request, and
// the text is stored as written: no `!piece` in the title or the comment.
// An unknown piece is refused as `!piece` refuses it.
func TestMessagePiece(t *testing.T) {
	w := newWorld(t, chat.Access{})
	ctx := context.Background()
	send := func(th core.ThreadRef, piece, text string) chat.Reply {
		t.Helper()
		r, err := w.svc.HandleMessage(ctx, chat.Message{Thread: th, MsgID: "m-" + th.Thread, Author: chat.Author{ID: "api:alice", Name: "alice"},
			Text: text, Piece: piece, Addressed: true})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	th := core.ThreadRef{Platform: core.PlatformAPI, Channel: "api", Thread: "t1"}
	if r := send(th, "research", "look into it"); r.Text != "" {
		t.Fatalf("reply = %q, want none", r.Text)
	}
	jobs := w.jobs(th)
	if len(jobs) != 1 || jobs[0].Piece != "research" || jobs[0].Instruction != "look into it" {
		t.Fatalf("jobs = %+v, want one research job for the text", jobs)
	}
	task, err := w.store.TaskByThread(ctx, th)
	if err != nil {
		t.Fatal(err)
	}
	comments, err := w.store.RecentComments(ctx, task.ID, 5)
	if err != nil {
		t.Fatal(err)
	}
	if task.Title != "look into it" || len(comments) != 1 || comments[0].Text != "look into it" {
		t.Errorf("title %q, comments %+v; want the text as written", task.Title, comments)
	}

	other := core.ThreadRef{Platform: core.PlatformAPI, Channel: "api", Thread: "t2"}
	if r := send(other, "nope", "do it"); !strings.Contains(r.Text, "nope") {
		t.Errorf("unknown piece: reply %q, want the refusal naming it", r.Text)
	}
	if got := w.queue.Enqueued(); len(got) != 1 {
		t.Errorf("enqueued %v, want only the first job", got)
	}
}
