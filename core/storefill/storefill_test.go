package storefill_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/postgres"
	"github.com/baton-bot/baton/core/postgres/pgtest"
	"github.com/baton-bot/baton/core/sqlite"
	"github.com/baton-bot/baton/core/storefill"
)

// store is what the test reads of a filled store.
type store interface {
	core.Store
	core.Pruner
}

// TestFill fills each store with a small year and reads it back through
// the store: every job succeeded, each task has its comments and jobs,
// events sit on the newest jobs only, a second fill adds to the first, and
// the default retention (a year of jobs and comments, 90 days of events)
// finds nothing to prune.
func TestFill(t *testing.T) {
	sizes := storefill.Sizes{Tasks: 30, Jobs: 90, Events: 900}
	for _, c := range []struct {
		name string
		open func(t *testing.T) (store, func(context.Context) error)
	}{
		{"sqlite", func(t *testing.T) (store, func(context.Context) error) {
			path := filepath.Join(t.TempDir(), "baton.db")
			s, err := sqlite.Open(t.Context(), path, sqlite.Options{WorkspaceRoot: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			return s, func(ctx context.Context) error { return storefill.SQLite(ctx, path, sizes) }
		}},
		{"postgres", func(t *testing.T) (store, func(context.Context) error) {
			url := pgtest.URL(t)
			s, err := postgres.Open(t.Context(), url, postgres.Options{WorkspaceRoot: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			return s, func(ctx context.Context) error { return storefill.Postgres(ctx, url, sizes) }
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			s, fill := c.open(t)
			t.Cleanup(func() { _ = s.Close() })
			for range 2 {
				if err := fill(ctx); err != nil {
					t.Fatal(err)
				}
			}
			n, err := s.CountJobs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			for _, c := range n {
				total += c
			}
			if n[core.JobSucceeded] != 180 || total != 180 {
				t.Errorf("jobs by state: %v, want 180 succeeded", n)
			}
			task, err := s.Task(ctx, 30) // the first fill's last task
			if err != nil {
				t.Fatal(err)
			}
			if task.Thread.Thread != "fill.29" {
				t.Errorf("task 30's thread = %q, want fill.29", task.Thread.Thread)
			}
			comments, err := s.RecentComments(ctx, task.ID, 10)
			if err != nil {
				t.Fatal(err)
			}
			jobs, err := s.Jobs(ctx, core.JobFilter{TaskID: task.ID})
			if err != nil {
				t.Fatal(err)
			}
			if len(comments) != 3 || len(jobs) != 3 {
				t.Fatalf("task 30 has %d comments and %d jobs, want 3 and 3", len(comments), len(jobs))
			}
			old, err := s.Events(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			newest, err := s.Events(ctx, 90)
			if err != nil {
				t.Fatal(err)
			}
			if len(old) != 0 || len(newest) == 0 {
				t.Errorf("events of the oldest job: %d, of the newest: %d; want none and some", len(old), len(newest))
			}
			// The last of 90 jobs spread over 360 days finished 4 days ago.
			if age := time.Since(jobs[0].FinishedAt); age < 4*24*time.Hour || age > 5*24*time.Hour {
				t.Errorf("the fill's newest job finished %s ago, want 4 days and an hour", age.Round(time.Hour))
			}
			p, err := s.Prune(ctx, core.Retention{FinishedJobs: 365 * 24 * time.Hour, Events: 90 * 24 * time.Hour, Comments: 365 * 24 * time.Hour}, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if p.Total() != 0 {
				t.Errorf("the default retention pruned %+v of a filled store, want nothing", p)
			}
		})
	}
}

// TestFillRejectsOrphans refuses sizes whose rows would belong to nothing.
func TestFillRejectsOrphans(t *testing.T) {
	for _, s := range []storefill.Sizes{{Jobs: 1}, {Tasks: 1, Events: 1}, {Tasks: -1}} {
		if err := storefill.SQLite(t.Context(), filepath.Join(t.TempDir(), "x.db"), s); err == nil {
			t.Errorf("fill %+v: no error", s)
		}
	}
}
