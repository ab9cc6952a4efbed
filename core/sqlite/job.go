package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/baton-bot/baton/core"
)

const jobCols = `id, task_id, COALESCE(parent_job_id, 0), COALESCE(retry_of, 0), piece, instruction, state,
	movement, resume_movement, movement_count, iteration, attempt, failures, question, wait_seq, lessons,
	result_summary, error, abort_requested_at, aborted_by, prompt_tokens, completion_tokens,
	created_at, started_at, finished_at, trigger_msg_id, queued_at, wait_kind`

func scanJob(r scanner) (core.Job, error) {
	var j core.Job
	var state string
	var abortAt, created, started, finished, queued int64
	err := r.Scan(&j.ID, &j.TaskID, &j.ParentJobID, &j.RetryOf, &j.Piece, &j.Instruction, &state,
		&j.Movement, &j.ResumeMovement, &j.MovementCount, &j.Iteration, &j.Attempt, &j.Failures, &j.Question,
		&j.WaitSeq, &j.Lessons, &j.ResultSummary, &j.Error, &abortAt, &j.AbortedBy, &j.PromptTokens,
		&j.CompletionTokens, &created, &started, &finished, &j.TriggerMsgID, &queued, &j.WaitKind)
	if err != nil {
		return core.Job{}, notFound(err)
	}
	j.State = core.JobState(state)
	j.AbortRequestedAt = fromMS(abortAt)
	j.CreatedAt, j.StartedAt, j.FinishedAt = fromMS(created), fromMS(started), fromMS(finished)
	j.QueuedAt = fromMS(queued)
	return j, nil
}

func jobByID(ctx context.Context, q querier, id int64) (core.Job, error) {
	return scanJob(q.QueryRowContext(ctx, qJobByID, id))
}

func addEvent(ctx context.Context, q querier, e core.JobEvent) (int64, error) {
	if e.At.IsZero() {
		e.At = now()
	}
	var id int64
	err := q.QueryRowContext(ctx, `INSERT INTO job_events (job_id, at, kind, movement, detail)
		VALUES (?, ?, ?, ?, ?) RETURNING id`, e.JobID, ms(e.At), e.Kind, e.Movement, e.Detail).Scan(&id)
	return id, constraint(err)
}

// insertJob stores j as a new queued job. Lifecycle fields (state, attempt,
// failures, wait, result, abort, timestamps) start afresh; the rest (piece,
// instruction, movement, lessons, counters) is kept, so that a retry can
// start at the failed movement with the old lessons.
func insertJob(ctx context.Context, tx *txn, j core.Job) (core.Job, error) {
	var id int64
	at := ms(now())
	err := tx.QueryRowContext(ctx, `INSERT INTO jobs (task_id, parent_job_id, retry_of, piece, instruction, state,
		movement, resume_movement, movement_count, iteration, lessons, prompt_tokens, completion_tokens, created_at,
		trigger_msg_id, queued_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		j.TaskID, nullID(j.ParentJobID), nullID(j.RetryOf), j.Piece, j.Instruction, string(core.JobQueued),
		j.Movement, j.ResumeMovement, j.MovementCount, j.Iteration, j.Lessons, j.PromptTokens, j.CompletionTokens,
		at, j.TriggerMsgID, at).Scan(&id)
	if err != nil {
		return core.Job{}, constraint(err)
	}
	if _, err := addEvent(ctx, tx, core.JobEvent{JobID: id, Kind: core.EventCreated, Detail: string(core.JobQueued)}); err != nil {
		return core.Job{}, err
	}
	return jobByID(ctx, tx, id)
}

// CreateJob stores j in state queued and returns it with its ID (see
// insertJob for which fields are kept). A missing task, parent job or
// retried job is an error wrapping core.ErrNotFound.
func (s *Store) CreateJob(ctx context.Context, j core.Job) (core.Job, error) {
	var out core.Job
	err := s.tx(ctx, func(tx *txn) error {
		var err error
		out, err = insertJob(ctx, tx, j)
		return err
	})
	if err != nil {
		return core.Job{}, fmt.Errorf("create job for task %d: %w", j.TaskID, err)
	}
	return out, nil
}

// Job returns the job with id, or an error wrapping core.ErrNotFound.
func (s *Store) Job(ctx context.Context, id int64) (core.Job, error) {
	j, err := jobByID(ctx, s.reader, id)
	if err != nil {
		return core.Job{}, fmt.Errorf("job %d: %w", id, err)
	}
	return j, nil
}

// Jobs returns the jobs matching f, newest first.
func (s *Store) Jobs(ctx context.Context, f core.JobFilter) ([]core.Job, error) {
	q, args := jobsQuery(f)
	jobs, err := s.queryJobs(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	return jobs, nil
}

// jobsQuery is the query of Jobs(f). A task's or a parent's jobs are read
// through the index on that column, pinned with INDEXED BY: with a state
// as well, a planner without statistics may walk every job in that state
// newest first instead — all the finished jobs of a year, for the previous
// answer the engine looks up at each job's start. SQLite 3.40 plans so;
// the SQLite of the driver Baton builds with picks the task's index by
// itself today.
func jobsQuery(f core.JobFilter) (string, []any) {
	var where []string
	var args []any
	if f.TaskID != 0 {
		where = append(where, "task_id = ?")
		args = append(args, f.TaskID)
	}
	if f.ParentJobID != 0 {
		where = append(where, "parent_job_id = ?")
		args = append(args, f.ParentJobID)
	}
	if len(f.States) > 0 {
		where = append(where, "state IN (?"+strings.Repeat(", ?", len(f.States)-1)+")")
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	q := `SELECT ` + jobCols + ` FROM jobs`
	switch {
	case f.TaskID != 0:
		q += " INDEXED BY jobs_task"
	case f.ParentJobID != 0:
		q += " INDEXED BY jobs_parent"
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC"
	if f.Limit > 0 {
		q += sqlLimit(f.Limit)
	}
	return q, args
}

func (s *Store) queryJobs(ctx context.Context, q string, args ...any) ([]core.Job, error) {
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

func activeJob(ctx context.Context, q querier, taskID int64) (core.Job, error) {
	return scanJob(q.QueryRowContext(ctx, qActiveJob,
		taskID, string(core.JobQueued), string(core.JobRunning), string(core.JobWaitingHuman), string(core.JobWaitingSubtasks),
		string(core.JobWaitingApproval)))
}

// ActiveJob returns the task's newest job in an active state (queued,
// running, waiting_human, waiting_subtasks, waiting_approval), or an error wrapping
// core.ErrNotFound.
func (s *Store) ActiveJob(ctx context.Context, taskID int64) (core.Job, error) {
	j, err := activeJob(ctx, s.reader, taskID)
	if err != nil {
		return core.Job{}, fmt.Errorf("active job of task %d: %w", taskID, err)
	}
	return j, nil
}

// StartJob marks the job running under attempt (see core.JobStore), in one
// transaction: a queued job with an older attempt is claimed (StartedAt set
// the first time, event "claimed"); a running job with an older attempt
// lost its lease and is taken over (a failure counted, events "lease_lost"
// and "claimed"). An attempt not above the job's is refused with
// core.ErrStale; a waiting or terminal job with a *core.TransitionError.
// notes are stored as outbox messages in the same transaction.
func (s *Store) StartJob(ctx context.Context, id, attempt int64, notes ...core.OutboxMessage) (core.Job, error) {
	var out core.Job
	err := s.tx(ctx, func(tx *txn) error {
		j, err := jobByID(ctx, tx, id)
		if err != nil {
			return err
		}
		if j.State != core.JobRunning {
			if err := core.CheckTransition(id, j.State, core.JobRunning); err != nil {
				return err
			}
		}
		if attempt <= j.Attempt {
			return fmt.Errorf("attempt %d, job is at attempt %d: %w", attempt, j.Attempt, core.ErrStale)
		}
		at := ms(now())
		failures := 0
		if j.State == core.JobRunning {
			// The running attempt lost its lease: running -> queued (a
			// failure) -> running, in one step.
			failures = 1
			if _, err := addEvent(ctx, tx, core.JobEvent{JobID: id, Kind: core.EventLeaseLost, Movement: j.Movement,
				Detail: fmt.Sprintf("attempt %d lost its lease to attempt %d", j.Attempt, attempt)}); err != nil {
				return err
			}
		}
		// A takeover was requeued by the queue, not the store: when it
		// became ready again is unknown.
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET state = ?, attempt = ?, failures = failures + ?,
			started_at = CASE WHEN started_at = 0 THEN ? ELSE started_at END,
			queued_at = CASE WHEN ? = 1 THEN 0 ELSE queued_at END
			WHERE id = ? AND attempt = ? AND state = ?`,
			string(core.JobRunning), attempt, failures, at, failures, id, j.Attempt, string(j.State))
		if err != nil {
			return err
		}
		if err := oneRow(res); err != nil {
			return err
		}
		if _, err := addEvent(ctx, tx, core.JobEvent{JobID: id, Kind: core.EventClaimed, Movement: j.Movement,
			Detail: fmt.Sprintf("attempt %d", attempt)}); err != nil {
			return err
		}
		if err := insertJobOutbox(ctx, tx, j.TaskID, id, attempt, notes); err != nil {
			return err
		}
		out, err = jobByID(ctx, tx, id)
		return err
	})
	if err != nil {
		return core.Job{}, fmt.Errorf("start job %d attempt %d: %w", id, attempt, err)
	}
	return out, nil
}

// oneRow checks that a fenced update inside a transaction hit its row; the
// transaction read the row first, so a miss means the fence was wrong.
func oneRow(res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("%d rows changed: %w", n, core.ErrStale)
	}
	return nil
}

// fence reads job id inside tx and checks that it is running under
// attempt: ErrNotFound when there is no such job, ErrStale otherwise.
func fence(ctx context.Context, tx *txn, id, attempt int64) (core.Job, error) {
	j, err := jobByID(ctx, tx, id)
	if err != nil {
		return core.Job{}, err
	}
	if j.State != core.JobRunning || j.Attempt != attempt {
		return core.Job{}, fmt.Errorf("job is %s at attempt %d: %w", j.State, j.Attempt, core.ErrStale)
	}
	return j, nil
}

// SaveProgress records a running attempt's progress (fenced), with
// p.Events in the same transaction: an error wrapping core.ErrStale when
// the job is not running under attempt, and core.ErrNotFound when there is
// no such job.
func (s *Store) SaveProgress(ctx context.Context, id, attempt int64, p core.Progress) error {
	err := s.tx(ctx, func(tx *txn) error {
		if _, err := fence(ctx, tx, id, attempt); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET movement = ?, movement_count = ?, iteration = ?, lessons = ?,
			prompt_tokens = ?, completion_tokens = ?
			WHERE id = ? AND attempt = ? AND state = ?`,
			p.Movement, p.MovementCount, p.Iteration, p.Lessons, p.PromptTokens, p.CompletionTokens,
			id, attempt, string(core.JobRunning))
		if err != nil {
			return err
		}
		if err := oneRow(res); err != nil {
			return err
		}
		for _, e := range p.Events {
			e.JobID = id
			if _, err := addEvent(ctx, tx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save progress of job %d attempt %d: %w", id, attempt, err)
	}
	return nil
}

// FinishJob ends a running attempt as f says (fenced; see core.JobStore),
// in one transaction with f's children, comments and outbox messages and
// an event ("finished", "requeued" or "parked", the new state in its
// detail). Children are allowed only with To == waiting_subtasks; they are
// created queued with ParentJobID = id. Comments and messages without a
// TaskID go to the job's task; messages get the next Seq of their task,
// the job's id when they have none, and attempt. Any failure writes
// nothing. The errors: core.ErrNotFound (no such job), core.ErrStale (not
// running under attempt), *core.TransitionError (To not reachable from
// running).
func (s *Store) FinishJob(ctx context.Context, id, attempt int64, f core.Finish) (core.Job, error) {
	if len(f.Children) > 0 && f.To != core.JobWaitingSubtasks {
		return core.Job{}, fmt.Errorf("finish job %d attempt %d: children given with %s (only with %s)",
			id, attempt, f.To, core.JobWaitingSubtasks)
	}
	if (f.Approval != nil) != (f.To == core.JobWaitingApproval) {
		return core.Job{}, fmt.Errorf("finish job %d attempt %d as %s: an approval goes with %s, and only with it",
			id, attempt, f.To, core.JobWaitingApproval)
	}
	var out core.Job
	err := s.tx(ctx, func(tx *txn) error {
		j, err := fence(ctx, tx, id, attempt)
		if err != nil {
			return err
		}
		if err := core.CheckTransition(id, j.State, f.To); err != nil {
			return err
		}
		// Once an abort is requested, the run may only end aborted (or be
		// handed back to the queue): no result of an aborted run lands.
		if !j.AbortRequestedAt.IsZero() && f.To != core.JobAborted && f.To != core.JobQueued {
			return fmt.Errorf("job %d: %w", id, core.ErrAborted)
		}
		set := []string{"state = ?", "result_summary = ?", "error = ?"}
		args := []any{string(f.To), f.ResultSummary, f.Error}
		kind := core.EventFinished
		switch f.To {
		case core.JobSucceeded, core.JobFailed, core.JobAborted:
			set = append(set, "finished_at = ?")
			args = append(args, ms(now()))
			if f.To == core.JobAborted && f.AbortedBy != "" {
				set = append(set, "aborted_by = ?")
				args = append(args, f.AbortedBy)
			}
		case core.JobWaitingHuman, core.JobWaitingSubtasks, core.JobWaitingApproval:
			kind = core.EventParked
			set = append(set, "wait_seq = wait_seq + 1", "question = ?", "resume_movement = ?", "wait_kind = ?")
			args = append(args, f.Question, f.ResumeMovement, f.WaitKind)
		case core.JobQueued:
			kind = core.EventRequeued
			set = append(set, "queued_at = ?")
			args = append(args, ms(now()))
			if f.CountFailure {
				set = append(set, "failures = failures + 1")
			}
		}
		args = append(args, id, attempt, string(core.JobRunning))
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET `+strings.Join(set, ", ")+`
			WHERE id = ? AND attempt = ? AND state = ?`, args...)
		if err != nil {
			return err
		}
		if err := oneRow(res); err != nil {
			return err
		}
		if f.Approval != nil {
			if err := insertApproval(ctx, tx, j, j.WaitSeq+1, *f.Approval); err != nil {
				return fmt.Errorf("approval: %w", err)
			}
			if err := saveCheckpoint(ctx, tx, id, j.WaitSeq+1, f.Checkpoint); err != nil {
				return fmt.Errorf("checkpoint: %w", err)
			}
			if _, err := addEvent(ctx, tx, core.JobEvent{JobID: id, Kind: core.EventApprovalAsked, Movement: f.ResumeMovement,
				Detail: f.Approval.Tool + " " + clip(f.Approval.Subject, 300) + " (" + f.Approval.Rule + ")"}); err != nil {
				return err
			}
		} else if f.To == core.JobWaitingHuman && f.Checkpoint != "" {
			if err := saveCheckpoint(ctx, tx, id, j.WaitSeq+1, f.Checkpoint); err != nil {
				return fmt.Errorf("checkpoint: %w", err)
			}
		} else if _, err := tx.ExecContext(ctx, `DELETE FROM job_checkpoints WHERE job_id = ?`, id); err != nil {
			return err
		}
		for i, c := range f.Children {
			c.ParentJobID = id
			if _, err := insertJob(ctx, tx, c); err != nil {
				return fmt.Errorf("child %d (task %d): %w", i, c.TaskID, err)
			}
		}
		for i, c := range f.Comments {
			if c.TaskID == 0 {
				c.TaskID = j.TaskID
			}
			if _, err := insertComment(ctx, tx, c); err != nil {
				return fmt.Errorf("comment %d: %w", i, err)
			}
		}
		if err := insertJobOutbox(ctx, tx, j.TaskID, id, attempt, f.Outbox); err != nil {
			return err
		}
		detail := string(f.To)
		if f.Error != "" {
			detail += ": " + f.Error
		}
		if _, err := addEvent(ctx, tx, core.JobEvent{JobID: id, Kind: kind, Movement: j.Movement, Detail: detail}); err != nil {
			return err
		}
		out, err = jobByID(ctx, tx, id)
		return err
	})
	if err != nil {
		return core.Job{}, fmt.Errorf("finish job %d attempt %d as %s: %w", id, attempt, f.To, err)
	}
	return out, nil
}

// FailJob fails a queued or running job outside any attempt, the queue
// having declared it dead (see core.JobStore). A queued job goes through
// running (queued -> running -> failed, both steps in its events) so that
// the transition table holds. A terminal job is returned unchanged; a
// waiting job is refused with a *core.TransitionError.
func (s *Store) FailJob(ctx context.Context, id int64, reason string) (core.Job, error) {
	var out core.Job
	err := s.tx(ctx, func(tx *txn) error {
		j, err := jobByID(ctx, tx, id)
		if err != nil {
			return err
		}
		out = j
		if j.State.Terminal() {
			return nil
		}
		if j.State == core.JobQueued {
			if err := core.CheckTransition(id, j.State, core.JobRunning); err != nil {
				return err
			}
			if _, err := addEvent(ctx, tx, core.JobEvent{JobID: id, Kind: core.EventClaimed, Movement: j.Movement,
				Detail: "queued -> running, only to fail it: the queue declared it dead"}); err != nil {
				return err
			}
			j.State = core.JobRunning
		}
		if err := core.CheckTransition(id, j.State, core.JobFailed); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET state = ?, error = ?, finished_at = ?
			WHERE id = ? AND state = ?`, string(core.JobFailed), reason, ms(now()), id, string(out.State))
		if err != nil {
			return err
		}
		if err := oneRow(res); err != nil {
			return err
		}
		if _, err := addEvent(ctx, tx, core.JobEvent{JobID: id, Kind: core.EventFinished, Movement: j.Movement,
			Detail: string(core.JobFailed) + ": " + reason}); err != nil {
			return err
		}
		out, err = jobByID(ctx, tx, id)
		return err
	})
	if err != nil {
		return core.Job{}, fmt.Errorf("fail job %d: %w", id, err)
	}
	return out, nil
}

// ResumeJob requeues a job waiting (waiting_human or waiting_subtasks)
// under waitSeq, with the event "resumed". It reports false, changing
// nothing, when the job is not waiting under waitSeq; a job that does not
// exist is an error wrapping core.ErrNotFound.
func (s *Store) ResumeJob(ctx context.Context, id, waitSeq int64) (bool, error) {
	var resumed bool
	err := s.tx(ctx, func(tx *txn) error {
		resumed = false
		j, err := jobByID(ctx, tx, id)
		if err != nil {
			return err
		}
		if (j.State != core.JobWaitingHuman && j.State != core.JobWaitingSubtasks) || j.WaitSeq != waitSeq {
			return nil
		}
		if err := core.CheckTransition(id, j.State, core.JobQueued); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET state = ?, queued_at = ? WHERE id = ? AND state = ? AND wait_seq = ?`,
			string(core.JobQueued), ms(now()), id, string(j.State), waitSeq)
		if err != nil {
			return err
		}
		if err := oneRow(res); err != nil {
			return err
		}
		if _, err := addEvent(ctx, tx, core.JobEvent{JobID: id, Kind: core.EventResumed, Movement: j.ResumeMovement,
			Detail: fmt.Sprintf("%s -> queued (wait %d)", j.State, waitSeq)}); err != nil {
			return err
		}
		resumed = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("resume job %d wait %d: %w", id, waitSeq, err)
	}
	return resumed, nil
}

// RequestAbort records an abort by who (see core.JobStore). The first
// request sets AbortRequestedAt and AbortedBy; later ones keep them. A
// queued or waiting job becomes aborted at once (FinishedAt set, events
// "abort_requested" and "finished"); a running job keeps running (event
// "abort_requested"); a terminal job is returned unchanged. Children are
// not touched: aborting them is the caller's business.
func (s *Store) RequestAbort(ctx context.Context, id int64, by string) (core.Job, error) {
	var out core.Job
	err := s.tx(ctx, func(tx *txn) error {
		j, err := jobByID(ctx, tx, id)
		if err != nil {
			return err
		}
		out = j
		if j.State.Terminal() {
			return nil
		}
		at := ms(now())
		set := []string{"abort_requested_at = CASE WHEN abort_requested_at = 0 THEN ? ELSE abort_requested_at END",
			"aborted_by = CASE WHEN aborted_by = '' THEN ? ELSE aborted_by END"}
		args := []any{at, by}
		detail := "by " + by
		if j.State != core.JobRunning {
			if err := core.CheckTransition(id, j.State, core.JobAborted); err != nil {
				return err
			}
			set = append(set, "state = ?", "finished_at = ?")
			args = append(args, string(core.JobAborted), at)
			detail += fmt.Sprintf("; %s -> %s", j.State, core.JobAborted)
		}
		args = append(args, id, string(j.State))
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET `+strings.Join(set, ", ")+` WHERE id = ? AND state = ?`, args...)
		if err != nil {
			return err
		}
		if err := oneRow(res); err != nil {
			return err
		}
		if _, err := addEvent(ctx, tx, core.JobEvent{JobID: id, Kind: core.EventAbortAsk, Movement: j.Movement, Detail: detail}); err != nil {
			return err
		}
		if j.State != core.JobRunning {
			if _, err := addEvent(ctx, tx, core.JobEvent{JobID: id, Kind: core.EventFinished, Movement: j.Movement,
				Detail: string(core.JobAborted)}); err != nil {
				return err
			}
		}
		if j.State == core.JobWaitingApproval {
			// Nobody may decide for an aborted job: its approval is denied.
			if _, err := tx.ExecContext(ctx, `UPDATE approvals SET state = ?, decided_by = ?, reason = 'aborted', decided_at = ?
				WHERE job_id = ? AND state = ?`, string(core.ApprovalDenied), by, at, id, string(core.ApprovalPending)); err != nil {
				return err
			}
		}
		out, err = jobByID(ctx, tx, id)
		return err
	})
	if err != nil {
		return core.Job{}, fmt.Errorf("request abort of job %d: %w", id, err)
	}
	return out, nil
}

// AddEvent appends e to its job's history; e.At defaults to now. A
// missing job is an error wrapping core.ErrNotFound; with e.Attempt set, a
// job not running under it one wrapping core.ErrStale.
func (s *Store) AddEvent(ctx context.Context, e core.JobEvent) error {
	err := s.tx(ctx, func(tx *txn) error {
		if e.Attempt != 0 {
			if _, err := fence(ctx, tx, e.JobID, e.Attempt); err != nil {
				return err
			}
		}
		_, err := addEvent(ctx, tx, e)
		return err
	})
	if err != nil {
		return fmt.Errorf("add event %q to job %d: %w", e.Kind, e.JobID, err)
	}
	return nil
}

// Events returns a job's history, oldest first (empty for an unknown job).
func (s *Store) Events(ctx context.Context, jobID int64) ([]core.JobEvent, error) {
	rows, err := s.reader.QueryContext(ctx, qJobEvents, jobID)
	if err != nil {
		return nil, fmt.Errorf("events of job %d: %w", jobID, err)
	}
	defer rows.Close()
	var out []core.JobEvent
	for rows.Next() {
		var e core.JobEvent
		var at int64
		if err := rows.Scan(&e.ID, &e.JobID, &at, &e.Kind, &e.Movement, &e.Detail); err != nil {
			return nil, fmt.Errorf("events of job %d: %w", jobID, err)
		}
		e.At = fromMS(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events of job %d: %w", jobID, err)
	}
	return out, nil
}

// CountJobs returns how many jobs are in each state; every state in
// core.JobStates is present, with 0 when it has none.
func (s *Store) CountJobs(ctx context.Context) (map[core.JobState]int64, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT state, COUNT(*) FROM jobs GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	out := make(map[core.JobState]int64, len(core.JobStates))
	for _, st := range core.JobStates {
		out[st] = 0
	}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		out[core.JobState(st)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return out, nil
}

// insertJobOutbox writes msgs for attempt of job id of task taskID,
// filling in the task and job where a message names none.
func insertJobOutbox(ctx context.Context, tx *txn, taskID, id, attempt int64, msgs []core.OutboxMessage) error {
	for i, m := range msgs {
		if m.TaskID == 0 {
			m.TaskID = taskID
		}
		if m.JobID == 0 {
			m.JobID = id
		}
		m.Attempt = attempt
		if _, err := insertOutbox(ctx, tx, m); err != nil {
			return fmt.Errorf("outbox message %d: %w", i, err)
		}
	}
	return nil
}

// clip cuts s to n bytes at a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
