package sqlite

import (
	"context"
	"fmt"

	"github.com/baton-bot/baton/core"
)

// TaskFilter selects tasks for a listing. Zero fields do not filter.
type TaskFilter struct {
	// State keeps the tasks whose newest job is in this state (a task
	// without jobs has none and is left out).
	State core.JobState
	Limit int // 0: no limit
}

// Tasks returns the tasks matching f, newest first (`baton tasks list`).
func (s *Store) Tasks(ctx context.Context, f TaskFilter) ([]core.Task, error) {
	q := `SELECT ` + taskCols + ` FROM tasks`
	var args []any
	if f.State != "" {
		// jobs_task (task_id, id) finds each task's newest job.
		q += ` WHERE (SELECT state FROM jobs WHERE jobs.task_id = tasks.id ORDER BY jobs.id DESC LIMIT 1) = ?`
		args = append(args, string(f.State))
	}
	q += ` ORDER BY id DESC`
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
