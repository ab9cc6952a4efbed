package chat_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/sqlite"
)

// A message whose handling failed half-way is delivered again (by Slack's
// retry or the inbox's next try): the redelivery must be taken whole, not
// dropped as already seen.

// errStoreDown is the failure the flaky store injects.
var errStoreDown = errors.New("disk I/O error")

// flakyStore fails the next call of one method, once.
type flakyStore struct {
	*sqlite.Store
	failIngest atomic.Bool
	failJobs   atomic.Bool
}

func (f *flakyStore) Ingest(ctx context.Context, in core.Inbound) (core.Ingested, error) {
	if f.failIngest.CompareAndSwap(true, false) {
		return core.Ingested{}, errStoreDown
	}
	return f.Store.Ingest(ctx, in)
}

func (f *flakyStore) Jobs(ctx context.Context, filter core.JobFilter) ([]core.Job, error) {
	if f.failJobs.CompareAndSwap(true, false) {
		return nil, errStoreDown
	}
	return f.Store.Jobs(ctx, filter)
}

func newRedeliveryService(t *testing.T) (*chat.Service, *flakyStore, *recordingQueue) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "baton.db"), sqlite.Options{WorkspaceRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fs := &flakyStore{Store: st}
	q := &recordingQueue{}
	return chat.NewService(fs, q, chat.Config{DefaultPiece: "chat"}), fs, q
}

func redeliveryMessage(text string, files ...chat.File) chat.Message {
	return chat.Message{
		Thread:  core.ThreadRef{Platform: core.PlatformSlack, Channel: "C1", Thread: "1700.1"},
		Channel: "slack:C1", MsgID: "1700.1", EventID: "Ev1",
		Author: chat.Author{ID: "slack:alice", Name: "alice"}, Text: text, Files: files, Addressed: true,
	}
}

func TestAttachmentMessageTakenOnRedelivery(t *testing.T) {
	svc, st, q := newRedeliveryService(t)
	ctx := t.Context()
	opened := 0
	f := chat.File{Name: "report.csv", Size: 3, Open: func(context.Context) (io.ReadCloser, error) {
		opened++
		return io.NopCloser(strings.NewReader("a,b")), nil
	}}
	m := redeliveryMessage("summarise this", f)

	st.failIngest.Store(true)
	if _, err := svc.HandleMessage(ctx, m); !errors.Is(err, errStoreDown) {
		t.Fatalf("first delivery: err = %v, want the store's failure", err)
	}
	if _, err := svc.HandleMessage(ctx, m); err != nil {
		t.Fatalf("redelivery: %v", err)
	}
	if _, err := svc.HandleMessage(ctx, m); err != nil {
		t.Fatalf("third delivery: %v", err)
	}

	task, err := st.TaskByThread(ctx, m.Thread)
	if err != nil {
		t.Fatalf("the redelivery left no task: %v", err)
	}
	comments, err := st.RecentComments(ctx, task.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(comments) != 1 {
		t.Fatalf("comments = %d, want 1", len(comments))
	}
	if want := []string{"input/report.csv"}; !slices.Equal(comments[0].Files, want) {
		t.Errorf("comment files = %q, want %q (the failed delivery's copy removed, the name reused)", comments[0].Files, want)
	}
	if got := q.Enqueued(); len(got) != 1 {
		t.Errorf("jobs enqueued = %v, want one", got)
	}
	if opened != 2 {
		t.Errorf("file downloaded %d times, want 2 (the failed delivery and the redelivery; none for the duplicate)", opened)
	}
}

func TestCommandRunsAgainOnRedelivery(t *testing.T) {
	svc, st, _ := newRedeliveryService(t)
	ctx := t.Context()
	if _, err := svc.HandleMessage(ctx, redeliveryMessage("start a task")); err != nil {
		t.Fatal(err)
	}
	m := redeliveryMessage("!status")
	m.MsgID, m.EventID = "1700.2", "Ev2"

	st.failJobs.Store(true)
	if _, err := svc.HandleMessage(ctx, m); !errors.Is(err, errStoreDown) {
		t.Fatalf("first delivery: err = %v, want the store's failure", err)
	}
	if _, err := svc.HandleMessage(ctx, m); err != nil {
		t.Fatalf("redelivery: %v", err)
	}
	if _, err := svc.HandleMessage(ctx, m); err != nil {
		t.Fatalf("third delivery: %v", err)
	}
	task, err := st.TaskByThread(ctx, m.Thread)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := st.DueOutbox(ctx, core.PlatformSlack, time.Now().Add(time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	answers := 0
	for _, o := range msgs {
		if o.TaskID == task.ID && strings.Contains(string(o.Payload), "— job #") {
			answers++
		}
	}
	if answers != 1 {
		t.Errorf("status answers posted = %d, want 1 (the redelivery answered, the duplicate not)", answers)
	}
}
