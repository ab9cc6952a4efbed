package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/workspace"
	"github.com/jackc/pgx/v5"
)

const taskCols = `id, COALESCE(parent_task_id, 0), platform, team, channel, thread,
	owner_user, title, workspace, created_at, updated_at`

func scanTask(r scanner) (core.Task, error) {
	var t core.Task
	var platform string
	var created, updated int64
	err := r.Scan(&t.ID, &t.ParentTaskID, &platform, &t.Thread.Team, &t.Thread.Channel, &t.Thread.Thread,
		&t.OwnerUser, &t.Title, &t.Workspace, &created, &updated)
	if err != nil {
		return core.Task{}, notFound(err)
	}
	t.Thread.Platform = core.Platform(platform)
	t.CreatedAt, t.UpdatedAt = fromMS(created), fromMS(updated)
	return t, nil
}

// taskByThread reads the task keyed on ref. With lock, its row stays
// locked until the transaction ends (FOR NO KEY UPDATE: rows referencing
// it may still be written meanwhile).
func taskByThread(ctx context.Context, d db, ref core.ThreadRef, lock bool) (core.Task, error) {
	q := qTaskByThread
	if lock {
		q += ` FOR NO KEY UPDATE`
	}
	return scanTask(d.row(ctx, q, string(ref.Platform), ref.Team, ref.Channel, ref.Thread))
}

// ensureTask returns the task of t.Thread, creating it from t (see
// insertTask) when there is none; created reports which. With lock, the
// task's row stays locked until the transaction ends.
func ensureTask(ctx context.Context, tx db, t core.Task, root string, lock bool) (core.Task, bool, error) {
	// A thread's task created, or retired, by another transaction between
	// two statements here is seen by the next one: at READ COMMITTED each
	// statement reads what was committed before it began.
	for range 3 {
		task, err := taskByThread(ctx, tx, t.Thread, lock)
		if !errors.Is(err, core.ErrNotFound) {
			return task, false, err
		}
		task, ok, err := insertTask(ctx, tx, t, root)
		if err != nil || ok {
			return task, ok, err
		}
	}
	return core.Task{}, false, errors.New("the thread's task keeps changing under this transaction")
}

// insertTask stores t as a new task unless its thread has one (ok false);
// one without a workspace gets workspace.Dir(root, id).
func insertTask(ctx context.Context, tx db, t core.Task, root string) (task core.Task, ok bool, err error) {
	at := ms(now())
	var id int64
	err = tx.row(ctx, `INSERT INTO tasks (parent_task_id, platform, team, channel, thread,
		owner_user, title, workspace, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (platform, team, channel, thread) DO NOTHING RETURNING id`,
		nullID(t.ParentTaskID), string(t.Thread.Platform), t.Thread.Team, t.Thread.Channel, t.Thread.Thread,
		t.OwnerUser, t.Title, t.Workspace, at, at).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Task{}, false, nil
	}
	if err != nil {
		return core.Task{}, false, constraint(err)
	}
	if t.Workspace == "" {
		task, err = scanTask(tx.row(ctx, `UPDATE tasks SET workspace = $1 WHERE id = $2 RETURNING `+taskCols,
			workspace.Dir(root, id), id))
	} else {
		task, err = scanTask(tx.row(ctx, `SELECT `+taskCols+` FROM tasks WHERE id = $1`, id))
	}
	return task, err == nil, err
}

// EnsureTask returns the task for t.Thread, creating it from t when there
// is none (see core.TaskStore); of concurrent calls for one thread, one
// creates it. A new task without a workspace gets workspace.Dir of
// WorkspaceRoot, chosen once and kept in the store: every reader of the
// task's workspace uses Task.Workspace. t.Thread.Platform must be set; a
// missing parent task is an error wrapping core.ErrNotFound.
func (s *Store) EnsureTask(ctx context.Context, t core.Task) (core.Task, bool, error) {
	if t.Thread.Platform == "" {
		return core.Task{}, false, errors.New("ensure task: thread has no platform")
	}
	var out core.Task
	var created bool
	err := s.tx(ctx, func(tx db) error {
		var err error
		out, created, err = ensureTask(ctx, tx, t, s.root, false)
		return err
	})
	if err != nil {
		return core.Task{}, false, fmt.Errorf("ensure task %s/%s/%s/%s: %w",
			t.Thread.Platform, t.Thread.Team, t.Thread.Channel, t.Thread.Thread, err)
	}
	return out, created, nil
}

// Workspaces returns the workspace directory of every task, in no order.
// workspace.Claim asks for them to tell the workspaces the store knows.
func (s *Store) Workspaces(ctx context.Context) ([]string, error) {
	rows, err := s.read().query(ctx, `SELECT workspace FROM tasks WHERE workspace <> ''`)
	out, err := collect(rows, err, func(r scanner) (string, error) {
		var ws string
		return ws, r.Scan(&ws)
	})
	if err != nil {
		return nil, fmt.Errorf("task workspaces: %w", err)
	}
	return out, nil
}

// StoreID returns the id made when the store was created: a copy of the
// database (a restored dump) keeps it, another store never has it.
func (s *Store) StoreID(ctx context.Context) (string, error) {
	var id string
	if err := s.read().row(ctx, `SELECT value FROM store_meta WHERE key = 'store_id'`).Scan(&id); err != nil {
		return "", fmt.Errorf("store id: %w", notFound(err))
	}
	return id, nil
}

// Task returns the task with id, or an error wrapping core.ErrNotFound.
func (s *Store) Task(ctx context.Context, id int64) (core.Task, error) {
	t, err := scanTask(s.read().row(ctx, `SELECT `+taskCols+` FROM tasks WHERE id = $1`, id))
	if err != nil {
		return core.Task{}, fmt.Errorf("task %d: %w", id, err)
	}
	return t, nil
}

// Tasks returns the tasks matching f, newest first (see core.TaskStore).
// The state of a task is that of its newest job (the highest job ID).
func (s *Store) Tasks(ctx context.Context, f core.TaskFilter) ([]core.Task, error) {
	var where []string
	var p placeholders
	if f.Platform != "" {
		where = append(where, "t.platform = "+p.add(string(f.Platform)))
	}
	if f.State != "" {
		where = append(where, "(SELECT j.state FROM jobs j WHERE j.task_id = t.id ORDER BY j.id DESC LIMIT 1) = "+p.add(string(f.State)))
	}
	if !f.Since.IsZero() {
		where = append(where, "t.created_at >= "+p.add(f.Since.UnixMilli()))
	}
	if f.Before != 0 {
		where = append(where, "t.id < "+p.add(f.Before))
	}
	if f.Channel != "" {
		where = append(where, "t.channel = "+p.add(f.Channel))
	}
	if f.Owner != "" {
		where = append(where, "t.owner_user = "+p.add(f.Owner))
	}
	if f.Text != "" {
		where = append(where, "strpos(lower(t.title), lower("+p.add(f.Text)+")) > 0")
	}
	q := `SELECT ` + taskCols + ` FROM tasks t`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY t.id DESC"
	if f.Limit > 0 {
		q += " LIMIT " + p.add(f.Limit)
	}
	rows, err := s.read().query(ctx, q, p.args...)
	out, err := collect(rows, err, scanTask)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	return out, nil
}

// TaskByThread returns the task keyed on ref, or an error wrapping
// core.ErrNotFound.
func (s *Store) TaskByThread(ctx context.Context, ref core.ThreadRef) (core.Task, error) {
	t, err := taskByThread(ctx, s.read(), ref, false)
	if err != nil {
		return core.Task{}, fmt.Errorf("task by thread %s/%s/%s/%s: %w", ref.Platform, ref.Team, ref.Channel, ref.Thread, err)
	}
	return t, nil
}

// RetireThread implements core.TaskStore: the task's thread key gets the
// suffix #retired-<id>. An unknown task is an error wrapping
// core.ErrNotFound.
func (s *Store) RetireThread(ctx context.Context, id int64) error {
	err := s.tx(ctx, func(tx db) error {
		n, err := tx.exec(ctx, `UPDATE tasks SET thread = thread || '#retired-' || id::text, updated_at = $1
			WHERE id = $2`, ms(now()), id)
		if err != nil {
			return err
		}
		if n == 0 {
			return core.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("retire the thread of task %d: %w", id, err)
	}
	return nil
}

const commentCols = `id, task_id, COALESCE(platform_msg_id, ''), author_id, author_name, role, text, original, files, created_at`

func scanComment(r scanner) (core.Comment, error) {
	var c core.Comment
	var role string
	var created int64
	if err := r.Scan(&c.ID, &c.TaskID, &c.PlatformMsgID, &c.AuthorID, &c.AuthorName, &role, &c.Text, &c.Original, &c.Files, &created); err != nil {
		return core.Comment{}, notFound(err)
	}
	c.Role = core.Role(role)
	c.CreatedAt = fromMS(created)
	if c.Files == nil {
		c.Files = []string{}
	}
	return c, nil
}

// insertComment stores c in tx. When c.PlatformMsgID is taken in the task
// (also by a transaction committed meanwhile), it returns the stored
// comment and an error wrapping core.ErrDuplicate, having written
// nothing. A comment without Role is a user's; one without CreatedAt gets
// the store's clock.
func insertComment(ctx context.Context, tx db, c core.Comment) (core.Comment, error) {
	if c.Role == "" {
		c.Role = core.RoleUser
	}
	if c.Files == nil {
		c.Files = []string{}
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now()
	}
	var msgID any
	if c.PlatformMsgID != "" {
		msgID = c.PlatformMsgID
	}
	if c.Original == c.Text {
		c.Original = ""
	}
	out, err := scanComment(tx.row(ctx, `INSERT INTO comments (task_id, platform_msg_id, author_id, author_name, role, text, original, files, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (task_id, platform_msg_id) DO NOTHING RETURNING `+commentCols,
		c.TaskID, msgID, c.AuthorID, c.AuthorName, string(c.Role), c.Text, c.Original, c.Files, ms(c.CreatedAt)))
	if errors.Is(err, core.ErrNotFound) {
		// No row: the message id was taken.
		old, err := scanComment(tx.row(ctx, qCommentByMsg, c.TaskID, c.PlatformMsgID))
		if err != nil {
			return core.Comment{}, fmt.Errorf("message %s: %w", c.PlatformMsgID, err)
		}
		return old, fmt.Errorf("message %s: %w", c.PlatformMsgID, core.ErrDuplicate)
	}
	if err != nil {
		return core.Comment{}, constraint(err)
	}
	if _, err := tx.exec(ctx, `UPDATE tasks SET updated_at = $1 WHERE id = $2`, ms(now()), c.TaskID); err != nil {
		return core.Comment{}, err
	}
	return out, nil
}

// AddComment stores c and returns it with its ID (see core.TaskStore). A
// comment without Role is a user's; one without CreatedAt gets the
// store's clock. A missing task is an error wrapping core.ErrNotFound.
func (s *Store) AddComment(ctx context.Context, c core.Comment) (core.Comment, error) {
	var out core.Comment
	var dup error
	err := s.tx(ctx, func(tx db) error {
		var err error
		out, err = insertComment(ctx, tx, c)
		dup = nil
		if errors.Is(err, core.ErrDuplicate) && out.ID != 0 {
			// Nothing was written: commit the empty transaction and report
			// the stored comment.
			dup, err = err, nil
		}
		return err
	})
	if err != nil {
		return core.Comment{}, fmt.Errorf("add comment to task %d: %w", c.TaskID, err)
	}
	if dup != nil {
		return out, fmt.Errorf("add comment to task %d: %w", c.TaskID, dup)
	}
	return out, nil
}

// RecentComments returns the task's last n comments in the order they were
// stored, oldest first. n <= 0 returns none; a task without comments (or
// no such task) returns an empty slice.
func (s *Store) RecentComments(ctx context.Context, taskID int64, n int) ([]core.Comment, error) {
	if n <= 0 {
		return nil, nil
	}
	rows, err := s.read().query(ctx, qRecentComments, taskID, n)
	out, err := collect(rows, err, scanComment)
	if err != nil {
		return nil, fmt.Errorf("recent comments of task %d: %w", taskID, err)
	}
	slices.Reverse(out)
	return out, nil
}
