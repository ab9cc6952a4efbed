package postgres

import (
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/google/go-cmp/cmp"
)

// TestTaskDedup: concurrent EnsureTask calls for one thread create one
// task, with a workspace of its own under the root; a retired thread
// starts a new one.
func TestTaskDedup(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	ref := core.ThreadRef{Platform: core.PlatformDiscord, Team: "G", Channel: "TH", Thread: "TH"}
	const n = 10
	tasks := make([]core.Task, n)
	created := make([]bool, n)
	together(n, func(i int) {
		var err error
		if tasks[i], created[i], err = s.EnsureTask(ctx, core.Task{Thread: ref, Title: strconv.Itoa(i)}); err != nil {
			t.Error(err)
		}
	})
	creations := 0
	for i := range n {
		if created[i] {
			creations++
		}
		if diff := cmp.Diff(tasks[0], tasks[i]); diff != "" {
			t.Errorf("EnsureTask %d returned another task (-first +this):\n%s", i, diff)
		}
	}
	if creations != 1 {
		t.Errorf("%d concurrent EnsureTask made %d creations, want 1", n, creations)
	}
	task := tasks[0]
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(filepath.Join(s.root, strconv.FormatInt(task.ID, 10))) + `-[0-9a-f]{16}$`)
	if !re.MatchString(task.Workspace) {
		t.Errorf("workspace %q: want %s/<id>-<16 hex digits>", task.Workspace, s.root)
	}
	if got, err := s.TaskByThread(ctx, ref); err != nil || got.ID != task.ID {
		t.Errorf("TaskByThread = %d, %v; want %d", got.ID, err, task.ID)
	}

	if err := s.RetireThread(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	fresh, isNew, err := s.EnsureTask(ctx, core.Task{Thread: ref})
	if err != nil || !isNew || fresh.ID == task.ID || fresh.Workspace == task.Workspace {
		t.Errorf("EnsureTask after retiring = %+v, created %v, %v; want a new task with its own workspace", fresh, isNew, err)
	}
	if err := s.RetireThread(ctx, 999999); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("RetireThread of an unknown task: %v, want ErrNotFound", err)
	}
	if _, _, err := s.EnsureTask(ctx, core.Task{ParentTaskID: 999999, Thread: core.ThreadRef{Platform: core.PlatformSubtask, Thread: "x"}}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("EnsureTask with a missing parent: %v, want ErrNotFound", err)
	}
}

// TestCommentDedup: of concurrent comments with one platform message id,
// one is stored; the others get it back with ErrDuplicate. Comments
// without an id are never duplicates.
func TestCommentDedup(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	task := newTask(t, s)
	const n = 8
	got := make([]core.Comment, n)
	errs := make([]error, n)
	together(n, func(i int) {
		got[i], errs[i] = s.AddComment(ctx, core.Comment{TaskID: task.ID, PlatformMsgID: "m1", Text: "hi " + strconv.Itoa(i)})
	})
	stored := 0
	for i := range n {
		switch {
		case errs[i] == nil:
			stored++
		case !errors.Is(errs[i], core.ErrDuplicate):
			t.Errorf("AddComment %d: %v, want nil or ErrDuplicate", i, errs[i])
		}
		if got[i].ID != got[0].ID || got[i].Text != got[0].Text {
			t.Errorf("AddComment %d returned comment %d %q, want the stored %d %q", i, got[i].ID, got[i].Text, got[0].ID, got[0].Text)
		}
	}
	if stored != 1 {
		t.Errorf("%d concurrent comments with one message id stored %d, want 1", n, stored)
	}
	for range 2 {
		if _, err := s.AddComment(ctx, core.Comment{TaskID: task.ID, Role: core.RoleBot, Text: "answer"}); err != nil {
			t.Errorf("comment without a message id: %v", err)
		}
	}
	other := newTask(t, s)
	if _, err := s.AddComment(ctx, core.Comment{TaskID: other.ID, PlatformMsgID: "m1"}); err != nil {
		t.Errorf("the same message id in another task: %v", err)
	}
	cs, err := s.RecentComments(ctx, task.ID, 10)
	if err != nil || len(cs) != 3 {
		t.Errorf("task has %d comments (%v), want 3", len(cs), err)
	}
	if _, err := s.AddComment(ctx, core.Comment{TaskID: 999999, Text: "x"}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("comment on a missing task: %v, want ErrNotFound", err)
	}
	if _, err := s.AddComment(ctx, core.Comment{TaskID: task.ID, Role: "admin"}); err == nil {
		t.Error("comment with an unknown role succeeded")
	}
}
