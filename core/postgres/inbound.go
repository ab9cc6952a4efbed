package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-bot/baton/core"
)

// Ingest makes the writes of one inbound message in one transaction (see
// core.InboundStore): the dedup keys, the thread's task (created with the
// thread's history when there is none), the comment, and the job when the
// task has no active one. A duplicate, by key or by the comment's message
// id, records the new keys only. The task's row is locked before its
// active job is looked for, so that of two messages of one thread ingested
// at once only one creates a job. in.Task.Thread.Platform must be set.
func (s *Store) Ingest(ctx context.Context, in core.Inbound) (core.Ingested, error) {
	if in.Task.Thread.Platform == "" {
		return core.Ingested{}, errors.New("ingest: thread has no platform")
	}
	var out core.Ingested
	err := s.tx(ctx, func(tx db) error {
		out = core.Ingested{}
		for _, key := range in.Keys {
			n, err := tx.exec(ctx, `INSERT INTO inbound_events (key, seen_at) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`,
				key, ms(in.At))
			if err != nil {
				return err
			}
			if n == 0 {
				out.Duplicate = true
			}
		}
		if out.Duplicate {
			return nil
		}
		task, created, err := ensureTask(ctx, tx, in.Task, s.root, true)
		if err != nil {
			return fmt.Errorf("task: %w", err)
		}
		if created {
			out.TaskCreated = true
			for i, h := range in.History {
				if h.PlatformMsgID != "" && h.PlatformMsgID == in.Comment.PlatformMsgID {
					continue
				}
				h.TaskID = task.ID
				if _, err := insertComment(ctx, tx, h); err != nil && !errors.Is(err, core.ErrDuplicate) {
					return fmt.Errorf("earlier message %d: %w", i, err)
				}
			}
		}
		out.Task = task
		c := in.Comment
		c.TaskID = task.ID
		out.Comment, err = insertComment(ctx, tx, c)
		if errors.Is(err, core.ErrDuplicate) {
			out.Duplicate = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("comment: %w", err)
		}
		active, err := activeJob(ctx, tx, task.ID)
		switch {
		case err == nil:
			out.Active = active
		case !errors.Is(err, core.ErrNotFound):
			return fmt.Errorf("active job: %w", err)
		case in.Job != nil:
			j := *in.Job
			j.TaskID = task.ID
			if out.Job, err = insertJob(ctx, tx, j); err != nil {
				return fmt.Errorf("job: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		t := in.Task.Thread
		return core.Ingested{}, fmt.Errorf("ingest message %q of %s/%s/%s/%s: %w",
			in.Comment.PlatformMsgID, t.Platform, t.Team, t.Channel, t.Thread, err)
	}
	return out, nil
}
