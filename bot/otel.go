package main

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/baton-bot/baton/core/tracing"
)

// traceLogs returns the process's logger as otel.enabled wants it: with
// trace_id on every line logged with a span's context; logger itself when
// tracing is off. It refuses an OTLP protocol the exporter does not speak.
func (m *Main) traceLogs(cfg Config, logger *slog.Logger) (*slog.Logger, error) {
	if !cfg.Otel.Enabled {
		return logger, nil
	}
	if err := tracing.CheckProtocol(m.Env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), m.Env("OTEL_EXPORTER_OTLP_PROTOCOL")); err != nil {
		return nil, &ConfigError{Key: "otel.enabled", Msg: err.Error()}
	}
	return slog.New(tracing.LogHandler(logger.Handler())), nil
}

// startTracer sets sys.tracer up when otel.enabled: an OTLP exporter that
// the standard OTEL_EXPORTER_OTLP_* variables configure, flushed when sys
// closes (last: after the workers stopped; for at most 10 s, so that a
// collector that does not answer does not hold the stop up). With tracing off nothing is
// built and sys.tracer stays nil.
func (sys *system) startTracer(ctx context.Context, role string) error {
	if !sys.cfg.Otel.Enabled {
		return nil
	}
	t, err := tracing.New(ctx, tracing.Config{Role: role})
	if err != nil {
		return &ConfigError{Key: "otel.enabled", Msg: err.Error()}
	}
	sys.tracer = t
	// The SDK reports a failed export through its process-wide handler:
	// into the process's log, not bare on stderr.
	log := sys.log
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("trace export failed; spans dropped", "err", err) }))
	log.Info("OpenTelemetry tracing on: spans go by OTLP over HTTP where OTEL_EXPORTER_OTLP_* say", "role", role)
	sys.closers = append(sys.closers, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return t.Shutdown(ctx)
	})
	return nil
}
