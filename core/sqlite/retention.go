package sqlite

import (
	"context"
	"encoding/json"
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

// The pruning queries: ?1 is the cutoff (unix ms; rows older go), ?2 the
// batch. Each reads the rows past their age through an index by time,
// oldest first (INDEXED BY: the planner would otherwise walk all finished
// jobs by state).
var (
	qPruneEvents = `DELETE FROM job_events WHERE id IN (
		SELECT e.id FROM job_events e INDEXED BY job_events_at CROSS JOIN jobs j ON j.id = e.job_id
		WHERE e.at < ?1 AND j.state IN ('succeeded', 'failed', 'aborted') AND NOT ` + taskOpen("j.task_id") + `
		ORDER BY e.at LIMIT ?2)`
	qPruneComments = `DELETE FROM comments WHERE id IN (
		SELECT c.id FROM comments c
		WHERE c.created_at < ?1 AND NOT ` + taskOpen("c.task_id") + `
		ORDER BY c.created_at LIMIT ?2)`
	qPrunableJobs = `SELECT j.id FROM jobs j INDEXED BY jobs_finished
		WHERE j.state IN ('succeeded', 'failed', 'aborted') AND j.finished_at > 0 AND j.finished_at < ?1
		  AND NOT ` + taskOpen("j.task_id") + `
		  AND NOT EXISTS (SELECT 1 FROM jobs c WHERE c.parent_job_id = j.id)
		  AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.retry_of = j.id)
		  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.job_id = j.id AND o.state = 'pending')
		ORDER BY j.finished_at LIMIT ?2`
)

// jobDependents are the tables whose rows belong to a job, emptied before
// the job itself goes.
var jobDependents = []string{"job_events", "job_checkpoints", "approvals", "outbox"}

// vacuumPages is how many free pages each pruning step hands back to the
// file system (with auto_vacuum=INCREMENTAL; otherwise SQLite keeps them
// to reuse for new rows).
const vacuumPages = 512

// Prune implements core.Pruner.
func (s *Store) Prune(ctx context.Context, r core.Retention, batch int) (core.Pruned, error) {
	var out core.Pruned
	if batch <= 0 {
		return out, nil
	}
	t := now()
	cut := func(age time.Duration) int64 { return ms(t.Add(-age)) }
	if r.Events > 0 {
		n, err := s.pruneExec(ctx, qPruneEvents, cut(r.Events), batch)
		if err != nil {
			return out, fmt.Errorf("prune events: %w", err)
		}
		out.Events = n
	}
	if r.Comments > 0 {
		n, err := s.pruneExec(ctx, qPruneComments, cut(r.Comments), batch)
		if err != nil {
			return out, fmt.Errorf("prune comments: %w", err)
		}
		out.Comments = n
	}
	if r.FinishedJobs > 0 {
		n, err := s.pruneJobs(ctx, cut(r.FinishedJobs), batch)
		if err != nil {
			return out, fmt.Errorf("prune finished jobs: %w", err)
		}
		out.Jobs = n
	}
	if out.Total() > 0 {
		if err := s.vacuumStep(ctx); err != nil {
			return out, fmt.Errorf("prune: incremental vacuum: %w", err)
		}
	}
	return out, nil
}

func (s *Store) pruneExec(ctx context.Context, q string, cutoff int64, batch int) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, q, cutoff, batch)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// pruneJobs removes up to batch finished jobs past the cutoff with what
// belongs to them, in one transaction.
func (s *Store) pruneJobs(ctx context.Context, cutoff int64, batch int) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx *txn) error {
		n = 0
		rows, err := tx.QueryContext(ctx, qPrunableJobs, cutoff, batch)
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
		list, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		for _, table := range jobDependents {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE job_id IN (SELECT value FROM json_each(?))`, string(list)); err != nil {
				return fmt.Errorf("%s: %w", table, err)
			}
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?))`, string(list))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// vacuumStep returns up to vacuumPages free pages to the file system; a
// store made before auto_vacuum=INCREMENTAL keeps them for new rows.
func (s *Store) vacuumStep(ctx context.Context) error {
	return s.tx(ctx, func(tx *txn) error {
		_, err := tx.Tx.ExecContext(ctx, fmt.Sprintf("PRAGMA incremental_vacuum(%d)", vacuumPages))
		return err
	})
}

// autoVacuumIncremental is PRAGMA auto_vacuum's value for INCREMENTAL.
const autoVacuumIncremental = 2

// noteAutoVacuum says, once at Open, when the file was made before
// auto_vacuum=INCREMENTAL: SQLite takes the setting only while a file has
// no table, so such a store keeps the pages retention frees for new rows
// and its file does not shrink, until a VACUUM made while Baton is stopped
// converts it.
// newFileVacuum makes a store file that has no table yet hand the pages
// retention frees back to the file system in steps (auto_vacuum
// INCREMENTAL, see Prune); SQLite takes the setting only then, before the
// first table. It is set once, on the writer, and not as a pragma of every
// connection: on a file with tables that pragma waits for the write lock,
// so a connection opened while another process holds the lock would fail.
func (s *Store) newFileVacuum(ctx context.Context) error {
	conn, err := s.writer.Conn(ctx) // the pragma and the VACUUM on one connection
	if err != nil {
		return err
	}
	defer conn.Close()
	var tables int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&tables); err != nil {
		return err
	}
	if tables > 0 {
		return nil
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA auto_vacuum = INCREMENTAL`); err != nil {
		return err
	}
	// The file already has its header (the switch to WAL wrote it): the
	// setting takes with a VACUUM, instant on an empty file.
	_, err = conn.ExecContext(ctx, `VACUUM`)
	return err
}

func (s *Store) noteAutoVacuum(ctx context.Context) {
	var mode int
	if err := s.reader.DB.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil || mode == autoVacuumIncremental {
		return
	}
	s.log.InfoContext(ctx, "the store was made without auto_vacuum=INCREMENTAL: the rows retention prunes leave free pages that new rows reuse, "+
		"but the file does not shrink; to let it, stop Baton and run sqlite3 on it: PRAGMA auto_vacuum=INCREMENTAL; VACUUM;",
		"path", s.path, "auto_vacuum", mode)
}
