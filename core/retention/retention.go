// Package retention prunes the finished work a store keeps past its age,
// off the hot path: a loop that wakes every Config.Every (with jitter, so
// that processes started together do not prune together), prunes the
// backlog in small batches with a pause between them, and stops a round at
// the first failure — a full disk stops pruning, never the service.
//
// One process of many should prune at a time: run the loop under a lease
// (core/lease).
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/baton-bot/baton/core"
)

// Defaults of Config.
const (
	DefaultEvery = time.Hour
	DefaultBatch = 500
	DefaultPause = 50 * time.Millisecond
)

// Config configures a Loop.
type Config struct {
	// Retention is what to keep; ages of 0 keep that kind forever.
	Retention core.Retention
	// Every is how often a round runs; default DefaultEvery. Each wait is
	// jittered by up to a tenth.
	Every time.Duration
	// Batch is how many rows of each kind one transaction removes; default
	// DefaultBatch.
	Batch int
	// Pause is the wait between batches, which leaves the writer to the
	// hot path; default DefaultPause.
	Pause time.Duration
	// Logger hears each round's outcome.
	Logger *slog.Logger
	// Pruned, when set, is told the rows each batch removed (a metric).
	Pruned func(core.Pruned)
}

// Loop prunes a store in rounds.
type Loop struct {
	p     core.Pruner
	cfg   Config
	sleep func(ctx context.Context, d time.Duration) error
}

// New returns a Loop over p. It fails when cfg asks for nothing to prune.
func New(p core.Pruner, cfg Config) (*Loop, error) {
	r := cfg.Retention
	if r.FinishedJobs < 0 || r.Events < 0 || r.Comments < 0 {
		return nil, fmt.Errorf("retention: negative age in %+v", r)
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Pause <= 0 {
		cfg.Pause = DefaultPause
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Loop{p: p, cfg: cfg, sleep: core.Sleep}, nil
}

// Enabled reports whether any kind has an age: a loop without one has
// nothing to do.
func (l *Loop) Enabled() bool {
	r := l.cfg.Retention
	return r.FinishedJobs > 0 || r.Events > 0 || r.Comments > 0
}

// Run prunes a round at once and then every Every, until ctx ends; it
// returns nil then. A round's failure is logged and ends the round only.
func (l *Loop) Run(ctx context.Context) error {
	if !l.Enabled() {
		return nil
	}
	for {
		if _, err := l.Round(ctx); err != nil && ctx.Err() == nil {
			l.cfg.Logger.WarnContext(ctx, "retention: pruning stopped for this round; the service goes on", "error", err.Error())
		}
		wait := l.cfg.Every + rand.N(l.cfg.Every/10+1)
		if err := l.sleep(ctx, wait); err != nil {
			return nil
		}
	}
}

// Round prunes until the store has nothing past its age, batch by batch,
// and returns what it removed. It stops at the first error (a full disk:
// what was pruned before stays pruned) or when ctx ends.
func (l *Loop) Round(ctx context.Context) (core.Pruned, error) {
	var sum core.Pruned
	start := time.Now()
	for {
		got, err := l.p.Prune(ctx, l.cfg.Retention, l.cfg.Batch)
		sum.Jobs, sum.Events, sum.Comments = sum.Jobs+got.Jobs, sum.Events+got.Events, sum.Comments+got.Comments
		if l.cfg.Pruned != nil && got.Total() > 0 {
			l.cfg.Pruned(got)
		}
		if err != nil {
			return sum, fmt.Errorf("retention: %w", err)
		}
		if got.Total() == 0 {
			break
		}
		if err := l.sleep(ctx, l.cfg.Pause); err != nil {
			return sum, err
		}
	}
	if sum.Total() > 0 {
		l.cfg.Logger.InfoContext(ctx, "retention: pruned", "jobs", sum.Jobs, "events", sum.Events,
			"comments", sum.Comments, "took", time.Since(start).Round(time.Millisecond))
	}
	return sum, nil
}
