package main

import (
	"context"
	"log/slog"
	"os"
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
	if _, err := m.otlpProtocol(); err != nil {
		return nil, err
	}
	return slog.New(tracing.LogHandler(logger.Handler())), nil
}

// otlpProtocol is the OTLP protocol the standard variables ask for
// (tracing.Protocol); one the exporter does not speak is a configuration
// error naming it.
func (m *Main) otlpProtocol() (string, error) {
	p, err := tracing.Protocol(m.Env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), m.Env("OTEL_EXPORTER_OTLP_PROTOCOL"))
	if err != nil {
		return "", &ConfigError{Key: "otel.enabled", Msg: err.Error()}
	}
	return p, nil
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
	// The exporter reads the process's OTEL_EXPORTER_OTLP_* variables
	// itself; the protocol comes from the same place.
	protocol, err := tracing.Protocol(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	if err != nil {
		return &ConfigError{Key: "otel.enabled", Msg: err.Error()}
	}
	t, err := tracing.New(ctx, tracing.Config{Role: role, Protocol: protocol})
	if err != nil {
		return &ConfigError{Key: "otel.enabled", Msg: err.Error()}
	}
	sys.tracer = t
	// The SDK reports a failed export through its process-wide handler:
	// into the process's log, not bare on stderr.
	log := sys.log
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("trace export failed; spans dropped", "err", err) }))
	log.Info("OpenTelemetry tracing on: spans go by OTLP where OTEL_EXPORTER_OTLP_* say", "role", role, "protocol", protocol)
	sys.closers = append(sys.closers, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return t.Shutdown(ctx)
	})
	return nil
}
