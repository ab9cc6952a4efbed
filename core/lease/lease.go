// Package lease runs what only one process of many may run, under a named
// lease of the store (core.LeaseStore): Baton's gateways share one store,
// and only one of them may hold Discord's gateway connection.
//
// A Holder is, at any moment, standby or holding. Standby, it tries to take
// the lease every Config.Every. Holding, it runs a term (the caller's
// function) under a context that ends as soon as the lease is lost — a
// renewal refused, failed or not answered in time — and renews every
// Every; once the term has returned it is standby again. When Run's
// context ends it waits for the term and releases the lease, so that
// another process takes over at once; a process that dies holding it is
// replaced once the lease's TTL has run out, within TTL plus Every.
//
//	h, _ := lease.New(store, lease.Config{Name: "discord", Logger: log})
//	err := h.Run(ctx, func(ctx context.Context) error {
//		return adapter.Run(ctx) // connected while this process holds "discord"
//	})
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/baton-bot/baton/core"
)

// Defaults of Config.
const (
	DefaultTTL   = 15 * time.Second
	DefaultEvery = 5 * time.Second
)

// Config configures a Holder.
type Config struct {
	// Name is the lease's name in the store ("discord").
	Name string
	// Owner names this process in the store, unique among the processes
	// sharing it; empty: Owner().
	Owner string
	// TTL is how long a taking or renewal holds the lease; default
	// DefaultTTL. It must be at least twice Every: a holder whose
	// renewal is not answered within Every steps down, Every before its
	// lease could run out.
	TTL time.Duration
	// Every is how often the holder renews and a standby tries; default
	// DefaultEvery, or TTL/3 when TTL is set and Every is not.
	Every time.Duration
	// Logger hears when the lease is taken, lost and released (info).
	Logger *slog.Logger
}

// Holder takes, renews and releases one lease for one process. Its methods
// are safe for concurrent use; Run is called once.
type Holder struct {
	st   core.LeaseStore
	cfg  Config
	log  *slog.Logger
	held atomic.Bool // a term is running
}

// New returns a Holder of cfg.Name on st. It asks the store nothing: Run
// does.
func New(st core.LeaseStore, cfg Config) (*Holder, error) {
	if cfg.Name == "" {
		return nil, errors.New("lease: no name")
	}
	if cfg.Owner == "" {
		cfg.Owner = Owner()
	}
	switch {
	case cfg.TTL <= 0 && cfg.Every <= 0:
		cfg.TTL, cfg.Every = DefaultTTL, DefaultEvery
	case cfg.TTL <= 0:
		cfg.TTL = 3 * cfg.Every
	case cfg.Every <= 0:
		cfg.Every = cfg.TTL / 3
	}
	if cfg.TTL < 2*cfg.Every {
		return nil, fmt.Errorf("lease %s: ttl %s is under twice the renewal interval %s", cfg.Name, cfg.TTL, cfg.Every)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Holder{st: st, cfg: cfg, log: cfg.Logger.With("lease", cfg.Name, "owner", cfg.Owner)}, nil
}

// Owner returns a name for this process unique among those sharing a
// store: its host, its pid and a random suffix.
func Owner() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Held reports whether a term is running: this process holds the lease.
func (h *Holder) Held() bool { return h.held.Load() }

// Run alternates between standby and holding until ctx ends (see the
// package doc), running term for each time it holds the lease. term must
// return soon after its context ends; Run waits for it before it tries
// again, so that no two terms of one Holder overlap, and before it
// returns. A term that returns by itself, its context still live, ends
// Run: the lease is released and term's error returned. Otherwise Run
// returns nil once ctx has ended and the lease is released. Store errors
// while standby are logged and the take tried again.
func (h *Holder) Run(ctx context.Context, term func(ctx context.Context) error) error {
	// Also when ctx ended during a take that the store committed.
	defer h.release(ctx)
	next := time.Now()
	failing := false
	for sleepUntil(ctx, next) {
		start := time.Now()
		next = start.Add(h.cfg.Every)
		held, err := h.acquire(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			if !failing {
				h.log.Warn("taking the lease failed; trying again", "err", err, "every", h.cfg.Every)
			}
			failing = true
			continue
		case !held:
			failing = false
			continue
		}
		failing = false
		h.log.Info("lease taken: this process holds it", "ttl", h.cfg.TTL)
		ended, err := h.hold(ctx, start, term)
		switch {
		case ended:
			h.log.Info("lease released: its work ended", "err", err)
			return err
		case ctx.Err() != nil:
			h.log.Info("lease released: this process is stopping")
			return nil
		}
		// Lost: whatever the store recorded of the last renewal is no
		// longer this process's to hold.
		h.release(ctx)
		next = time.Now().Add(h.cfg.Every)
	}
	return nil
}

// hold runs term while the lease taken at start is renewed, until term
// returns, ctx ends or the lease is lost; it returns once term has.
// ended reports that term returned by itself, ctx live, with err.
func (h *Holder) hold(ctx context.Context, start time.Time, term func(context.Context) error) (ended bool, err error) {
	tctx, stop := context.WithCancel(ctx)
	h.held.Store(true)
	defer h.held.Store(false)
	done := make(chan error, 1)
	go func() { done <- term(tctx) }()
	returned := false // term has returned
	defer func() {
		stop()
		if !returned {
			<-done
		}
	}()
	t := time.NewTimer(time.Until(start.Add(h.cfg.Every)))
	defer t.Stop()
	for {
		select {
		case err := <-done:
			returned = true
			return ctx.Err() == nil, err
		case <-ctx.Done():
			return false, nil
		case <-t.C:
		}
		start = time.Now()
		held, err := h.acquire(ctx)
		switch {
		case ctx.Err() != nil:
			return false, nil
		case err != nil:
			h.log.Info("lease lost: renewing it failed; stepping down", "err", err)
			return false, nil
		case !held:
			h.log.Info("lease lost: another process holds it; stepping down")
			return false, nil
		}
		t.Reset(time.Until(start.Add(h.cfg.Every)))
	}
}

// acquire takes or renews the lease, waiting at most Every for the store:
// a renewal begun at most Every after the last one that passed, and
// answered within Every, keeps the term inside the lease (TTL ≥ 2 Every).
func (h *Holder) acquire(ctx context.Context) (bool, error) {
	actx, cancel := context.WithTimeout(ctx, h.cfg.Every)
	defer cancel()
	return h.st.AcquireLease(actx, h.cfg.Name, h.cfg.Owner, h.cfg.TTL)
}

// release gives the lease up, on a context of its own (ctx may have
// ended), for at most Every. It is a no-op in the store when this process
// does not hold the lease.
func (h *Holder) release(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.Every)
	defer cancel()
	if err := h.st.ReleaseLease(rctx, h.cfg.Name, h.cfg.Owner); err != nil {
		h.log.Warn("releasing the lease failed: another process takes over once it runs out", "err", err, "ttl", h.cfg.TTL)
	}
}

// sleepUntil waits until t or ctx's end; it reports false when ctx ended.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
