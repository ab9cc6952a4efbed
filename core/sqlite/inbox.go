package sqlite

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/baton-bot/baton/core"
)

var _ core.InboxStager = (*Store)(nil)

const inboxCols = `id, platform, key, payload, received_at, tries, due_at, last_error`

func scanInbox(r scanner) (core.InboxEvent, error) {
	var e core.InboxEvent
	var platform string
	var received, due int64
	if err := r.Scan(&e.ID, &platform, &e.Key, &e.Payload, &received, &e.Tries, &due, &e.LastError); err != nil {
		return core.InboxEvent{}, notFound(err)
	}
	e.Platform, e.ReceivedAt, e.DueAt = core.Platform(platform), fromMS(received), fromMS(due)
	return e, nil
}

// AddInbox implements core.InboxStore. It returns once the event is
// committed and the WAL holding it is on disk, so that it survives a power
// loss as well as a crash: the caller may acknowledge it then. An event
// found in the inbox already is waited for in the same way (its own add
// may still be waiting for the disk).
func (s *Store) AddInbox(ctx context.Context, e core.InboxEvent) (core.InboxEvent, bool, error) {
	return s.addInbox(ctx, e, s.durableTx)
}

// StageInbox implements core.InboxStager: AddInbox, returning once the
// event is committed, with durable, which returns once the WAL holding it
// is on disk.
func (s *Store) StageInbox(ctx context.Context, e core.InboxEvent) (core.InboxEvent, bool, func(context.Context) error, error) {
	out, first, err := s.addInbox(ctx, e, s.tx)
	if err != nil {
		return core.InboxEvent{}, false, nil, err
	}
	// The event is committed: the next fdatasync begun from now covers it
	// (or a duplicate's first add, committed before).
	w := &write{done: make(chan error, 1)}
	s.syncer.add([]*write{w})
	durable := func(ctx context.Context) error {
		select {
		case err := <-w.done:
			if err != nil {
				return fmt.Errorf("add inbox %s event %q: %w", e.Platform, e.Key, err)
			}
			return nil
		case <-ctx.Done():
			return fmt.Errorf("add inbox %s event %q: waiting for the disk: %w", e.Platform, e.Key, ctx.Err())
		}
	}
	return out, first, durable, nil
}

// addInbox is AddInbox with the write made by tx.
func (s *Store) addInbox(ctx context.Context, e core.InboxEvent, tx func(context.Context, func(*txn) error) error) (core.InboxEvent, bool, error) {
	if e.Platform == "" || e.Key == "" {
		return core.InboxEvent{}, false, errors.New("add inbox: an event needs a platform and a key")
	}
	var out core.InboxEvent
	var first bool
	err := tx(ctx, func(tx *txn) error {
		first = false
		row := tx.QueryRowContext(ctx, `INSERT INTO inbox (platform, key, payload, received_at, tries, due_at)
			VALUES (?, ?, ?, ?, 1, ?) ON CONFLICT (platform, key) DO NOTHING RETURNING `+inboxCols,
			string(e.Platform), e.Key, e.Payload, ms(e.ReceivedAt), ms(e.DueAt))
		var err error
		out, err = scanInbox(row)
		if err == nil {
			first = true
			return nil
		}
		if !errors.Is(err, core.ErrNotFound) {
			return err
		}
		out, err = scanInbox(tx.QueryRowContext(ctx, qInboxByKey,
			string(e.Platform), e.Key))
		return err
	})
	if err != nil {
		return core.InboxEvent{}, false, fmt.Errorf("add inbox %s event %q: %w", e.Platform, e.Key, err)
	}
	return out, first, nil
}

// ClaimInbox implements core.InboxStore.
func (s *Store) ClaimInbox(ctx context.Context, platform core.Platform, now time.Time, lease time.Duration, limit int) ([]core.InboxEvent, error) {
	if limit <= 0 {
		return nil, nil
	}
	// The sweep asks every few seconds and mostly finds nothing: a read
	// spares the writer a transaction then.
	var due int
	err := s.reader.QueryRowContext(ctx, qInboxDue,
		string(platform), ms(now)).Scan(&due)
	if err != nil {
		return nil, fmt.Errorf("claim %s inbox: %w", platform, err)
	}
	if due == 0 {
		return nil, nil
	}
	var out []core.InboxEvent
	err = s.tx(ctx, func(tx *txn) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, qInboxClaim, ms(now.Add(lease)), string(platform), ms(now), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanInbox(rows)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("claim %s inbox: %w", platform, err)
	}
	// RETURNING gives no order.
	slices.SortFunc(out, func(a, b core.InboxEvent) int {
		return cmp.Or(a.ReceivedAt.Compare(b.ReceivedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// InboxRetry implements core.InboxStore. An event no longer in the inbox
// is an error wrapping core.ErrNotFound.
func (s *Store) InboxRetry(ctx context.Context, id int64, next time.Time, lastErr string) error {
	return s.inboxExec(ctx, "retry", id, `UPDATE inbox SET due_at = ?, last_error = ? WHERE id = ?`, ms(next), lastErr, id)
}

// InboxDone implements core.InboxStore. An event no longer in the inbox
// is an error wrapping core.ErrNotFound.
func (s *Store) InboxDone(ctx context.Context, id int64) error {
	return s.inboxExec(ctx, "remove", id, `DELETE FROM inbox WHERE id = ?`, id)
}

func (s *Store) inboxExec(ctx context.Context, op string, id int64, q string, args ...any) error {
	err := s.tx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err == nil && n == 0 {
			err = core.ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("%s inbox event %d: %w", op, id, err)
	}
	return nil
}
