package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/baton-bot/baton/core"
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
func insertApproval(ctx context.Context, tx *txn, j core.Job, waitSeq int64, a core.Approval) error {
	created := a.CreatedAt
	if created.IsZero() {
		created = now()
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO approvals (job_id, task_id, wait_seq, tool, arguments, call_id, subject,
		preview, channel, requester, rule, state, created_at, deadline) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		j.ID, j.TaskID, waitSeq, a.Tool, a.Arguments, a.CallID, a.Subject, a.Preview, a.Channel, a.Requester, a.Rule,
		string(core.ApprovalPending), ms(created), ms(a.Deadline))
	return constraint(err)
}

// Approval implements core.ApprovalStore.
func (s *Store) Approval(ctx context.Context, jobID, waitSeq int64) (core.Approval, error) {
	a, err := scanApproval(s.reader.QueryRowContext(ctx, `SELECT `+approvalCols+` FROM approvals
		WHERE job_id = ? AND wait_seq = ?`, jobID, waitSeq))
	if err != nil {
		return core.Approval{}, fmt.Errorf("approval %s: %w", core.ApprovalKey(jobID, waitSeq), err)
	}
	return a, nil
}

// ApprovalByID implements core.ApprovalStore.
func (s *Store) ApprovalByID(ctx context.Context, id int64) (core.Approval, error) {
	a, err := scanApproval(s.reader.QueryRowContext(ctx, `SELECT `+approvalCols+` FROM approvals WHERE id = ?`, id))
	if err != nil {
		return core.Approval{}, fmt.Errorf("approval %d: %w", id, err)
	}
	return a, nil
}

func (s *Store) queryApprovals(ctx context.Context, q string, args ...any) ([]core.Approval, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+approvalCols+` FROM approvals `+q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// PendingApprovals implements core.ApprovalStore.
func (s *Store) PendingApprovals(ctx context.Context, taskID int64) ([]core.Approval, error) {
	q, args := `WHERE state = ? ORDER BY id`, []any{string(core.ApprovalPending)}
	if taskID != 0 {
		q, args = `WHERE state = ? AND task_id = ? ORDER BY id`, append(args, taskID)
	}
	out, err := s.queryApprovals(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("pending approvals of task %d: %w", taskID, err)
	}
	return out, nil
}

// ExpiredApprovals implements core.ApprovalStore.
func (s *Store) ExpiredApprovals(ctx context.Context, at time.Time, limit int) ([]core.Approval, error) {
	out, err := s.queryApprovals(ctx, `WHERE state = ? AND deadline < ? ORDER BY deadline, id LIMIT ?`,
		string(core.ApprovalPending), ms(at), limit)
	if err != nil {
		return nil, fmt.Errorf("expired approvals: %w", err)
	}
	return out, nil
}

// DecideApproval implements core.ApprovalStore.
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
	err := s.tx(ctx, func(tx *txn) error {
		var err error
		a, err = scanApproval(tx.QueryRowContext(ctx, `SELECT `+approvalCols+` FROM approvals WHERE job_id = ? AND wait_seq = ?`,
			d.JobID, d.WaitSeq))
		if err != nil {
			return err
		}
		if a.State != core.ApprovalPending {
			return fmt.Errorf("%s by %s: %w", a.State, a.DecidedBy, core.ErrDecided)
		}
		if j, err = jobByID(ctx, tx, d.JobID); err != nil {
			return err
		}
		if j.State != core.JobWaitingApproval || j.WaitSeq != d.WaitSeq {
			return fmt.Errorf("job %d is %s (wait %d): %w", j.ID, j.State, j.WaitSeq, core.ErrDecided)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE approvals SET state = ?, decided_by = ?, reason = ?, decided_at = ?
			WHERE id = ? AND state = ?`, string(state), d.By, d.Reason, ms(at), a.ID, string(core.ApprovalPending)); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET state = ?, queued_at = ? WHERE id = ? AND state = ? AND wait_seq = ?`,
			string(core.JobQueued), ms(at), j.ID, string(core.JobWaitingApproval), d.WaitSeq)
		if err != nil {
			return err
		}
		if err := oneRow(res); err != nil {
			return err
		}
		if r := d.Rule; r != nil {
			if _, err := tx.ExecContext(ctx, `INSERT INTO allow_rules (channel, tool, pattern, created_by, created_at)
				VALUES (?, ?, ?, ?, ?)`, r.Channel, r.Tool, r.Pattern, r.CreatedBy, ms(at)); err != nil {
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
		a.State, a.DecidedBy, a.Reason, a.DecidedAt = state, d.By, d.Reason, fromMS(ms(at))
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
	rows, err := s.reader.QueryContext(ctx, `SELECT id, channel, tool, pattern, created_by, created_at FROM allow_rules
		WHERE channel = ? ORDER BY id`, channel)
	if err != nil {
		return nil, fmt.Errorf("allow rules of %s: %w", channel, err)
	}
	defer rows.Close()
	var out []core.AllowRule
	for rows.Next() {
		var r core.AllowRule
		var created int64
		if err := rows.Scan(&r.ID, &r.Channel, &r.Tool, &r.Pattern, &r.CreatedBy, &created); err != nil {
			return nil, fmt.Errorf("allow rules of %s: %w", channel, err)
		}
		r.CreatedAt = fromMS(created)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("allow rules of %s: %w", channel, err)
	}
	return out, nil
}

// RevokeAllowRule implements core.ApprovalStore.
func (s *Store) RevokeAllowRule(ctx context.Context, channel string, id int64) error {
	err := s.tx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM allow_rules WHERE id = ? AND channel = ?`, id, channel)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return core.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("revoke allow rule %d of %s: %w", id, channel, err)
	}
	return nil
}

// TakeCheckpoint implements core.ApprovalStore.
func (s *Store) TakeCheckpoint(ctx context.Context, jobID, attempt int64) (string, error) {
	var data string
	err := s.tx(ctx, func(tx *txn) error {
		data = ""
		if _, err := fence(ctx, tx, jobID, attempt); err != nil {
			return err
		}
		err := tx.QueryRowContext(ctx, `DELETE FROM job_checkpoints WHERE job_id = ? RETURNING data`, jobID).Scan(&data)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("take checkpoint of job %d attempt %d: %w", jobID, attempt, err)
	}
	return data, nil
}

// saveCheckpoint stores data as what job id's wait waitSeq resumes from,
// replacing an earlier one.
func saveCheckpoint(ctx context.Context, tx *txn, id, waitSeq int64, data string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO job_checkpoints (job_id, wait_seq, data) VALUES (?, ?, ?)
		ON CONFLICT (job_id) DO UPDATE SET wait_seq = excluded.wait_seq, data = excluded.data`, id, waitSeq, data)
	return err
}
