package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/baton-bot/baton/core"
)

var _ core.UsageStore = (*Store)(nil)

// AddUsage implements core.UsageStore.
func (s *Store) AddUsage(ctx context.Context, u core.Usage) error {
	if u.At.IsZero() {
		u.At = now()
	}
	if u.Day == "" {
		u.Day = core.UsageDay(u.At)
	}
	err := s.tx(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO usage (job_id, task_id, channel, requester, model, day,
			prompt_tokens, cached_tokens, completion_tokens, cost, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			u.JobID, u.TaskID, u.Channel, u.Requester, u.Model, u.Day,
			u.PromptTokens, u.CachedTokens, u.CompletionTokens, u.Cost, ms(u.At))
		return err
	})
	if err != nil {
		return fmt.Errorf("add usage of job %d: %w", u.JobID, err)
	}
	return nil
}

// usageWhere is the WHERE clause selecting f's rows and its arguments.
func usageWhere(f core.UsageFilter) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, v any) {
		conds = append(conds, cond)
		args = append(args, v)
	}
	if f.JobID != 0 {
		add("job_id = ?", f.JobID)
	}
	if f.TaskID != 0 {
		add("task_id = ?", f.TaskID)
	}
	if f.Channel != "" {
		add("channel = ?", f.Channel)
	}
	if f.Requester != "" {
		add("requester = ?", f.Requester)
	}
	if f.FromDay != "" {
		add("day >= ?", f.FromDay)
	}
	if f.ToDay != "" {
		add("day <= ?", f.ToDay)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// Usage implements core.UsageStore.
func (s *Store) Usage(ctx context.Context, f core.UsageFilter) ([]core.Usage, error) {
	where, args := usageWhere(f)
	rows, err := s.reader.QueryContext(ctx, `SELECT id, job_id, task_id, channel, requester, model, day,
		prompt_tokens, cached_tokens, completion_tokens, cost, at FROM usage`+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	defer rows.Close()
	var out []core.Usage
	for rows.Next() {
		var u core.Usage
		var at int64
		if err := rows.Scan(&u.ID, &u.JobID, &u.TaskID, &u.Channel, &u.Requester, &u.Model, &u.Day,
			&u.PromptTokens, &u.CachedTokens, &u.CompletionTokens, &u.Cost, &at); err != nil {
			return nil, fmt.Errorf("usage: %w", err)
		}
		u.At = fromMS(at)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	return out, nil
}

// SumUsage implements core.UsageStore.
func (s *Store) SumUsage(ctx context.Context, f core.UsageFilter) (core.UsageSum, error) {
	where, args := usageWhere(f)
	var sum core.UsageSum
	err := s.reader.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(cached_tokens), 0),
		COALESCE(SUM(completion_tokens), 0), COALESCE(SUM(cost), 0) FROM usage`+where, args...).
		Scan(&sum.Requests, &sum.PromptTokens, &sum.CachedTokens, &sum.CompletionTokens, &sum.Cost)
	if err != nil {
		return core.UsageSum{}, fmt.Errorf("sum usage: %w", err)
	}
	return sum, nil
}
