package sqlite

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/workspace"
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

func taskByThread(ctx context.Context, q querier, ref core.ThreadRef) (core.Task, error) {
	return scanTask(q.QueryRowContext(ctx, qTaskByThread,
		string(ref.Platform), ref.Team, ref.Channel, ref.Thread))
}

// insertTask stores t as a new task; one without a workspace gets
// root/<id>-<suffix> (see workspaceName).
func insertTask(ctx context.Context, tx *txn, t core.Task, root string) (core.Task, error) {
	at := ms(now())
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO tasks (parent_task_id, platform, team, channel, thread,
		owner_user, title, workspace, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		nullID(t.ParentTaskID), string(t.Thread.Platform), t.Thread.Team, t.Thread.Channel, t.Thread.Thread,
		t.OwnerUser, t.Title, t.Workspace, at, at).Scan(&id)
	if err != nil {
		return core.Task{}, constraint(err)
	}
	if t.Workspace == "" {
		ws := workspace.Dir(root, id)
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET workspace = ? WHERE id = ?`, ws, id); err != nil {
			return core.Task{}, err
		}
	}
	return scanTask(tx.QueryRowContext(ctx, `SELECT `+taskCols+` FROM tasks WHERE id = ?`, id))
}

// EnsureTask returns the task for t.Thread, creating it from t when there
// is none (see core.TaskStore). A new task without a workspace gets
// WorkspaceRoot/<id>-<random suffix>, chosen once and kept in the store:
// every reader of the task's workspace uses Task.Workspace.
// t.Thread.Platform must be set.
func (s *Store) EnsureTask(ctx context.Context, t core.Task) (core.Task, bool, error) {
	if t.Thread.Platform == "" {
		return core.Task{}, false, errors.New("ensure task: thread has no platform")
	}
	var out core.Task
	var created bool
	err := s.tx(ctx, func(tx *txn) error {
		created = false
		found, err := taskByThread(ctx, tx, t.Thread)
		if err == nil {
			out = found
			return nil
		}
		if !errors.Is(err, core.ErrNotFound) {
			return err
		}
		out, err = insertTask(ctx, tx, t, s.root)
		created = true
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
	rows, err := s.reader.QueryContext(ctx, `SELECT workspace FROM tasks WHERE workspace <> ''`)
	if err != nil {
		return nil, fmt.Errorf("task workspaces: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var ws string
		if err := rows.Scan(&ws); err != nil {
			return nil, fmt.Errorf("task workspaces: %w", err)
		}
		out = append(out, ws)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("task workspaces: %w", err)
	}
	return out, nil
}

// StoreID returns the id made when the store was created: copies of the
// file share it, another store never does (see migration 0004).
func (s *Store) StoreID(ctx context.Context) (string, error) {
	var id string
	if err := s.reader.QueryRowContext(ctx, `SELECT value FROM store_meta WHERE key = 'store_id'`).Scan(&id); err != nil {
		return "", fmt.Errorf("store id: %w", notFound(err))
	}
	return id, nil
}

// Task returns the task with id, or an error wrapping core.ErrNotFound.
func (s *Store) Task(ctx context.Context, id int64) (core.Task, error) {
	t, err := scanTask(s.reader.QueryRowContext(ctx, `SELECT `+taskCols+` FROM tasks WHERE id = ?`, id))
	if err != nil {
		return core.Task{}, fmt.Errorf("task %d: %w", id, err)
	}
	return t, nil
}

// Tasks returns the tasks matching f, newest first (see core.TaskStore).
// The state of a task is that of its newest job (the highest job ID).
func (s *Store) Tasks(ctx context.Context, f core.TaskFilter) ([]core.Task, error) {
	var where []string
	var args []any
	if f.Platform != "" {
		where = append(where, "t.platform = ?")
		args = append(args, string(f.Platform))
	}
	if f.State != "" {
		where = append(where, "(SELECT j.state FROM jobs j WHERE j.task_id = t.id ORDER BY j.id DESC LIMIT 1) = ?")
		args = append(args, string(f.State))
	}
	if !f.Since.IsZero() {
		where = append(where, "t.created_at >= ?")
		args = append(args, f.Since.UnixMilli())
	}
	if f.Before != 0 {
		where = append(where, "t.id < ?")
		args = append(args, f.Before)
	}
	if f.Channel != "" {
		where = append(where, "t.channel = ?")
		args = append(args, f.Channel)
	}
	if f.Owner != "" {
		where = append(where, "t.owner_user = ?")
		args = append(args, f.Owner)
	}
	if f.Text != "" {
		where = append(where, "instr(lower(t.title), lower(?)) > 0")
		args = append(args, f.Text)
	}
	q := `SELECT ` + taskCols + ` FROM tasks t`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY t.id DESC"
	if f.Limit > 0 {
		q += sqlLimit(f.Limit)
	}
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	defer rows.Close()
	var out []core.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, fmt.Errorf("tasks: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	return out, nil
}

// TaskByThread returns the task keyed on ref, or an error wrapping
// core.ErrNotFound.
func (s *Store) TaskByThread(ctx context.Context, ref core.ThreadRef) (core.Task, error) {
	t, err := taskByThread(ctx, s.reader, ref)
	if err != nil {
		return core.Task{}, fmt.Errorf("task by thread %s/%s/%s/%s: %w", ref.Platform, ref.Team, ref.Channel, ref.Thread, err)
	}
	return t, nil
}

// RetireThread implements core.TaskStore.
func (s *Store) RetireThread(ctx context.Context, id int64) error {
	err := s.tx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE tasks SET thread = thread || '#retired-' || CAST(id AS TEXT), updated_at = ?
			WHERE id = ?`, ms(now()), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return cmp.Or(err, core.ErrNotFound)
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
	var role, files string
	var created int64
	if err := r.Scan(&c.ID, &c.TaskID, &c.PlatformMsgID, &c.AuthorID, &c.AuthorName, &role, &c.Text, &c.Original, &files, &created); err != nil {
		return core.Comment{}, notFound(err)
	}
	c.Role = core.Role(role)
	c.CreatedAt = fromMS(created)
	if err := json.Unmarshal([]byte(files), &c.Files); err != nil {
		return core.Comment{}, fmt.Errorf("comment %d: files: %w", c.ID, err)
	}
	return c, nil
}

// insertComment stores c in tx. When c.PlatformMsgID is taken in the task,
// it returns the stored comment and an error wrapping core.ErrDuplicate.
// A comment without CreatedAt gets the store's clock.
func insertComment(ctx context.Context, tx *txn, c core.Comment) (core.Comment, error) {
	if c.PlatformMsgID != "" {
		old, err := scanComment(tx.QueryRowContext(ctx, qCommentByMsg, c.TaskID, c.PlatformMsgID))
		if err == nil {
			return old, fmt.Errorf("message %s: %w", c.PlatformMsgID, core.ErrDuplicate)
		}
		if !errors.Is(err, core.ErrNotFound) {
			return core.Comment{}, err
		}
	}
	if c.Role == "" {
		c.Role = core.RoleUser
	}
	if c.Files == nil {
		c.Files = []string{}
	}
	b, err := json.Marshal(c.Files)
	if err != nil {
		return core.Comment{}, err
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
	err = tx.QueryRowContext(ctx, `INSERT INTO comments (task_id, platform_msg_id, author_id, author_name, role, text, original, files, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		c.TaskID, msgID, c.AuthorID, c.AuthorName, string(c.Role), c.Text, c.Original, string(b), ms(c.CreatedAt)).Scan(&c.ID)
	if err != nil {
		return core.Comment{}, constraint(err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tasks SET updated_at = ? WHERE id = ?`, ms(now()), c.TaskID); err != nil {
		return core.Comment{}, err
	}
	c.CreatedAt = fromMS(ms(c.CreatedAt))
	return c, nil
}

// AddComment stores c and returns it with its ID (see core.TaskStore). A
// comment without Role is a user's; one without CreatedAt gets the
// store's clock. A missing task is an error wrapping core.ErrNotFound.
func (s *Store) AddComment(ctx context.Context, c core.Comment) (core.Comment, error) {
	var out core.Comment
	var dup error
	err := s.tx(ctx, func(tx *txn) error {
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
	rows, err := s.reader.QueryContext(ctx, qRecentComments+sqlLimit(n), taskID)
	if err != nil {
		return nil, fmt.Errorf("recent comments of task %d: %w", taskID, err)
	}
	defer rows.Close()
	var out []core.Comment
	for rows.Next() {
		c, err := scanComment(rows)
		if err != nil {
			return nil, fmt.Errorf("recent comments of task %d: %w", taskID, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("recent comments of task %d: %w", taskID, err)
	}
	slices.Reverse(out)
	return out, nil
}
