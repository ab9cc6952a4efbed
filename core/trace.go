package core

import (
	"context"
	"log/slog"
)

// Tracer starts the spans that tell a job's story as a trace: the message
// a gateway took, each attempt of the job, its movements, model requests
// and tool calls. The trace crosses processes with the job: the gateway
// records its span's W3C traceparent as the job's EventTrace event, and
// the worker that claims the job continues from it. core/tracing
// implements it with OpenTelemetry; a nil Tracer (tracing off) is valid
// wherever one is taken and costs nothing. Implementations are safe for
// concurrent use.
type Tracer interface {
	// Start starts a span named name as a child of ctx's span (or of the
	// remote parent WithTraceParent put in ctx), and returns ctx with it.
	Start(ctx context.Context, name string, attrs ...Attr) (context.Context, Span)
	// TraceParent returns the W3C traceparent of ctx's span; "" when ctx
	// has none.
	TraceParent(ctx context.Context) string
	// WithTraceParent returns ctx carrying tp, a W3C traceparent, as the
	// remote parent of the next span started; ctx itself when tp is not a
	// valid traceparent.
	WithTraceParent(ctx context.Context, tp string) context.Context
	// TraceID returns the trace id (32 hex digits) of ctx's span; "" when
	// ctx has none.
	TraceID(ctx context.Context) string
}

// Span is one timed operation of a trace. Its methods may be called once
// it ended; they then do nothing.
type Span interface {
	SetAttributes(attrs ...Attr)
	// Fail marks the span failed with err (nil: nothing).
	Fail(err error)
	End()
}

// Attr is a span attribute; Value is a string, bool, int, int64 or
// float64 (anything else is recorded as its fmt form).
type Attr struct {
	Key   string
	Value any
}

// EventTrace is the job event whose detail is the W3C traceparent of the
// span that created the job: the worker's attempt spans are its children.
const EventTrace = "trace"

// StartSpan starts a span with t, or none when t is nil: it returns ctx
// and a span that does nothing, allocating nothing. Attributes passed to
// it are still built by the caller: a hot path with tracing off checks
// for a nil Tracer first.
func StartSpan(ctx context.Context, t Tracer, name string, attrs ...Attr) (context.Context, Span) {
	if t == nil {
		return ctx, noSpan{}
	}
	return t.Start(ctx, name, attrs...)
}

// TraceLogger returns log with the trace_id of ctx's span, so that every
// line a job's logger writes names its trace; log itself when t is nil or
// ctx has no span.
func TraceLogger(ctx context.Context, t Tracer, log *slog.Logger) *slog.Logger {
	if t == nil {
		return log
	}
	if id := t.TraceID(ctx); id != "" {
		return log.With(TraceIDKey, id)
	}
	return log
}

// TraceIDKey is the log attribute that names a line's trace.
const TraceIDKey = "trace_id"

type noSpan struct{}

func (noSpan) SetAttributes(...Attr) {}
func (noSpan) Fail(error)            {}
func (noSpan) End()                  {}

// TraceIDOf returns the trace id (32 hex digits) of tp, a W3C traceparent
// such as an EventTrace event's detail; "" when tp is not one. Readers of
// the job history (the dashboard, the CLI) show it without a tracer.
func TraceIDOf(tp string) string {
	// version "-" trace id (32) "-" parent id (16) "-" flags (2)
	if len(tp) != 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return ""
	}
	id := tp[3:35]
	zero := true
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return ""
		}
		zero = zero && c == '0'
	}
	if zero {
		return ""
	}
	return id
}
