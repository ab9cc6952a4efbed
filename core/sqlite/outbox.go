package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baton-bot/baton/core"
)

const outboxCols = `o.id, o.task_id, COALESCE(o.job_id, 0), o.attempt, o.seq, o.kind, o.payload, o.state, o.tries,
	o.next_try_at, o.last_error, o.platform_msg_id, o.created_at, o.ref, o.claims`

// returningOutbox are outboxCols for a RETURNING clause, which names the
// columns of the table it changes unqualified.
var returningOutbox = strings.ReplaceAll(outboxCols, "o.", "")

func scanOutbox(r scanner) (core.OutboxMessage, error) {
	var m core.OutboxMessage
	var kind, state string
	var next, created int64
	err := r.Scan(&m.ID, &m.TaskID, &m.JobID, &m.Attempt, &m.Seq, &kind, &m.Payload, &state, &m.Tries,
		&next, &m.LastError, &m.PlatformMsgID, &created, &m.Ref, &m.Claims)
	if err != nil {
		return core.OutboxMessage{}, notFound(err)
	}
	m.Kind, m.State = core.OutboxKind(kind), core.OutboxState(state)
	m.NextTryAt, m.CreatedAt = fromMS(next), fromMS(created)
	return m, nil
}

// insertOutbox stores m as a pending message with the next Seq of its
// task. The write lock held by the transaction makes max(seq)+1 safe.
func insertOutbox(ctx context.Context, tx *txn, m core.OutboxMessage) (int64, error) {
	var seq int64
	if err := tx.QueryRowContext(ctx, qOutboxNextSeq, m.TaskID).Scan(&seq); err != nil {
		return 0, err
	}
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO outbox (task_id, job_id, attempt, seq, kind, payload, state, tries,
		next_try_at, last_error, platform_msg_id, created_at, ref)
		VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, '', '', ?, ?) RETURNING id`,
		m.TaskID, nullID(m.JobID), m.Attempt, seq, string(m.Kind), m.Payload, string(core.OutboxPending),
		ms(m.NextTryAt), ms(now()), m.Ref).Scan(&id)
	if err != nil {
		return 0, constraint(err)
	}
	return id, nil
}

// AddOutbox stores msgs as pending, in one transaction, each with the next
// Seq of its task. ID, Seq, State, Tries, LastError, PlatformMsgID and
// CreatedAt are the store's; a zero NextTryAt means due at once. A missing
// task or job is an error wrapping core.ErrNotFound, and then none is
// stored.
func (s *Store) AddOutbox(ctx context.Context, msgs ...core.OutboxMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	err := s.tx(ctx, func(tx *txn) error {
		for i, m := range msgs {
			if _, err := insertOutbox(ctx, tx, m); err != nil {
				return fmt.Errorf("message %d (task %d): %w", i, m.TaskID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("add outbox: %w", err)
	}
	return nil
}

// DueOutbox returns up to limit pending messages of tasks on platform whose
// NextTryAt is not after now, in (task, seq) order, at most one per task:
// the task's first pending message, and none when that one is not due yet,
// so that a thread's order holds. limit <= 0 means no limit.
func (s *Store) DueOutbox(ctx context.Context, platform core.Platform, now time.Time, limit int) ([]core.OutboxMessage, error) {
	q := `SELECT ` + outboxCols + ` FROM outbox o JOIN tasks t ON t.id = o.task_id
		WHERE t.platform = ? AND o.state = ? AND o.next_try_at <= ?
		  AND o.seq = (SELECT MIN(p.seq) FROM outbox p WHERE p.task_id = o.task_id AND p.state = ?)
		ORDER BY o.task_id, o.seq`
	args := []any{string(platform), string(core.OutboxPending), ms(now), string(core.OutboxPending)}
	if limit > 0 {
		q += sqlLimit(limit)
	}
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("due outbox for %s: %w", platform, err)
	}
	defer rows.Close()
	var out []core.OutboxMessage
	for rows.Next() {
		m, err := scanOutbox(rows)
		if err != nil {
			return nil, fmt.Errorf("due outbox for %s: %w", platform, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("due outbox for %s: %w", platform, err)
	}
	return out, nil
}

// dueOutbox selects the due messages of a platform (argument 1) at an
// instant (argument 2, unix ms) of the tasks past the one numbered by the
// parameter after (its placeholder): each task's first pending message,
// when its next try is due and it is not under a claim that lasts past the
// instant, in (task, seq) order.
func dueOutbox(after string) string {
	return `SELECT o.id FROM outbox o JOIN tasks t ON t.id = o.task_id
	WHERE t.platform = ?1 AND o.state = 'pending' AND o.task_id > ` + after + `
	  AND o.next_try_at <= ?2 AND o.claimed_until <= ?2
	  AND o.seq = (SELECT MIN(p.seq) FROM outbox p WHERE p.task_id = o.task_id AND p.state = 'pending')
	ORDER BY o.task_id, o.seq`
}

// ClaimOutbox implements core.OutboxStore. The claim is one write
// transaction: the store's single writer orders it with every other, so
// concurrent claims (of this process or another sharing the file) never
// take one message twice. When nothing is claimable a read answers, and
// the writer is spared a transaction: deliverers poll often and mostly
// find nothing.
func (s *Store) ClaimOutbox(ctx context.Context, platform core.Platform, owner string, now time.Time, lease time.Duration, limit int, afterTask int64) ([]core.OutboxMessage, error) {
	if limit <= 0 {
		return nil, nil
	}
	var any int
	err := s.reader.QueryRowContext(ctx, qOutboxDue, string(platform), ms(now), afterTask).Scan(&any)
	if err != nil {
		return nil, fmt.Errorf("claim %s outbox: %w", platform, err)
	}
	if any == 0 {
		return nil, nil
	}
	var out []core.OutboxMessage
	err = s.tx(ctx, func(tx *txn) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, qOutboxClaim, string(platform), ms(now), owner, ms(now.Add(lease)), limit, afterTask)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			m, err := scanOutbox(rows)
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("claim %s outbox: %w", platform, err)
	}
	// RETURNING gives no order.
	slices.SortFunc(out, func(a, b core.OutboxMessage) int {
		return cmp.Or(cmp.Compare(a.TaskID, b.TaskID), cmp.Compare(a.Seq, b.Seq))
	})
	return out, nil
}

// ReleaseOutbox implements core.OutboxStore.
func (s *Store) ReleaseOutbox(ctx context.Context, owner string, untried bool, ids ...int64) error {
	if len(ids) == 0 {
		return nil
	}
	uncount := 0
	if untried {
		uncount = 1
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("release %d outbox messages: %w", len(ids), err)
	}
	// One statement whatever the number of ids: the ids travel as a JSON
	// array.
	err = s.tx(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, qOutboxRelease, owner, uncount, string(list))
		return err
	})
	if err != nil {
		return fmt.Errorf("release %d outbox messages: %w", len(ids), err)
	}
	return nil
}

// Outbox returns the message with id, or an error wrapping core.ErrNotFound.
func (s *Store) Outbox(ctx context.Context, id int64) (core.OutboxMessage, error) {
	m, err := scanOutbox(s.reader.QueryRowContext(ctx, `SELECT `+outboxCols+` FROM outbox o WHERE o.id = ?`, id))
	if err != nil {
		return core.OutboxMessage{}, fmt.Errorf("outbox message %d: %w", id, err)
	}
	return m, nil
}

// updateOutbox runs one UPDATE on message id; no such message is an error
// wrapping core.ErrNotFound.
func (s *Store) updateOutbox(ctx context.Context, op string, id int64, query string, args ...any) error {
	err := s.tx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, query, append(args, id)...)
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
		return fmt.Errorf("%s outbox message %d: %w", op, id, err)
	}
	return nil
}

// OutboxSent marks a message delivered, keeping the platform's id for it,
// and ends its claim, whoever holds it.
func (s *Store) OutboxSent(ctx context.Context, id int64, platformMsgID string) error {
	return s.updateOutbox(ctx, "mark sent", id, `UPDATE outbox SET state = ?, platform_msg_id = ?, last_error = '', claimed_by = '', claimed_until = 0 WHERE id = ?`,
		string(core.OutboxSent), platformMsgID)
}

// OutboxRetry records a failed try (Tries + 1, LastError) and when to try
// again, and ends the message's claim. The message's state is left as it
// is.
func (s *Store) OutboxRetry(ctx context.Context, id int64, next time.Time, lastErr string) error {
	return s.updateOutbox(ctx, "retry", id, `UPDATE outbox SET tries = tries + 1, next_try_at = ?, last_error = ?, claimed_by = '', claimed_until = 0 WHERE id = ?`,
		ms(next), lastErr)
}

// OutboxFail gives up on a message (state failed, Tries + 1, LastError) and
// ends its claim; the task's next message becomes due.
func (s *Store) OutboxFail(ctx context.Context, id int64, lastErr string) error {
	return s.updateOutbox(ctx, "fail", id, `UPDATE outbox SET state = ?, tries = tries + 1, last_error = ?, claimed_by = '', claimed_until = 0 WHERE id = ?`,
		string(core.OutboxFailed), lastErr)
}

// OutboxStats implements core.OutboxStore.
func (s *Store) OutboxStats(ctx context.Context) (map[core.Platform]core.OutboxStats, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT t.platform, o.state, COUNT(*), MIN(o.created_at)
		FROM outbox o JOIN tasks t ON t.id = o.task_id
		WHERE o.state IN (?, ?) GROUP BY t.platform, o.state`, string(core.OutboxPending), string(core.OutboxFailed))
	if err != nil {
		return nil, fmt.Errorf("outbox stats: %w", err)
	}
	defer rows.Close()
	out := map[core.Platform]core.OutboxStats{}
	for rows.Next() {
		var platform, state string
		var n, oldest int64
		if err := rows.Scan(&platform, &state, &n, &oldest); err != nil {
			return nil, fmt.Errorf("outbox stats: %w", err)
		}
		st := out[core.Platform(platform)]
		if state == string(core.OutboxPending) {
			st.Pending, st.OldestPending = n, fromMS(oldest)
		} else {
			st.Failed = n
		}
		out[core.Platform(platform)] = st
	}
	return out, rows.Err()
}

// StatusMessage implements core.OutboxStore.
func (s *Store) StatusMessage(ctx context.Context, jobID int64) (string, error) {
	var id string
	err := s.reader.QueryRowContext(ctx, qStatusMessage, jobID, string(core.OutboxUpdate), string(core.OutboxSent)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("status message of job %d: %w", jobID, core.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("status message of job %d: %w", jobID, err)
	}
	return id, nil
}

// RefMessage implements core.OutboxStore.
func (s *Store) RefMessage(ctx context.Context, taskID int64, ref string) (string, error) {
	var id string
	err := s.reader.QueryRowContext(ctx, qRefMessage, taskID, ref, string(core.OutboxUpdate), string(core.OutboxSent)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("message %q of task %d: %w", ref, taskID, core.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("message %q of task %d: %w", ref, taskID, err)
	}
	return id, nil
}

// SeenInbound records key and reports whether it was new: a key delivered
// again (also from another process) reports false.
func (s *Store) SeenInbound(ctx context.Context, key string, at time.Time) (bool, error) {
	var first bool
	err := s.tx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO inbound_events (key, seen_at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`,
			key, ms(at))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		first = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("seen inbound %q: %w", key, err)
	}
	return first, nil
}

// InboundKnown reports whether any of keys was recorded. It records
// nothing.
func (s *Store) InboundKnown(ctx context.Context, keys []string) (bool, error) {
	for _, k := range keys {
		var one int
		err := s.reader.QueryRowContext(ctx, qInboundKnown, k).Scan(&one)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return false, fmt.Errorf("inbound %q known: %w", k, err)
		}
	}
	return false, nil
}

// PruneInbound deletes keys seen before t and returns how many.
func (s *Store) PruneInbound(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM inbound_events WHERE seen_at < ?`, ms(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune inbound before %s: %w", before.Format(time.RFC3339), err)
	}
	return n, nil
}
