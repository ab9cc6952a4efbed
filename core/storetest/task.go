package storetest

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

func testEnsureTask(t *testing.T, s core.Store) {
	ctx := t.Context()
	ref := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: "1700.1"}
	before := time.Now().Add(-time.Second)

	task, created, err := s.EnsureTask(ctx, core.Task{Thread: ref, OwnerUser: "U1", Title: "first"})
	if err != nil || !created {
		t.Fatalf("EnsureTask = %v, %v; want created", created, err)
	}
	if !regexp.MustCompile(`^` + strconv.FormatInt(task.ID, 10) + `-[0-9a-f]{16}$`).MatchString(filepath.Base(task.Workspace)) {
		t.Errorf("workspace %q: want <root>/<id>-<16 hex digits>", task.Workspace)
	}
	want := core.Task{ID: task.ID, Thread: ref, OwnerUser: "U1", Title: "first",
		Workspace: task.Workspace, CreatedAt: task.CreatedAt, UpdatedAt: task.UpdatedAt}
	if d := diff(want, task); d != "" {
		t.Errorf("created task:\n%s", d)
	}
	if task.ID == 0 || task.CreatedAt.Before(before) || task.CreatedAt.Location() != time.UTC {
		t.Errorf("task ID %d, CreatedAt %v: want an id and a recent UTC time", task.ID, task.CreatedAt)
	}

	again, created, err := s.EnsureTask(ctx, core.Task{Thread: ref, OwnerUser: "U2", Title: "second"})
	if err != nil || created {
		t.Fatalf("EnsureTask again = %v, %v; want existing", created, err)
	}
	if d := diff(task, again); d != "" {
		t.Errorf("existing task:\n%s", d)
	}

	byThread, err := s.TaskByThread(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(task, byThread); d != "" {
		t.Errorf("TaskByThread:\n%s", d)
	}

	// Another thread in the same channel, a subtask with its own workspace.
	sub, created, err := s.EnsureTask(ctx, core.Task{ParentTaskID: task.ID, Workspace: "/elsewhere/x",
		Thread: core.ThreadRef{Platform: core.PlatformSubtask, Thread: "job-1-0"}})
	if err != nil || !created {
		t.Fatalf("EnsureTask subtask = %v, %v", created, err)
	}
	if sub.ID == task.ID || sub.ParentTaskID != task.ID || sub.Workspace != "/elsewhere/x" {
		t.Errorf("subtask = %+v; want a new task with parent %d and its own workspace", sub, task.ID)
	}
}

func testEnsureTaskErrors(t *testing.T, s core.Store) {
	ctx := t.Context()
	if _, _, err := s.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Channel: "C"}}); err == nil {
		t.Error("EnsureTask without platform succeeded")
	}
	_, _, err := s.EnsureTask(ctx, core.Task{ParentTaskID: 999, Thread: core.ThreadRef{Platform: core.PlatformSubtask, Thread: "x"}})
	if !errors.Is(err, core.ErrNotFound) {
		t.Errorf("EnsureTask with a missing parent: %v, want ErrNotFound", err)
	}
	if _, err := s.Task(ctx, 999); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("Task(999): %v, want ErrNotFound", err)
	}
	if _, err := s.TaskByThread(ctx, core.ThreadRef{Platform: core.PlatformSlack, Thread: "nope"}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("TaskByThread: %v, want ErrNotFound", err)
	}
}

func testEnsureTaskConcurrent(t *testing.T, s core.Store) {
	ref := core.ThreadRef{Platform: core.PlatformDiscord, Team: "G", Channel: "TH", Thread: "TH"}
	ids := make(chan int64, 10)
	creations := make(chan bool, 10)
	for range 10 {
		go func() {
			task, created, err := s.EnsureTask(t.Context(), core.Task{Thread: ref})
			if err != nil {
				t.Error(err)
			}
			ids <- task.ID
			creations <- created
		}()
	}
	seen := map[int64]bool{}
	nCreated := 0
	for range 10 {
		seen[<-ids] = true
		if <-creations {
			nCreated++
		}
	}
	if len(seen) != 1 || nCreated != 1 {
		t.Errorf("10 concurrent EnsureTask gave ids %v and %d creations; want one id, one creation", seen, nCreated)
	}
}

func testAddComment(t *testing.T, s core.Store) {
	ctx := t.Context()
	task := newTask(t, s)
	at := time.Date(2025, 1, 2, 3, 4, 5, 6_000_000, time.UTC)

	c, err := s.AddComment(ctx, core.Comment{TaskID: task.ID, PlatformMsgID: "m1", AuthorID: "U1", AuthorName: "Ann",
		Role: core.RoleUser, Text: "hi", Files: []string{"input/a.txt", "input/b.png"}, CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	want := core.Comment{ID: c.ID, TaskID: task.ID, PlatformMsgID: "m1", AuthorID: "U1", AuthorName: "Ann",
		Role: core.RoleUser, Text: "hi", Files: []string{"input/a.txt", "input/b.png"}, CreatedAt: at}
	if d := diff(want, c); d != "" {
		t.Errorf("AddComment:\n%s", d)
	}

	dup, err := s.AddComment(ctx, core.Comment{TaskID: task.ID, PlatformMsgID: "m1", Text: "again"})
	if !errors.Is(err, core.ErrDuplicate) {
		t.Fatalf("duplicate AddComment: %v, want ErrDuplicate", err)
	}
	if d := diff(want, dup); d != "" {
		t.Errorf("duplicate returns the stored comment:\n%s", d)
	}

	// The same message id in another task, and comments without one, are new.
	other := newTask(t, s)
	if _, err := s.AddComment(ctx, core.Comment{TaskID: other.ID, PlatformMsgID: "m1"}); err != nil {
		t.Errorf("same message id in another task: %v", err)
	}
	for range 2 {
		bot, err := s.AddComment(ctx, core.Comment{TaskID: task.ID, Role: core.RoleBot, Text: "answer"})
		if err != nil {
			t.Fatalf("comment without message id: %v", err)
		}
		if bot.Files == nil || len(bot.Files) != 0 || bot.CreatedAt.IsZero() {
			t.Errorf("bot comment = %+v; want empty files and a creation time", bot)
		}
	}
	cs, err := s.RecentComments(ctx, task.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 {
		t.Errorf("task has %d comments, want 3", len(cs))
	}

	if _, err := s.AddComment(ctx, core.Comment{TaskID: 999, Text: "x"}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("comment on a missing task: %v, want ErrNotFound", err)
	}
	if _, err := s.AddComment(ctx, core.Comment{TaskID: task.ID, Role: "admin"}); err == nil {
		t.Error("comment with an unknown role succeeded")
	}
}

// A message's original markup is kept beside the text the model reads,
// and not stored twice when they are the same.
func testCommentOriginal(t *testing.T, s core.Store) {
	ctx := t.Context()
	task := newTask(t, s)
	for _, c := range []core.Comment{
		{TaskID: task.ID, PlatformMsgID: "m1", Text: "@alice look at #ops", Original: "<@U1> look at <#C1|ops>"},
		{TaskID: task.ID, PlatformMsgID: "m2", Text: "plain", Original: "plain"},
	} {
		if _, err := s.AddComment(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := s.RecentComments(ctx, task.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]string
	for _, c := range cs {
		got = append(got, [2]string{c.Text, c.Original})
	}
	want := [][2]string{{"@alice look at #ops", "<@U1> look at <#C1|ops>"}, {"plain", ""}}
	if d := diff(want, got); d != "" {
		t.Errorf("stored text and original:\n%s", d)
	}
}

func testRecentComments(t *testing.T, s core.Store) {
	ctx := t.Context()
	task := newTask(t, s)
	other := newTask(t, s)
	empty := newTask(t, s)
	// Creation times run backwards so that order by time and order of
	// arrival disagree: arrival wins.
	base := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	var texts []string
	for i := range 7 {
		text := fmt.Sprintf("c%d", i)
		texts = append(texts, text)
		if _, err := s.AddComment(ctx, core.Comment{TaskID: task.ID, Text: text, CreatedAt: base.Add(-time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddComment(ctx, core.Comment{TaskID: other.ID, Text: "other"}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		taskID int64
		n      int
		want   []string
	}{
		{"zero", task.ID, 0, nil},
		{"negative", task.ID, -1, nil},
		{"one", task.ID, 1, texts[6:]},
		{"five", task.ID, 5, texts[2:]},
		{"exactly all", task.ID, 7, texts},
		{"more than all", task.ID, 100, texts},
		{"task without comments", empty.ID, 5, nil},
		{"no such task", 999, 5, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, err := s.RecentComments(ctx, tt.taskID, tt.n)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i, c := range cs {
				got = append(got, c.Text)
				if c.TaskID != tt.taskID {
					t.Errorf("comment %d belongs to task %d", i, c.TaskID)
				}
				if i > 0 && c.ID <= cs[i-1].ID {
					t.Errorf("comment %d id %d not after %d", i, c.ID, cs[i-1].ID)
				}
			}
			if len(tt.want) == 0 && len(got) == 0 {
				return
			}
			if d := diff(tt.want, got); d != "" {
				t.Errorf("RecentComments(%d):\n%s", tt.n, d)
			}
		})
	}
}

func testRetireThread(t *testing.T, s core.Store) {
	ctx := t.Context()
	old := newTask(t, s)
	if err := s.RetireThread(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TaskByThread(ctx, old.Thread); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("the retired thread still finds a task: %v", err)
	}
	fresh, created, err := s.EnsureTask(ctx, core.Task{Thread: old.Thread})
	if err != nil || !created || fresh.ID == old.ID {
		t.Errorf("EnsureTask after retiring = %d created %v, %v; want a new task", fresh.ID, created, err)
	}
	if err := s.RetireThread(ctx, 999); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("retiring an unknown task: %v, want ErrNotFound", err)
	}
}

// testTasks: the listing is newest first and pages by ID; it filters on
// the platform, on the state of each task's newest job (not of an older
// one) and on the creation time.
func testTasks(t *testing.T, s core.Store) {
	ctx := t.Context()
	// Creation times strictly apart, oldest first: each task is created
	// once the clock has moved past the previous one's creation.
	var prev core.Task
	mk := func(p core.Platform, thread string, jobs ...bool) core.Task {
		t.Helper()
		for prev.ID != 0 && !time.Now().After(prev.CreatedAt.Add(2*time.Millisecond)) {
			time.Sleep(time.Millisecond)
		}
		task, _, err := s.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: p, Channel: "c", Thread: thread}, Title: thread})
		if err != nil {
			t.Fatal(err)
		}
		for _, abort := range jobs {
			j, err := s.CreateJob(ctx, core.Job{TaskID: task.ID, Piece: "chat", Instruction: "x"})
			if err != nil {
				t.Fatal(err)
			}
			if abort {
				if _, err := s.RequestAbort(ctx, j.ID, "u"); err != nil {
					t.Fatal(err)
				}
			}
		}
		if prev.ID != 0 && !task.CreatedAt.After(prev.CreatedAt) {
			t.Fatalf("task %d created at %v, not after task %d at %v (the premise of this test)", task.ID, task.CreatedAt, prev.ID, prev.CreatedAt)
		}
		prev = task
		return task
	}
	slack := mk(core.PlatformSlack, "s", false)
	aborted := mk(core.PlatformAPI, "a", true)
	none := mk(core.PlatformAPI, "n")
	requeued := mk(core.PlatformAPI, "r", true, false) // an aborted job, then a queued one
	last := mk(core.PlatformAPI, "l", false)
	ids := func(f core.TaskFilter) []int64 {
		t.Helper()
		got, err := s.Tasks(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		out := []int64{}
		for _, task := range got {
			out = append(out, task.ID)
		}
		return out
	}
	api := core.PlatformAPI
	for _, tc := range []struct {
		name string
		f    core.TaskFilter
		want []int64
	}{
		{"all", core.TaskFilter{}, []int64{last.ID, requeued.ID, none.ID, aborted.ID, slack.ID}},
		{"api", core.TaskFilter{Platform: api}, []int64{last.ID, requeued.ID, none.ID, aborted.ID}},
		{"first page", core.TaskFilter{Platform: api, Limit: 2}, []int64{last.ID, requeued.ID}},
		{"second page", core.TaskFilter{Platform: api, Limit: 2, Before: requeued.ID}, []int64{none.ID, aborted.ID}},
		{"past the end", core.TaskFilter{Platform: api, Limit: 2, Before: aborted.ID}, []int64{}},
		{"queued: the newest job counts", core.TaskFilter{Platform: api, State: core.JobQueued}, []int64{last.ID, requeued.ID}},
		{"aborted: an older job does not count", core.TaskFilter{Platform: api, State: core.JobAborted}, []int64{aborted.ID}},
		{"no task in the state", core.TaskFilter{State: core.JobRunning}, []int64{}},
		{"since, inclusive", core.TaskFilter{Platform: api, Since: none.CreatedAt}, []int64{last.ID, requeued.ID, none.ID}},
		{"since and state and page", core.TaskFilter{Since: aborted.CreatedAt, State: core.JobQueued, Before: last.ID}, []int64{requeued.ID}},
		{"text in the title, any case", core.TaskFilter{Text: "R"}, []int64{requeued.ID}},
		{"channel", core.TaskFilter{Platform: api, Channel: "c"}, []int64{last.ID, requeued.ID, none.ID, aborted.ID}},
		{"another channel", core.TaskFilter{Channel: "x"}, []int64{}},
		{"requester", core.TaskFilter{Owner: "nobody"}, []int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := diff(tc.want, ids(tc.f)); d != "" {
				t.Errorf("Tasks(%+v) ids:\n%s", tc.f, d)
			}
		})
	}
	got, err := s.Tasks(ctx, core.TaskFilter{Platform: api, Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("Tasks = %v, %v", got, err)
	}
	want, err := s.Task(ctx, last.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(want, got[0]); d != "" || !got[0].CreatedAt.Equal(last.CreatedAt) {
		t.Errorf("listed task:\n%s", d)
	}
}

// testWorkspace: a task created without a workspace gets
// <root>/<id>-<16 hex digits>, one root for every task of the store, a
// name that never repeats; a given workspace is kept.
func testWorkspace(t *testing.T, s core.Store) {
	a, b := newTask(t, s), newTask(t, s)
	for _, task := range []core.Task{a, b} {
		if !regexp.MustCompile(`^` + strconv.FormatInt(task.ID, 10) + `-[0-9a-f]{16}$`).MatchString(filepath.Base(task.Workspace)) {
			t.Errorf("task %d workspace %q: want <root>/<id>-<16 hex digits>", task.ID, task.Workspace)
		}
	}
	if root := filepath.Dir(a.Workspace); root == "." || root != filepath.Dir(b.Workspace) {
		t.Errorf("workspaces %q and %q: want both under the store's workspace root", a.Workspace, b.Workspace)
	}
	if a.Workspace == b.Workspace {
		t.Errorf("two tasks share workspace %q", a.Workspace)
	}
	given, _, err := s.EnsureTask(t.Context(), core.Task{Thread: core.ThreadRef{Platform: core.PlatformAPI, Thread: "given"}, Workspace: "/srv/given"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Task(t.Context(), given.ID); err != nil || got.Workspace != "/srv/given" || given.Workspace != "/srv/given" {
		t.Errorf("task with a workspace given: %q, stored %q, %v; want /srv/given", given.Workspace, got.Workspace, err)
	}
}
