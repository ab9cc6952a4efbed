package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/postgres/pgtest"
	"github.com/baton-bot/baton/core/storefill"
)

// jobReader is what the command reads of the store the baton processes
// wrote: both of Baton's stores have it.
type jobReader interface {
	CountJobs(ctx context.Context) (map[core.JobState]int64, error)
	Jobs(ctx context.Context, f core.JobFilter) ([]core.Job, error)
	Events(ctx context.Context, jobID int64) ([]core.JobEvent, error)
	Close() error
}

// database is the store of one run, shared by the run's baton processes:
// a SQLite file in the run's directory, or a schema of the run's own on a
// PostgreSQL server, dropped when the run ends.
type database struct {
	url    string          // database.url of the processes
	schema *pgtest.Schema  // nil: SQLite
	filled storefill.Sizes // what fill wrote before the processes started
}

// newDatabase makes a run's store: on server (a postgres:// URL) a fresh
// schema, else a SQLite file under dir.
func newDatabase(ctx context.Context, server, dir string) (*database, error) {
	if server == "" {
		return &database{url: "sqlite:" + filepath.Join(dir, "baton.db")}, nil
	}
	if !strings.HasPrefix(server, "postgres://") && !strings.HasPrefix(server, "postgresql://") {
		return nil, errors.New("-database-url must be a postgres:// or postgresql:// URL (or empty: SQLite)")
	}
	s, err := pgtest.NewSchema(ctx, server, "loadtest")
	if err != nil {
		return nil, fmt.Errorf("the run's PostgreSQL schema: %w", err)
	}
	return &database{url: s.URL, schema: s}, nil
}

// String names the store without a password, and what it was filled
// with.
func (d *database) String() string {
	s := "SQLite " + strings.TrimPrefix(d.url, "sqlite:")
	if d.schema != nil {
		s = "PostgreSQL schema " + d.schema.Name
	}
	if !d.filled.Empty() {
		s += " filled with " + d.filled.String()
	}
	return s
}

// open opens the store for reading what the processes wrote (migrating
// it, when none has yet); of a filled store, only what they wrote.
func (d *database) open(ctx context.Context) (jobReader, error) {
	r, err := migrated(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("open the run's store (%s): %w", d, err)
	}
	if !d.filled.Empty() {
		return runJobs{jobReader: r, filled: int64(d.filled.Jobs)}, nil
	}
	return r, nil
}

// drop removes a PostgreSQL run's schema; a SQLite file goes with the
// run's directory.
func (d *database) drop() error {
	if d.schema == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return d.schema.Drop(ctx)
}

// settle waits until want jobs exist and every one has ended, or until
// wait has passed, and returns how many succeeded.
func settle(ctx context.Context, store jobReader, want int, wait time.Duration) (succeeded int, err error) {
	deadline := time.Now().Add(wait)
	for {
		n, err := store.CountJobs(ctx)
		if err != nil {
			return 0, err
		}
		var total, ended int64
		for state, c := range n {
			total += c
			if state.Terminal() {
				ended += c
			}
		}
		if (total >= int64(want) && ended == total) || time.Now().After(deadline) {
			return int(n[core.JobSucceeded]), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// latencies reads, for each job the events started, the time from sending
// its event to its "claimed" event, sorted, both times cut to the
// millisecond (SQLite keeps milliseconds).
func latencies(ctx context.Context, store jobReader, sent map[string]time.Time) ([]time.Duration, error) {
	jobs, err := store.Jobs(ctx, core.JobFilter{})
	if err != nil {
		return nil, err
	}
	if len(jobs) > len(sent) {
		return nil, fmt.Errorf("%d jobs for %d events: an event started more than one job", len(jobs), len(sent))
	}
	var lat []time.Duration
	for _, j := range jobs {
		at, ok := sent[j.TriggerMsgID]
		if !ok {
			continue
		}
		evs, err := store.Events(ctx, j.ID)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			if e.Kind == core.EventClaimed {
				lat = append(lat, e.At.Truncate(time.Millisecond).Sub(at.Truncate(time.Millisecond)))
				break
			}
		}
	}
	slices.Sort(lat)
	return lat, nil
}
