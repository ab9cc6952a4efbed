package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/jackc/pgx/v5"
)

const outboxCols = `o.id, o.task_id, COALESCE(o.job_id, 0), o.attempt, o.seq, o.kind, o.payload, o.state, o.tries,
	o.next_try_at, o.last_error, o.platform_msg_id, o.created_at, o.ref, o.claims`

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
// task. Taking the Seq increments the task's counter, which holds the
// task's row until the transaction ends: concurrent writers of one task's
// outbox get consecutive Seqs in the order they commit. A missing task is
// an error wrapping core.ErrNotFound.
func insertOutbox(ctx context.Context, tx db, m core.OutboxMessage) (int64, error) {
	var seq int64
	err := tx.row(ctx, `UPDATE tasks SET outbox_seq = outbox_seq + 1 WHERE id = $1 RETURNING outbox_seq`, m.TaskID).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("task %d: %w", m.TaskID, core.ErrNotFound)
	}
	if err != nil {
		return 0, err
	}
	var id int64
	err = tx.row(ctx, `INSERT INTO outbox (task_id, job_id, attempt, seq, kind, payload, state, tries,
		next_try_at, last_error, platform_msg_id, created_at, ref)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, '', '', $9, $10) RETURNING id`,
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
	err := s.tx(ctx, func(tx db) error {
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
		WHERE t.platform = $1 AND o.state = $2 AND o.next_try_at <= $3
		  AND o.seq = (SELECT MIN(p.seq) FROM outbox p WHERE p.task_id = o.task_id AND p.state = $2)
		ORDER BY o.task_id, o.seq`
	args := []any{string(platform), string(core.OutboxPending), ms(now)}
	if limit > 0 {
		q += ` LIMIT $4`
		args = append(args, limit)
	}
	rows, err := s.read().query(ctx, q, args...)
	out, err := collect(rows, err, scanOutbox)
	if err != nil {
		return nil, fmt.Errorf("due outbox for %s: %w", platform, err)
	}
	return out, nil
}

// ClaimOutbox implements core.OutboxStore with FOR UPDATE SKIP LOCKED:
// concurrent claims, from any process, skip the messages another one is
// taking at the moment instead of waiting for it, and a message another
// claim took and committed since this statement's snapshot is rechecked
// under its lock (READ COMMITTED re-evaluates the row's conditions on its
// newest version), found claimed, and left out. Locking the message and
// not its task is enough for the order of a task: only a task's first
// pending message is a candidate, and a snapshot in which an earlier
// message is still pending never offers a later one (a settled message
// never becomes pending again, and Seqs are committed in order, see
// insertOutbox). The candidates are materialized before the update, so
// that the LIMIT applies once.
func (s *Store) ClaimOutbox(ctx context.Context, platform core.Platform, owner string, now time.Time, lease time.Duration, limit int, afterTask int64) ([]core.OutboxMessage, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []core.OutboxMessage
	err := s.tx(ctx, func(tx db) error {
		rows, err := tx.query(ctx, qOutboxClaim,
			string(platform), string(core.OutboxPending), ms(now), limit, owner, ms(now.Add(lease)), afterTask)
		out, err = collect(rows, err, scanOutbox)
		return err
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
	err := s.tx(ctx, func(tx db) error {
		_, err := tx.exec(ctx, qOutboxRelease, owner, uncount, string(core.OutboxPending), ids)
		return err
	})
	if err != nil {
		return fmt.Errorf("release %d outbox messages: %w", len(ids), err)
	}
	return nil
}

// Outbox returns the message with id, or an error wrapping core.ErrNotFound.
func (s *Store) Outbox(ctx context.Context, id int64) (core.OutboxMessage, error) {
	m, err := scanOutbox(s.read().row(ctx, `SELECT `+outboxCols+` FROM outbox o WHERE o.id = $1`, id))
	if err != nil {
		return core.OutboxMessage{}, fmt.Errorf("outbox message %d: %w", id, err)
	}
	return m, nil
}

// updateOutbox runs one UPDATE on message id, whose id is the query's
// last argument; no such message is an error wrapping core.ErrNotFound.
func (s *Store) updateOutbox(ctx context.Context, op string, id int64, query string, args ...any) error {
	err := s.tx(ctx, func(tx db) error {
		n, err := tx.exec(ctx, query, append(args, id)...)
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
	return s.updateOutbox(ctx, "mark sent", id, `UPDATE outbox SET state = $1, platform_msg_id = $2, last_error = '', claimed_by = '', claimed_until = 0 WHERE id = $3`,
		string(core.OutboxSent), platformMsgID)
}

// OutboxRetry records a failed try (Tries + 1, LastError) and when to try
// again, and ends the message's claim. The message's state is left as it
// is.
func (s *Store) OutboxRetry(ctx context.Context, id int64, next time.Time, lastErr string) error {
	return s.updateOutbox(ctx, "retry", id, `UPDATE outbox SET tries = tries + 1, next_try_at = $1, last_error = $2, claimed_by = '', claimed_until = 0 WHERE id = $3`,
		ms(next), lastErr)
}

// OutboxFail gives up on a message (state failed, Tries + 1, LastError) and
// ends its claim; the task's next message becomes due.
func (s *Store) OutboxFail(ctx context.Context, id int64, lastErr string) error {
	return s.updateOutbox(ctx, "fail", id, `UPDATE outbox SET state = $1, tries = tries + 1, last_error = $2, claimed_by = '', claimed_until = 0 WHERE id = $3`,
		string(core.OutboxFailed), lastErr)
}

// OutboxStats implements core.OutboxStore.
func (s *Store) OutboxStats(ctx context.Context) (map[core.Platform]core.OutboxStats, error) {
	type group struct {
		platform, state string
		n, oldest       int64
	}
	rows, err := s.read().query(ctx, `SELECT t.platform, o.state, COUNT(*), MIN(o.created_at)
		FROM outbox o JOIN tasks t ON t.id = o.task_id
		WHERE o.state IN ($1, $2) GROUP BY t.platform, o.state`, string(core.OutboxPending), string(core.OutboxFailed))
	groups, err := collect(rows, err, func(r scanner) (group, error) {
		var g group
		return g, r.Scan(&g.platform, &g.state, &g.n, &g.oldest)
	})
	if err != nil {
		return nil, fmt.Errorf("outbox stats: %w", err)
	}
	out := map[core.Platform]core.OutboxStats{}
	for _, g := range groups {
		st := out[core.Platform(g.platform)]
		if g.state == string(core.OutboxPending) {
			st.Pending, st.OldestPending = g.n, fromMS(g.oldest)
		} else {
			st.Failed = g.n
		}
		out[core.Platform(g.platform)] = st
	}
	return out, nil
}

// StatusMessage implements core.OutboxStore.
func (s *Store) StatusMessage(ctx context.Context, jobID int64) (string, error) {
	var id string
	err := s.read().row(ctx, qStatusMessage, jobID, string(core.OutboxUpdate), string(core.OutboxSent)).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("status message of job %d: %w", jobID, notFound(err))
	}
	return id, nil
}

// RefMessage implements core.OutboxStore.
func (s *Store) RefMessage(ctx context.Context, taskID int64, ref string) (string, error) {
	var id string
	err := s.read().row(ctx, qRefMessage, taskID, ref, string(core.OutboxUpdate), string(core.OutboxSent)).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("message %q of task %d: %w", ref, taskID, notFound(err))
	}
	return id, nil
}

// SeenInbound records key and reports whether it was new: a key delivered
// again (also from another process) reports false.
func (s *Store) SeenInbound(ctx context.Context, key string, at time.Time) (bool, error) {
	var first bool
	err := s.tx(ctx, func(tx db) error {
		n, err := tx.exec(ctx, `INSERT INTO inbound_events (key, seen_at) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`,
			key, ms(at))
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
	if len(keys) == 0 {
		return false, nil
	}
	var known bool
	err := s.read().row(ctx, qInboundKnown, keys).Scan(&known)
	if err != nil {
		return false, fmt.Errorf("inbound %q known: %w", keys, err)
	}
	return known, nil
}

// PruneInbound deletes keys seen before t and returns how many.
func (s *Store) PruneInbound(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx db) error {
		var err error
		n, err = tx.exec(ctx, `DELETE FROM inbound_events WHERE seen_at < $1`, ms(before))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune inbound before %s: %w", before.Format(time.RFC3339), err)
	}
	return n, nil
}
