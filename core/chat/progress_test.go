package chat_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/sqlite"
)

// TestProgressCoalesced: a burst of progress events becomes one view in
// the outbox per progress.interval (the first at once, the rest waiting),
// every event is recorded as the job's events by the job's finish, and
// the final view holds the whole state and the answer.
func TestProgressCoalesced(t *testing.T) {
	ctx := context.Background()
	st, path := openProgressStore(t)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc := chat.NewService(st, &recordingQueue{}, chat.Config{DefaultPiece: "chat",
		Progress: map[core.Platform]chat.ProgressSettings{core.PlatformSlack: {Stream: true, Interval: time.Hour}}})
	task, _, err := st.EnsureTask(ctx, core.Task{Thread: thread, OwnerUser: "slack:U1", Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	j, err := st.CreateJob(ctx, core.Job{TaskID: task.ID, Piece: "chat", Instruction: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if j, err = st.StartJob(ctx, j.ID, 1); err != nil { // the run's events are fenced on its attempt
		t.Fatal(err)
	}
	svc.Claimed(ctx, j)
	plan := []string{"work", "check"}
	tell := func(ev core.ProgressEvent) {
		ev.JobID, ev.TaskID, ev.Plan, ev.At = j.ID, task.ID, plan, time.Now()
		svc.Progress(ctx, ev)
	}
	tell(core.ProgressEvent{Kind: core.ProgressMovementStarted, Movement: "work", Position: 1})
	views := func() int {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM outbox WHERE ref LIKE 'progress:%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for views() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no view written")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := range 30 {
		id := string(rune('a' + i%26))
		tell(core.ProgressEvent{Kind: core.ProgressToolStarted, CallID: id + "x", Title: "Bash: step"})
		tell(core.ProgressEvent{Kind: core.ProgressToolFinished, CallID: id + "x", Title: "Bash: step", Failed: i == 3})
	}
	tell(core.ProgressEvent{Kind: core.ProgressText, Text: "Hel"})
	tell(core.ProgressEvent{Kind: core.ProgressText, Text: "lo"})
	tell(core.ProgressEvent{Kind: core.ProgressMovementEnded, Movement: "work", Position: 1})

	msgs := svc.Finishing(ctx, j, core.Finish{To: core.JobSucceeded, ResultSummary: "the answer"})
	if n := views(); n != 1 {
		t.Errorf("%d views in the outbox within one interval, want 1", n)
	}
	var final *chat.ProgressView
	for _, m := range msgs {
		p, err := chat.DecodePayload(m.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if p.Progress != nil {
			final = p.Progress
		}
		if m.Kind == core.OutboxPost && strings.Contains(p.Text, "the answer") {
			t.Errorf("the answer is posted besides the final view")
		}
	}
	if final == nil || !final.Final || final.Answer != "the answer" || final.Text != "Hello" || len(final.Tools) != 30 || final.Plan[0].State != chat.StepComplete {
		t.Fatalf("final view %+v, want the whole state and the answer", final)
	}
	if final.Tools[3].State != chat.StepError || final.Tools[4].State != chat.StepComplete {
		t.Errorf("tool states %+v, want the failed one error and the others complete", final.Tools[:5])
	}
	evs, err := st.Events(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	tools, text := 0, ""
	for _, e := range evs {
		if e.Kind != chat.EventProgress {
			continue
		}
		switch {
		case strings.Contains(e.Detail, `"kind":"tool_`):
			tools++
		case strings.Contains(e.Detail, `"kind":"text"`):
			_, rest, _ := strings.Cut(e.Detail, `"text":"`)
			part, _, _ := strings.Cut(rest, `"`)
			text += part
		}
	}
	if tools != 60 || text != "Hello" {
		t.Errorf("recorded %d tool events and text %q, want 60 and Hello", tools, text)
	}
	// Nothing is written for the job after its finish.
	tell(core.ProgressEvent{Kind: core.ProgressToolStarted, CallID: "late", Title: "late"})
	if n := views(); n != 1 {
		t.Errorf("%d views after the finish, want still 1", n)
	}
}

// TestStaleRunRecordsNoProgress: the progress of a run whose job another
// attempt took over (its lease lost) is not recorded: nothing it tells
// lands in the job's history after the newer run's.
func TestStaleRunRecordsNoProgress(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "baton.db"), sqlite.Options{WorkspaceRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc := chat.NewService(st, &recordingQueue{}, chat.Config{DefaultPiece: "chat"})
	task, _, err := st.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: "1.1"}, OwnerUser: "slack:U1", Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	j, err := st.CreateJob(ctx, core.Job{TaskID: task.ID, Piece: "chat", Instruction: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if j, err = st.StartJob(ctx, j.ID, 1); err != nil {
		t.Fatal(err)
	}
	svc.Claimed(ctx, j)
	if _, err := st.StartJob(ctx, j.ID, 2); err != nil { // another worker took it over
		t.Fatal(err)
	}
	svc.Progress(ctx, core.ProgressEvent{JobID: j.ID, TaskID: task.ID, Kind: core.ProgressToolStarted, CallID: "c1", Title: "Read a.go", At: time.Now()})
	svc.Finishing(ctx, j, core.Finish{To: core.JobSucceeded, ResultSummary: "stale"})
	evs, err := st.Events(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind == chat.EventProgress {
			t.Errorf("the stale run's progress was recorded: %+v", e)
		}
	}
}

// TestProgressForgetsFinishedJobs: the service does not keep the progress
// of every job it ever ran; past maxProgress (10,000) the finished jobs'
// entries go, and a progress event told after a job's end still writes
// nothing. Nor does it keep when it last wrote each job's status (here
// Finished is never told: the bound is what forgets them).
func TestProgressForgetsFinishedJobs(t *testing.T) {
	ctx := context.Background()
	st, _ := openProgressStore(t)
	svc := chat.NewService(st, &recordingQueue{}, chat.Config{DefaultPiece: "chat",
		Progress: map[core.Platform]chat.ProgressSettings{core.PlatformSlack: {Stream: true, Interval: time.Hour}}})
	task, _, err := st.EnsureTask(ctx, core.Task{Thread: thread, OwnerUser: "slack:U1", Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	const jobs = 12_000
	for id := int64(1); id <= jobs; id++ {
		j := core.Job{ID: id, TaskID: task.ID, Piece: "chat", Attempt: 1, State: core.JobRunning}
		svc.Claimed(ctx, j)
		svc.Progress(ctx, core.ProgressEvent{JobID: id, TaskID: task.ID, Kind: core.ProgressText, Text: "working", At: time.Now()})
		svc.Finishing(ctx, j, core.Finish{To: core.JobSucceeded, ResultSummary: "done"})
	}
	if n := chat.ProgressEntries(svc); n > 10_001 || n < 1 {
		t.Errorf("%d jobs' progress kept after %d finished, want at most 10,001", n, jobs)
	}
	if n := chat.StatusEntries(svc); n > 10_000 {
		t.Errorf("%d jobs' status times kept after %d claimed and never finished, want at most 10,000", n, jobs)
	}
	// The last job's entry is kept: what it is told now is dropped.
	before := chat.ProgressEntries(svc)
	svc.Progress(ctx, core.ProgressEvent{JobID: jobs, TaskID: task.ID, Kind: core.ProgressText, Text: "late", At: time.Now()})
	if n := chat.ProgressEntries(svc); n != before {
		t.Errorf("a late event of a finished job made an entry: %d entries, want %d", n, before)
	}
}

// TestFinishedForgetsStatusTime: a job that ends leaves nothing of its
// status writes behind. The claim used to note the time of the job's first
// status write in a map that only a later progress write bounded, which a
// job finishing within statusEvery never made: one entry for every job a
// long-running process ran (a 500,000-event soak's heap grew by it).
func TestFinishedForgetsStatusTime(t *testing.T) {
	ctx := context.Background()
	st, _ := openProgressStore(t)
	svc := chat.NewService(st, &recordingQueue{}, chat.Config{DefaultPiece: "chat"})
	task, _, err := st.EnsureTask(ctx, core.Task{Thread: thread, OwnerUser: "slack:U1", Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 100; id++ {
		j := core.Job{ID: id, TaskID: task.ID, Piece: "chat", Attempt: 1, State: core.JobRunning}
		svc.Claimed(ctx, j)
		fin := core.Finish{To: core.JobSucceeded, ResultSummary: "done"}
		svc.Finishing(ctx, j, fin)
		j.State = core.JobSucceeded
		svc.Finished(ctx, j, fin)
	}
	if n := chat.StatusEntries(svc); n != 0 {
		t.Errorf("%d jobs' status times kept after all ended, want 0", n)
	}
}

// openProgressStore opens a SQLite store in a temporary directory, closed
// when the test ends, and returns it with its file's path.
func openProgressStore(t *testing.T) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "baton.db")
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{WorkspaceRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}
