// Package tracing is core.Tracer on OpenTelemetry: spans are batched and
// sent by OTLP, over HTTP (protobuf) or gRPC as the OTLP protocol
// variables say (Protocol), to the collector the standard
// OTEL_EXPORTER_OTLP_* variables name (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, …; the
// exporter reads them itself), and the resource carries
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. It also offers the
// log/slog handler that names a line's trace.
//
// Each Tracer has a provider of its own (no global is set), so that
// several processes' worth of Baton can share one test binary.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/baton-bot/baton/core"
)

// Config configures a Tracer.
type Config struct {
	// Service is the service.name unless OTEL_SERVICE_NAME says otherwise
	// ("baton").
	Service string
	// Role is the process's command (serve, gateway, worker, run),
	// recorded as the resource attribute baton.role.
	Role    string
	Version string
	// Protocol is the OTLP protocol (Protocol's result): "" or
	// http/protobuf for HTTP, grpc for gRPC.
	Protocol string
	// Exporter replaces the OTLP exporter (tests); nil: OTLP by Protocol.
	Exporter sdktrace.SpanExporter
}

// Tracer is core.Tracer on an OpenTelemetry SDK provider.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TraceContext
}

var _ core.Tracer = (*Tracer)(nil)

// New returns a tracer exporting as cfg says. Nothing is sent before the
// first span ends; an unreachable collector costs dropped spans and a
// logged error from the SDK, never a failed job.
func New(ctx context.Context, cfg Config) (*Tracer, error) {
	if cfg.Service == "" {
		cfg.Service = "baton"
	}
	exp := cfg.Exporter
	if exp == nil {
		var err error
		switch cfg.Protocol {
		case ProtocolGRPC:
			exp, err = otlptracegrpc.New(ctx)
		case "", ProtocolHTTP:
			exp, err = otlptracehttp.New(ctx)
		default:
			err = fmt.Errorf("OTLP protocol %q: %w", cfg.Protocol, ErrProtocol)
		}
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.Service)}
	if cfg.Role != "" {
		attrs = append(attrs, attribute.String("baton.role", cfg.Role))
	}
	if cfg.Version != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.Version))
	}
	// The environment's attributes come last: they win.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracer{provider: p, tracer: p.Tracer("github.com/baton-bot/baton")}, nil
}

// Shutdown sends the spans still batched and stops the exporter.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("trace exporter shutdown: %w", err)
	}
	return nil
}

// Start implements core.Tracer.
func (t *Tracer) Start(ctx context.Context, name string, attrs ...core.Attr) (context.Context, core.Span) {
	ctx, s := t.tracer.Start(ctx, name, trace.WithAttributes(convert(attrs)...))
	return ctx, span{s}
}

// TraceParent implements core.Tracer.
func (t *Tracer) TraceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	t.prop.Inject(ctx, c)
	return c.Get("traceparent")
}

// WithTraceParent implements core.Tracer.
func (t *Tracer) WithTraceParent(ctx context.Context, tp string) context.Context {
	return t.prop.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}

// TraceID implements core.Tracer.
func (t *Tracer) TraceID(ctx context.Context) string { return traceID(ctx) }

func traceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

type span struct{ s trace.Span }

func (s span) SetAttributes(attrs ...core.Attr) { s.s.SetAttributes(convert(attrs)...) }

func (s span) Fail(err error) {
	if err == nil {
		return
	}
	s.s.RecordError(err)
	s.s.SetStatus(codes.Error, firstLine(err.Error()))
}

func (s span) End() { s.s.End() }

func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

func convert(attrs []core.Attr) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(attrs))
	for _, a := range attrs {
		switch v := a.Value.(type) {
		case string:
			out = append(out, attribute.String(a.Key, v))
		case bool:
			out = append(out, attribute.Bool(a.Key, v))
		case int:
			out = append(out, attribute.Int(a.Key, v))
		case int64:
			out = append(out, attribute.Int64(a.Key, v))
		case float64:
			out = append(out, attribute.Float64(a.Key, v))
		default:
			out = append(out, attribute.String(a.Key, fmt.Sprint(v)))
		}
	}
	return out
}

// LogHandler wraps h so that a record logged with a context holding a
// span carries core.TraceIDKey, unless the logger already names a trace
// (core.TraceLogger).
func LogHandler(h slog.Handler) slog.Handler { return &logHandler{h: h} }

type logHandler struct {
	h   slog.Handler
	has bool // the logger's attributes name a trace already
}

func (l *logHandler) Enabled(ctx context.Context, lv slog.Level) bool { return l.h.Enabled(ctx, lv) }

func (l *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if !l.has {
		if id := traceID(ctx); id != "" {
			r = r.Clone()
			r.AddAttrs(slog.String(core.TraceIDKey, id))
		}
	}
	return l.h.Handle(ctx, r)
}

func (l *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	has := l.has
	for _, a := range attrs {
		has = has || a.Key == core.TraceIDKey
	}
	return &logHandler{h: l.h.WithAttrs(attrs), has: has}
}

func (l *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{h: l.h.WithGroup(name), has: l.has}
}

// The OTLP protocols the exporter speaks.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// ErrProtocol is returned by Protocol for an OTLP protocol the exporter
// does not speak.
var ErrProtocol = errors.New("the OTLP protocols spoken are http/protobuf and grpc")

// Protocol is the OTLP protocol that the OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
// or OTEL_EXPORTER_OTLP_PROTOCOL variable asks for (the first set wins):
// http/protobuf when neither is set, grpc, or an error wrapping
// ErrProtocol for another (http/json).
func Protocol(traces, all string) (string, error) {
	p := traces
	if p == "" {
		p = all
	}
	switch p {
	case "", ProtocolHTTP:
		return ProtocolHTTP, nil
	case ProtocolGRPC:
		return ProtocolGRPC, nil
	}
	return "", fmt.Errorf("OTLP protocol %q: %w", p, ErrProtocol)
}
