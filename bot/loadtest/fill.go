package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/postgres"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/baton-bot/baton/core/storefill"
)

// fillStore writes o.fill tenths of a busy year of finished work
// (storefill.Scale) into the run's store before any baton process starts,
// so that the run measures a store as large as a team's after a year.
// Nothing when o.fill is 0.
func (o options) fillStore(ctx context.Context, db *database) error {
	if o.fill <= 0 {
		return nil
	}
	sizes := storefill.Scale(o.fill)
	o.say("filling %s with %s…", db, sizes)
	start := time.Now()
	if err := db.fill(ctx, sizes); err != nil {
		return err
	}
	o.say("filled in %s", time.Since(start).Round(time.Second))
	return nil
}

// fill migrates the run's store, by opening it as the processes will, and
// writes sizes into it. The readers db.open returns from then on see only
// the jobs made after the fill (runJobs).
func (d *database) fill(ctx context.Context, sizes storefill.Sizes) error {
	store, err := d.open(ctx)
	if err != nil {
		return err
	}
	if err := store.Close(); err != nil {
		return fmt.Errorf("close the run's store after migrating it: %w", err)
	}
	if d.schema == nil {
		err = storefill.SQLite(ctx, strings.TrimPrefix(d.url, "sqlite:"), sizes)
	} else {
		err = storefill.Postgres(ctx, d.url, sizes)
	}
	if err != nil {
		return fmt.Errorf("fill the run's store (%s): %w", d, err)
	}
	d.filled = sizes
	return nil
}

// runJobs reads a filled store as if it held only the jobs made after
// the fill: the run's. The fill's jobs are the oldest and all succeeded,
// so CountJobs takes them off the succeeded count, and Jobs without a
// filter returns only as many of the newest jobs as the run made.
type runJobs struct {
	jobReader
	filled int64 // jobs the fill wrote
}

func (r runJobs) CountJobs(ctx context.Context) (map[core.JobState]int64, error) {
	n, err := r.jobReader.CountJobs(ctx)
	if err != nil {
		return nil, err
	}
	if n[core.JobSucceeded] < r.filled {
		return nil, fmt.Errorf("%d jobs succeeded in a store filled with %d", n[core.JobSucceeded], r.filled)
	}
	n[core.JobSucceeded] -= r.filled
	return n, nil
}

func (r runJobs) Jobs(ctx context.Context, f core.JobFilter) ([]core.Job, error) {
	if f.TaskID != 0 || f.ParentJobID != 0 || len(f.States) > 0 {
		return r.jobReader.Jobs(ctx, f)
	}
	n, err := r.CountJobs(ctx)
	if err != nil {
		return nil, err
	}
	var made int64
	for _, c := range n {
		made += c
	}
	if made == 0 {
		return nil, nil
	}
	if f.Limit == 0 || int64(f.Limit) > made {
		f.Limit = int(made)
	}
	return r.jobReader.Jobs(ctx, f)
}

// migrated opens the store at url with core/sqlite or core/postgres,
// which migrate it.
func migrated(ctx context.Context, d *database) (jobReader, error) {
	if d.schema == nil {
		return sqlite.Open(ctx, strings.TrimPrefix(d.url, "sqlite:"), sqlite.Options{})
	}
	return postgres.Open(ctx, d.url, postgres.Options{})
}
