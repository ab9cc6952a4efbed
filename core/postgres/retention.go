package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-bot/baton/core"
)

var _ core.Pruner = (*Store)(nil)

// taskOpen is the condition, on a task id column, that the task is open:
// it or its parent task has a job queued, running or waiting.
func taskOpen(col string) string {
	active := `('queued', 'running', 'waiting_human', 'waiting_subtasks', 'waiting_approval')`
	return `(EXISTS (SELECT 1 FROM jobs a WHERE a.task_id = ` + col + ` AND a.state IN ` + active + `)
		OR EXISTS (SELECT 1 FROM tasks pt JOIN jobs a ON a.task_id = pt.parent_task_id
			WHERE pt.id = ` + col + ` AND a.state IN ` + active + `))`
}

// The pruning queries: $1 is the cutoff (unix ms; rows older go), $2 the
// batch; each reads the rows past their age through an index by time,
// oldest first. Freed space is left to autovacuum to reuse.
var (
	qPruneEvents = `DELETE FROM job_events WHERE id IN (
		SELECT e.id FROM job_events e JOIN jobs j ON j.id = e.job_id
		WHERE e.at < $1 AND j.state IN ('succeeded', 'failed', 'aborted') AND NOT ` + taskOpen("j.task_id") + `
		ORDER BY e.at LIMIT $2)`
	qPruneComments = `DELETE FROM comments WHERE id IN (
		SELECT c.id FROM comments c
		WHERE c.created_at < $1 AND NOT ` + taskOpen("c.task_id") + `
		ORDER BY c.created_at LIMIT $2)`
	qPrunableJobs = `SELECT j.id FROM jobs j
		WHERE j.state IN ('succeeded', 'failed', 'aborted') AND j.finished_at > 0 AND j.finished_at < $1
		  AND NOT ` + taskOpen("j.task_id") + `
		  AND NOT EXISTS (SELECT 1 FROM jobs c WHERE c.parent_job_id = j.id)
		  AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.retry_of = j.id)
		  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.job_id = j.id AND o.state = 'pending')
		ORDER BY j.finished_at LIMIT $2
		FOR UPDATE OF j SKIP LOCKED`
)

// jobDependents are the tables whose rows belong to a job, emptied before
// the job itself goes.
var jobDependents = []string{"job_events", "job_checkpoints", "approvals", "outbox"}

// Prune implements core.Pruner.
func (s *Store) Prune(ctx context.Context, r core.Retention, batch int) (core.Pruned, error) {
	var out core.Pruned
	if batch <= 0 {
		return out, nil
	}
	t := now()
	cut := func(age time.Duration) int64 { return ms(t.Add(-age)) }
	exec := func(q string, age time.Duration) (int64, error) {
		var n int64
		err := s.tx(ctx, func(tx db) error {
			var err error
			n, err = tx.exec(ctx, q, cut(age), batch)
			return err
		})
		return n, err
	}
	var err error
	if r.Events > 0 {
		if out.Events, err = exec(qPruneEvents, r.Events); err != nil {
			return out, fmt.Errorf("prune events: %w", err)
		}
	}
	if r.Comments > 0 {
		if out.Comments, err = exec(qPruneComments, r.Comments); err != nil {
			return out, fmt.Errorf("prune comments: %w", err)
		}
	}
	if r.FinishedJobs > 0 {
		if out.Jobs, err = s.pruneJobs(ctx, cut(r.FinishedJobs), batch); err != nil {
			return out, fmt.Errorf("prune finished jobs: %w", err)
		}
	}
	return out, nil
}

// pruneJobs removes up to batch finished jobs past the cutoff with what
// belongs to them, in one transaction.
func (s *Store) pruneJobs(ctx context.Context, cutoff int64, batch int) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx db) error {
		n = 0
		rows, err := tx.query(ctx, qPrunableJobs, cutoff, batch)
		if err != nil {
			return err
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		for _, table := range jobDependents {
			if _, err := tx.exec(ctx, `DELETE FROM `+table+` WHERE job_id = ANY($1)`, ids); err != nil {
				return fmt.Errorf("%s: %w", table, err)
			}
		}
		n, err = tx.exec(ctx, `DELETE FROM jobs WHERE id = ANY($1)`, ids)
		return err
	})
	return n, err
}
