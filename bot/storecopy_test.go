package main

import (
	"context"
	"crypto/sha256"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/postgres"
	"github.com/baton-bot/baton/core/sqlite"
)

// fillSQLite populates a SQLite store through core.Store: tasks (one a
// subtask), comments, jobs run to success and parked for approval (one
// decided "always", leaving an allow rule; one pending with its
// checkpoint), outbox messages sent, retried, failed, pending and claimed, dedup
// keys, an ingested message and an inbox event.
func fillSQLite(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{WorkspaceRoot: filepath.Join(t.TempDir(), "ws")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.AddUsage(ctx, core.Usage{JobID: 1, TaskID: 1, Channel: "slack:C1", Requester: "slack:U1", Model: "m",
		PromptTokens: 1200, CachedTokens: 200, CompletionTokens: 30, Cost: 0.0125, At: time.UnixMilli(1767225600000)}))
	slack := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: "100.1"}
	t1, _, err := st.EnsureTask(ctx, core.Task{Thread: slack, OwnerUser: "slack:U1", Title: "haiku"})
	must(err)
	t2, _, err := st.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformDiscord, Team: "G1", Channel: "D1", Thread: "D1"}, OwnerUser: "discord:9", Title: "deploy"})
	must(err)
	_, _, err = st.EnsureTask(ctx, core.Task{ParentTaskID: t1.ID, Thread: core.ThreadRef{Platform: core.PlatformSubtask, Thread: "sub-1"}, Title: "child"})
	must(err)
	_, err = st.AddComment(ctx, core.Comment{TaskID: t1.ID, PlatformMsgID: "100.1", AuthorID: "U1", AuthorName: "ann", Role: core.RoleUser,
		Text: "write a haiku @bob", Original: "write a haiku <@U2>", Files: []string{"in/a.txt", "in/b.png"}})
	must(err)

	// Job 1 runs to success, writing a comment and a message.
	j1, err := st.CreateJob(ctx, core.Job{TaskID: t1.ID, Piece: "default", Instruction: "write a haiku", TriggerMsgID: "100.1"})
	must(err)
	_, err = st.StartJob(ctx, j1.ID, 1, core.OutboxMessage{Kind: core.OutboxReact, Payload: `{"name":"eyes"}`})
	must(err)
	must(st.SaveProgress(ctx, j1.ID, 1, core.Progress{Movement: "write", MovementCount: 1, Iteration: 2, Lessons: `{"l":1}`,
		PromptTokens: 120, CompletionTokens: 30, Events: []core.JobEvent{{Kind: core.EventProgress, Movement: "write", Detail: "wrote it"}}}))
	_, err = st.FinishJob(ctx, j1.ID, 1, core.Finish{To: core.JobSucceeded, ResultSummary: "Wrote output/haiku.txt.",
		Comments: []core.Comment{{TaskID: t1.ID, Role: core.RoleBot, Text: "Wrote output/haiku.txt."}},
		Outbox:   []core.OutboxMessage{{Kind: core.OutboxPost, Payload: `{"text":"done"}`}}})
	must(err)

	// Job 2 parks for an approval someone answers "always": an allow rule.
	j2, err := st.CreateJob(ctx, core.Job{TaskID: t1.ID, Piece: "default", Instruction: "run the tests", RetryOf: j1.ID})
	must(err)
	_, err = st.StartJob(ctx, j2.ID, 1)
	must(err)
	park := func(j core.Job, attempt int64, cmd, ckpt string) core.Job {
		t.Helper()
		got, err := st.FinishJob(ctx, j.ID, attempt, core.Finish{To: core.JobWaitingApproval, ResumeMovement: "test",
			Approval: &core.Approval{Tool: "Bash", Arguments: `{"command":"` + cmd + `"}`, CallID: "call-" + cmd, Subject: cmd,
				Preview: "$ " + cmd, Channel: "slack:C1", Requester: "slack:U1", Rule: "bash asks", Deadline: time.Now().Add(time.Hour)},
			Checkpoint: ckpt, Outbox: []core.OutboxMessage{{Kind: core.OutboxPost, Payload: `{"text":"approve?"}`, Ref: "approval"}}})
		must(err)
		return got
	}
	j2 = park(j2, 1, "go test", "checkpoint-2")
	_, _, err = st.DecideApproval(ctx, core.ApprovalDecision{JobID: j2.ID, WaitSeq: j2.WaitSeq, Verdict: core.VerdictAlways, By: "slack:U1",
		Reason: "fine", At: time.Now(), Rule: &core.AllowRule{Channel: "slack:C1", Tool: "Bash", Pattern: "^go test", CreatedBy: "slack:U1"}})
	must(err)

	// Job 3 waits for an approval, its checkpoint kept.
	j3, err := st.CreateJob(ctx, core.Job{TaskID: t2.ID, Piece: "deploy", Instruction: "deploy it"})
	must(err)
	_, err = st.StartJob(ctx, j3.ID, 1)
	must(err)
	park(j3, 1, "kubectl apply", "checkpoint-3")

	// The outbox: sent, retried, failed and pending messages.
	must(st.AddOutbox(ctx,
		core.OutboxMessage{TaskID: t2.ID, Kind: core.OutboxPost, Payload: `{"text":"a"}`},
		core.OutboxMessage{TaskID: t2.ID, Kind: core.OutboxUpdate, Payload: `{"text":"b"}`}))
	due, err := st.DueOutbox(ctx, core.PlatformSlack, time.Now().Add(time.Hour), 10)
	must(err)
	if len(due) == 0 {
		t.Fatal("no slack message due")
	}
	must(st.OutboxSent(ctx, due[0].ID, "200.5"))
	due, err = st.DueOutbox(ctx, core.PlatformDiscord, time.Now().Add(time.Hour), 10)
	must(err)
	must(st.OutboxRetry(ctx, due[0].ID, time.Now().Add(time.Minute), "429 slow down"))
	due, err = st.DueOutbox(ctx, core.PlatformSlack, time.Now().Add(time.Hour), 10)
	must(err)
	must(st.OutboxFail(ctx, due[0].ID, "channel_not_found"))
	// A message a deliverer holds: its claim copies as it is.
	claimed, err := st.ClaimOutbox(ctx, core.PlatformSlack, "gateway-1", time.Now(), time.Hour, 1, 0)
	must(err)
	if len(claimed) != 1 {
		t.Fatal("no slack message to claim")
	}

	// Dedup keys, an ingested message (a task and a queued job), the inbox.
	_, err = st.SeenInbound(ctx, "event:E1", time.Now())
	must(err)
	_, err = st.Ingest(ctx, core.Inbound{Keys: []string{"event:E2", "msg:300.1"}, At: time.Now(),
		Task:    core.Task{Thread: core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C2", Thread: "300.1"}, OwnerUser: "slack:U3"},
		Comment: core.Comment{PlatformMsgID: "300.1", AuthorID: "U3", Role: core.RoleUser, Text: "hello"},
		Job:     &core.Job{Piece: "default", Instruction: "hello", TriggerMsgID: "300.1"}})
	must(err)
	_, _, err = st.AddInbox(ctx, core.InboxEvent{Platform: core.PlatformSlack, Key: "E3", Payload: []byte("{\"raw\":\x00\xff}"),
		ReceivedAt: time.Now(), DueAt: time.Now().Add(time.Minute)})
	must(err)
}

// storeView is everything core.Store's read methods tell of a store.
type storeView struct {
	StoreID    string
	Tasks      []core.Task
	Comments   map[int64][]core.Comment
	Jobs       map[int64][]core.Job
	Events     map[int64][]core.JobEvent
	Approvals  map[string]core.Approval
	Pending    []core.Approval
	Rules      map[string][]core.AllowRule
	Outbox     map[core.Platform]core.OutboxStats
	Due        map[core.Platform][]core.OutboxMessage
	Counts     map[core.JobState]int64
	StatusMsgs map[int64]string
	Known      bool
	Usage      []core.Usage
}

type viewed interface {
	core.Store
	StoreID(ctx context.Context) (string, error)
}

func viewStore(t *testing.T, st viewed) storeView {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	v := storeView{Comments: map[int64][]core.Comment{}, Jobs: map[int64][]core.Job{}, Events: map[int64][]core.JobEvent{},
		Approvals: map[string]core.Approval{}, Rules: map[string][]core.AllowRule{}, Due: map[core.Platform][]core.OutboxMessage{},
		StatusMsgs: map[int64]string{}}
	var err error
	v.StoreID, err = st.StoreID(ctx)
	must(err)
	v.Tasks, err = st.Tasks(ctx, core.TaskFilter{})
	must(err)
	for _, task := range v.Tasks {
		v.Comments[task.ID], err = st.RecentComments(ctx, task.ID, 1000)
		must(err)
		jobs, err := st.Jobs(ctx, core.JobFilter{TaskID: task.ID})
		must(err)
		v.Jobs[task.ID] = jobs
		for _, j := range jobs {
			v.Events[j.ID], err = st.Events(ctx, j.ID)
			must(err)
			for w := int64(1); w <= j.WaitSeq; w++ {
				if a, err := st.Approval(ctx, j.ID, w); err == nil {
					v.Approvals[a.Key()] = a
				}
			}
			if id, err := st.StatusMessage(ctx, j.ID); err == nil {
				v.StatusMsgs[j.ID] = id
			}
		}
	}
	v.Pending, err = st.PendingApprovals(ctx, 0)
	must(err)
	for _, ch := range []string{"slack:C1", "slack:C2", "discord:D1"} {
		v.Rules[ch], err = st.AllowRules(ctx, ch)
		must(err)
	}
	v.Outbox, err = st.OutboxStats(ctx)
	must(err)
	for _, p := range []core.Platform{core.PlatformSlack, core.PlatformDiscord} {
		v.Due[p], err = st.DueOutbox(ctx, p, time.Now().Add(24*time.Hour), 100)
		must(err)
	}
	v.Counts, err = st.CountJobs(ctx)
	must(err)
	v.Known, err = st.InboundKnown(ctx, []string{"event:E1"})
	must(err)
	v.Usage, err = st.Usage(ctx, core.UsageFilter{})
	must(err)
	return v
}

// TestStoreCopy: `baton store copy` copies a populated SQLite store into
// PostgreSQL, leaving the file as it was: every read of core.Store tells
// the same on both, new rows get ids past the copied ones, and a second
// copy into the now full target is refused (exit 2) without the password.
func TestStoreCopy(t *testing.T) {
	dbURL := postgresURL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "hunter2-secret-pw") // trust auth ignores it
	to := u.String()

	path := filepath.Join(t.TempDir(), "data", "baton.db")
	fillSQLite(t, path)
	before := fileSum(t, path)

	code, stdout, stderr := runMain(t, nil, "store", "copy", "--from", "sqlite:"+path, "--to", to)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	wantCounts := map[string]string{"tasks": "4", "comments": "3", "jobs": "4", "job_events": "15", "outbox": "6",
		"inbound_events": "3", "inbox": "1", "approvals": "2", "allow_rules": "1", "job_checkpoints": "2", "usage": "1"}
	gotCounts := map[string]string{}
	for _, line := range strings.Split(stdout, "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			gotCounts[f[0]] = f[1]
		}
	}
	if diff := cmp.Diff(wantCounts, gotCounts); diff != "" {
		t.Errorf("counts per table (-want +got):\n%s\nstdout:\n%s", diff, stdout)
	}
	if strings.Contains(stdout+stderr, "hunter2-secret-pw") {
		t.Errorf("the password was printed:\n%s%s", stdout, stderr)
	}
	if fileSum(t, path) != before {
		t.Error("the copy changed the SQLite file")
	}

	ctx := context.Background()
	src, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := postgres.Open(ctx, dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	want, got := viewStore(t, src), viewStore(t, dst)
	if len(want.Tasks) != 4 || len(want.Approvals) != 2 || len(want.Pending) != 1 || len(want.Rules["slack:C1"]) != 1 {
		t.Fatalf("the SQLite store is not populated as meant: %d tasks, %d approvals, %d pending, %d rules",
			len(want.Tasks), len(want.Approvals), len(want.Pending), len(want.Rules["slack:C1"]))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PostgreSQL after the copy differs from SQLite (-sqlite +postgres):\n%s", diff)
	}

	// The claim came along: another deliverer claims the same messages of
	// both stores, the claimed one not among them.
	var held int64
	for _, m := range want.Due[core.PlatformSlack] {
		if m.Claims == 1 {
			held = m.ID
		}
	}
	claimable := func(st core.Store) []int64 {
		t.Helper()
		msgs, err := st.ClaimOutbox(ctx, core.PlatformSlack, "gateway-2", time.Now(), time.Minute, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, m := range msgs {
			ids = append(ids, m.ID)
		}
		return ids
	}
	if s, d := claimable(src), claimable(dst); held == 0 || slices.Contains(d, held) || !slices.Equal(s, d) {
		t.Errorf("claimable after the copy: %v in PostgreSQL, %v in SQLite; want the same, without the claimed %d", d, s, held)
	}

	// The pending approval's checkpoint came along: the resumed attempt takes it.
	p := got.Pending[0]
	if _, _, err := dst.DecideApproval(ctx, core.ApprovalDecision{JobID: p.JobID, WaitSeq: p.WaitSeq, Verdict: core.VerdictApprove, By: "discord:9", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.StartJob(ctx, p.JobID, 2); err != nil {
		t.Fatal(err)
	}
	if ck, err := dst.TakeCheckpoint(ctx, p.JobID, 2); err != nil || ck != "checkpoint-3" {
		t.Errorf("TakeCheckpoint after the copy = %q, %v; want checkpoint-3", ck, err)
	}

	// New rows get ids and sequence numbers past the copied ones.
	var maxTask int64
	for _, task := range want.Tasks {
		maxTask = max(maxTask, task.ID)
	}
	nt, created, err := dst.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C9", Thread: "900.1"}})
	if err != nil || !created || nt.ID <= maxTask {
		t.Errorf("a task created after the copy: id %d (created %v, %v); want one above %d", nt.ID, created, err, maxTask)
	}
	seqAfter := func(st core.Store, taskID int64) int64 {
		t.Helper()
		if err := st.AddOutbox(ctx, core.OutboxMessage{TaskID: taskID, Kind: core.OutboxPost, Payload: `{"text":"new"}`}); err != nil {
			t.Fatal(err)
		}
		due, err := st.DueOutbox(ctx, core.PlatformSlack, time.Now().Add(24*time.Hour), 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range due {
			if m.TaskID == taskID {
				return m.Seq
			}
		}
		t.Fatalf("task %d's new message is not due", taskID)
		return 0
	}
	// Task 1's messages are all sent or failed: the new one is its first pending.
	if s, d := seqAfter(src, want.Tasks[len(want.Tasks)-1].ID), seqAfter(dst, want.Tasks[len(want.Tasks)-1].ID); s != d || d < 2 {
		t.Errorf("a message added after the copy has seq %d in PostgreSQL, %d in SQLite", d, s)
	}

	code, stdout, stderr = runMain(t, nil, "store", "copy", "--from", "sqlite:"+path, "--to", to)
	if code != exitUsage || !strings.Contains(stderr, "not empty") || !strings.Contains(stderr, u.Host) {
		t.Errorf("a second copy: exit %d, want %d naming the target as not empty\nstdout: %s\nstderr: %s", code, exitUsage, stdout, stderr)
	}
	if strings.Contains(stdout+stderr, "hunter2-secret-pw") {
		t.Errorf("the password was printed:\n%s%s", stdout, stderr)
	}
}

// TestStoreCopyUsage: bad sources and targets are usage errors that never
// show the URL's password, and a missing source file changes nothing.
func TestStoreCopyUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.db")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no subcommand", []string{"store"}, exitUsage, "subcommand is required"},
		{"unknown subcommand", []string{"store", "move"}, exitUsage, "want copy"},
		{"from not sqlite", []string{"store", "copy", "--from", "./baton.db", "--to", "postgres://u:hunter2-secret-pw@h/db"}, exitUsage, "sqlite:PATH"},
		{"to not postgres", []string{"store", "copy", "--from", "sqlite:" + missing, "--to", "mysql://u:hunter2-secret-pw@h/db"}, exitUsage, "--to"},
		{"help", []string{"store", "--help"}, exitOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, nil, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, want %d with %q\nstderr: %s", code, tc.code, tc.want, stderr)
			}
			if strings.Contains(stdout+stderr, "hunter2-secret-pw") {
				t.Errorf("the password was printed:\n%s%s", stdout, stderr)
			}
		})
	}
	dbURL := postgresURL(t)
	code, _, stderr := runMain(t, nil, "store", "copy", "--from", "sqlite:"+missing, "--to", dbURL)
	if code == 0 || !strings.Contains(stderr, "none.db") {
		t.Errorf("a missing source: exit %d\nstderr: %s", code, stderr)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("a missing source was created: %v", err)
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
