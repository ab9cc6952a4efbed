package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/jackc/pgx/v5"
)

const approvalCols = `id, job_id, task_id, wait_seq, tool, arguments, call_id, subject, preview, channel,
	requester, rule, state, decided_by, reason, created_at, deadline, decided_at`

func scanApproval(r scanner) (core.Approval, error) {
	var a core.Approval
	var state string
	var created, deadline, decided int64
	err := r.Scan(&a.ID, &a.JobID, &a.TaskID, &a.WaitSeq, &a.Tool, &a.Arguments, &a.CallID, &a.Subject, &a.Preview,
		&a.Channel, &a.Requester, &a.Rule, &state, &a.DecidedBy, &a.Reason, &created, &deadline, &decided)
	if err != nil {
		return core.Approval{}, notFound(err)
	}
	a.State = core.ApprovalState(state)
	a.CreatedAt, a.Deadline, a.DecidedAt = fromMS(created), fromMS(deadline), fromMS(decided)
	return a, nil
}

// insertApproval stores a as the pending approval of job j's wait waitSeq.
func insertApproval(ctx context.Context, tx db, j core.Job, waitSeq int64, a core.Approval) error {
	created := a.CreatedAt
	if created.IsZero() {
		created = now()
	}
	_, err := tx.exec(ctx, `INSERT INTO approvals (job_id, task_id, wait_seq, tool, arguments, call_id, subject,
		preview, channel, requester, rule, state, created_at, deadline)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		j.ID, j.TaskID, waitSeq, a.Tool, a.Arguments, a.CallID, a.Subject, a.Preview, a.Channel, a.Requester, a.Rule,
		string(core.ApprovalPending), ms(created), ms(a.Deadline))
	return constraint(err)
}

// Approval implements core.ApprovalStore.
func (s *Store) Approval(ctx context.Context, jobID, waitSeq int64) (core.Approval, error) {
	a, err := scanApproval(s.read().row(ctx, `SELECT `+approvalCols+` FROM approvals
		WHERE job_id = $1 AND wait_seq = $2`, jobID, waitSeq))
	if err != nil {
		return core.Approval{}, fmt.Errorf("approval %s: %w", core.ApprovalKey(jobID, waitSeq), err)
	}
	return a, nil
}

// ApprovalByID implements core.ApprovalStore.
func (s *Store) ApprovalByID(ctx context.Context, id int64) (core.Approval, error) {
	a, err := scanApproval(s.read().row(ctx, `SELECT `+approvalCols+` FROM approvals WHERE id = $1`, id))
	if err != nil {
		return core.Approval{}, fmt.Errorf("approval %d: %w", id, err)
	}
	return a, nil
}

func (s *Store) queryApprovals(ctx context.Context, q string, args ...any) ([]core.Approval, error) {
	rows, err := s.read().query(ctx, `SELECT `+approvalCols+` FROM approvals `+q, args...)
	return collect(rows, err, scanApproval)
}

// PendingApprovals implements core.ApprovalStore.
func (s *Store) PendingApprovals(ctx context.Context, taskID int64) ([]core.Approval, error) {
	q, args := `WHERE state = $1 ORDER BY id`, []any{string(core.ApprovalPending)}
	if taskID != 0 {
		q, args = `WHERE state = $1 AND task_id = $2 ORDER BY id`, append(args, taskID)
	}
	out, err := s.queryApprovals(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("pending approvals of task %d: %w", taskID, err)
	}
	return out, nil
}

// ExpiredApprovals implements core.ApprovalStore. A negative limit means
// no limit.
func (s *Store) ExpiredApprovals(ctx context.Context, at time.Time, limit int) ([]core.Approval, error) {
	var lim any // NULL: LIMIT ALL
	if limit >= 0 {
		lim = limit
	}
	out, err := s.queryApprovals(ctx, `WHERE state = $1 AND deadline < $2 ORDER BY deadline, id LIMIT $3`,
		string(core.ApprovalPending), ms(at), lim)
	if err != nil {
		return nil, fmt.Errorf("expired approvals: %w", err)
	}
	return out, nil
}

// DecideApproval implements core.ApprovalStore. It holds the job's row
// (see lockJob) while it decides, as every other change of the job and of
// its approvals does, so that of concurrent decisions exactly one passes
// and the others fail with core.ErrDecided.
func (s *Store) DecideApproval(ctx context.Context, d core.ApprovalDecision) (core.Approval, core.Job, error) {
	state := core.ApprovalApproved
	if d.Verdict == core.VerdictDeny {
		state = core.ApprovalDenied
	}
	at := d.At
	if at.IsZero() {
		at = now()
	}
	var a core.Approval
	var j core.Job
	err := s.tx(ctx, func(tx db) error {
		var err error
		if j, err = lockJob(ctx, tx, d.JobID); err != nil {
			return err // no job: no approval either
		}
		a, err = scanApproval(tx.row(ctx, `SELECT `+approvalCols+` FROM approvals WHERE job_id = $1 AND wait_seq = $2`,
			d.JobID, d.WaitSeq))
		if err != nil {
			return err
		}
		if a.State != core.ApprovalPending {
			return fmt.Errorf("%s by %s: %w", a.State, a.DecidedBy, core.ErrDecided)
		}
		if j.State != core.JobWaitingApproval || j.WaitSeq != d.WaitSeq {
			return fmt.Errorf("job %d is %s (wait %d): %w", j.ID, j.State, j.WaitSeq, core.ErrDecided)
		}
		a, err = scanApproval(tx.row(ctx, `UPDATE approvals SET state = $1, decided_by = $2, reason = $3, decided_at = $4
			WHERE id = $5 AND state = $6 RETURNING `+approvalCols, string(state), d.By, d.Reason, ms(at), a.ID, string(core.ApprovalPending)))
		if err != nil {
			return err
		}
		n, err := tx.exec(ctx, `UPDATE jobs SET state = $1, queued_at = $2 WHERE id = $3 AND state = $4 AND wait_seq = $5`,
			string(core.JobQueued), ms(at), j.ID, string(core.JobWaitingApproval), d.WaitSeq)
		if err != nil {
			return err
		}
		if err := oneRow(n); err != nil {
			return err
		}
		if r := d.Rule; r != nil {
			if _, err := tx.exec(ctx, `INSERT INTO allow_rules (channel, tool, pattern, created_by, created_at)
				VALUES ($1, $2, $3, $4, $5)`, r.Channel, r.Tool, r.Pattern, r.CreatedBy, ms(at)); err != nil {
				return err
			}
		}
		for i, m := range d.Outbox {
			if m.TaskID == 0 {
				m.TaskID = j.TaskID
			}
			if _, err := insertOutbox(ctx, tx, m); err != nil {
				return fmt.Errorf("outbox message %d: %w", i, err)
			}
		}
		detail := fmt.Sprintf("%s %s by %s", a.Tool, d.Verdict, d.By)
		if d.Reason != "" {
			detail += ": " + d.Reason
		}
		if _, err := addEvent(ctx, tx, core.JobEvent{JobID: j.ID, At: at, Kind: core.EventApprovalDecided, Movement: j.ResumeMovement, Detail: detail}); err != nil {
			return err
		}
		if _, err := addEvent(ctx, tx, core.JobEvent{JobID: j.ID, At: at, Kind: core.EventResumed, Movement: j.ResumeMovement,
			Detail: fmt.Sprintf("%s -> queued (wait %d)", core.JobWaitingApproval, d.WaitSeq)}); err != nil {
			return err
		}
		j, err = jobByID(ctx, tx, j.ID)
		return err
	})
	if err != nil {
		return core.Approval{}, core.Job{}, fmt.Errorf("decide approval %s: %w", core.ApprovalKey(d.JobID, d.WaitSeq), err)
	}
	return a, j, nil
}

// AllowRules implements core.ApprovalStore.
func (s *Store) AllowRules(ctx context.Context, channel string) ([]core.AllowRule, error) {
	rows, err := s.read().query(ctx, `SELECT id, channel, tool, pattern, created_by, created_at FROM allow_rules
		WHERE channel = $1 ORDER BY id`, channel)
	out, err := collect(rows, err, func(r scanner) (core.AllowRule, error) {
		var a core.AllowRule
		var created int64
		err := r.Scan(&a.ID, &a.Channel, &a.Tool, &a.Pattern, &a.CreatedBy, &created)
		a.CreatedAt = fromMS(created)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("allow rules of %s: %w", channel, err)
	}
	return out, nil
}

// RevokeAllowRule implements core.ApprovalStore: a rule that channel
// does not have is an error wrapping core.ErrNotFound.
func (s *Store) RevokeAllowRule(ctx context.Context, channel string, id int64) error {
	err := s.tx(ctx, func(tx db) error {
		n, err := tx.exec(ctx, `DELETE FROM allow_rules WHERE id = $1 AND channel = $2`, id, channel)
		if err == nil && n == 0 {
			err = core.ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("revoke allow rule %d of %s: %w", id, channel, err)
	}
	return nil
}

// TakeCheckpoint implements core.ApprovalStore.
func (s *Store) TakeCheckpoint(ctx context.Context, jobID, attempt int64) (string, error) {
	var data []byte
	err := s.tx(ctx, func(tx db) error {
		data = nil
		if _, err := fence(ctx, tx, jobID, attempt); err != nil {
			return err
		}
		err := tx.row(ctx, `DELETE FROM job_checkpoints WHERE job_id = $1 RETURNING data`, jobID).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("take checkpoint of job %d attempt %d: %w", jobID, attempt, err)
	}
	return string(data), nil
}

// saveCheckpoint stores data as what job id's wait waitSeq resumes from,
// replacing an earlier one.
func saveCheckpoint(ctx context.Context, tx db, id, waitSeq int64, data string) error {
	_, err := tx.exec(ctx, `INSERT INTO job_checkpoints (job_id, wait_seq, data) VALUES ($1, $2, $3)
		ON CONFLICT (job_id) DO UPDATE SET wait_seq = excluded.wait_seq, data = excluded.data`, id, waitSeq, []byte(data))
	return err
}
