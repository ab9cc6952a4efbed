package main

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/lease"
	"github.com/baton-bot/baton/core/retention"
)

// retentionLease is the lease under which one process of those sharing
// the store prunes it (core/retention).
const retentionLease = "retention"

// startRetention prunes the store past retention's ages, off the hot path,
// in the process that holds retentionLease, until ctx ends; wg waits for
// it. Each batch's rows count in baton_retention_pruned_total{kind}.
// Nothing starts when every age is 0 or the store cannot prune.
func (m *Main) startRetention(ctx context.Context, sys *system, wg *sync.WaitGroup) {
	c := m.Config.Retention
	p, ok := sys.store.(core.Pruner)
	if !ok {
		return
	}
	pruned := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_retention_pruned_total",
		Help: "Rows removed by retention, by kind (jobs, events, comments)."}, []string{"kind"})
	if err := sys.metrics.reg.Register(pruned); err != nil {
		m.Logger.Warn("retention: metric not registered", "err", err)
	}
	log := m.Logger.With("component", "retention")
	loop, err := retention.New(p, retention.Config{
		Retention: core.Retention{FinishedJobs: c.FinishedJobs, Events: c.Events, Comments: c.Comments},
		Logger:    log,
		Pruned: func(n core.Pruned) {
			pruned.WithLabelValues("jobs").Add(float64(n.Jobs))
			pruned.WithLabelValues("events").Add(float64(n.Events))
			pruned.WithLabelValues("comments").Add(float64(n.Comments))
		},
	})
	if err != nil || !loop.Enabled() {
		if err != nil {
			log.Warn("retention off", "err", err)
		}
		return
	}
	var leases core.LeaseStore = sys.store
	if m.leases != nil {
		leases = m.leases(leases)
	}
	holder, err := lease.New(leases, lease.Config{Name: retentionLease, Logger: log})
	if err != nil {
		log.Warn("retention off", "err", err)
		return
	}
	wg.Go(func() { _ = holder.Run(ctx, loop.Run) })
}
