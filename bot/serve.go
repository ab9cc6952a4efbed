package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/baton-bot/baton/adapters/api"
	"github.com/baton-bot/baton/core"
)

// serveAll runs `baton serve`: the conversation service with its
// deliverers and entry points, the workers, and HTTP, in one process, until
// ctx ends; then it stops taking requests, lets running jobs finish for
// workers.shutdown_grace and requeues the rest.
func (m *Main) serveAll(ctx context.Context) error {
	for key, on := range map[string]bool{"slack.enabled": m.Config.Slack.Enabled, "discord.enabled": m.Config.Discord.Enabled} {
		if on {
			return &exitError{code: exitInternal, err: fmt.Errorf("baton serve: %s: the adapter is not available yet", key)}
		}
	}
	sys, err := newSystem(ctx, m.Config, m.Logger, systemOptions{converse: true})
	if err != nil {
		return m.systemErr("serve", err)
	}
	defer sys.Close()

	ln, err := net.Listen("tcp", m.Config.HTTP.Addr)
	if err != nil {
		return &exitError{code: exitInternal, err: fmt.Errorf("baton serve: http.addr %s: %w", m.Config.HTTP.Addr, err)}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := sys.store.Ping(rctx); err != nil {
			http.Error(w, "store: unreachable", http.StatusServiceUnavailable)
			return
		}
		if err := sys.queue.Ping(rctx); err != nil {
			http.Error(w, "queue: unreachable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	if token := m.Config.API.Token.Reveal(); token != "" {
		mux.Handle("/api/", api.New(sys.chat, sys.store, api.Config{Token: token, Logger: m.Logger}).Handler())
		sys.deliver(workCtx, core.PlatformAPI, api.Poster{})
		m.Logger.Info("task API on", "addr", ln.Addr().String())
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = sys.rec.Run(workCtx)
	}()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	poolDone := make(chan struct{})
	go func() {
		defer wg.Done()
		defer close(poolDone)
		_ = sys.pool.Run(runCtx) // graceful once runCtx ends
	}()
	httpErr := make(chan error, 1)
	go func() { httpErr <- srv.Serve(ln) }()
	m.Logger.Info("baton serve started", "http", ln.Addr().String(), "queue", queueKind(m.Config), "workers", m.Config.Workers.Concurrency)

	select {
	case <-ctx.Done():
	case err := <-httpErr:
		if !errors.Is(err, http.ErrServerClosed) {
			m.Logger.Error("HTTP server failed", "err", err)
		}
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	stopRun()
	<-poolDone
	stopWork()
	wg.Wait()
	m.Logger.Info("baton serve stopped")
	return nil
}

func queueKind(cfg Config) string {
	if cfg.Redis.URL == "" {
		return "in-process"
	}
	return "redis"
}
