package tracing

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/baton-bot/baton/core"
)

func newTracer(t *testing.T) (*Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tr, err := New(context.Background(), Config{Role: "test", Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr, exp
}

// TestTraceParentCrossesTracers: a span started in one tracer from the
// traceparent of another's (two processes) is its child in one trace.
func TestTraceParentCrossesTracers(t *testing.T) {
	gw, gwExp := newTracer(t)
	wk, wkExp := newTracer(t)
	ctx, root := gw.Start(context.Background(), "message.received")
	tp := gw.TraceParent(ctx)
	root.End()
	if !strings.HasPrefix(tp, "00-"+gw.TraceID(ctx)+"-") {
		t.Fatalf("traceparent %q; trace id %q", tp, gw.TraceID(ctx))
	}
	wctx, attempt := wk.Start(wk.WithTraceParent(context.Background(), tp), "job.attempt", core.Attr{Key: "baton.job.id", Value: int64(7)})
	attempt.Fail(errors.New("the model is unavailable\nstack"))
	attempt.End()
	if got := wk.TraceID(wctx); got != gw.TraceID(ctx) {
		t.Errorf("worker trace %s; want %s", got, gw.TraceID(ctx))
	}
	_ = gw.provider.ForceFlush(context.Background())
	_ = wk.provider.ForceFlush(context.Background())
	g, w := gwExp.GetSpans(), wkExp.GetSpans()
	if len(g) != 1 || len(w) != 1 {
		t.Fatalf("spans: gateway %d, worker %d", len(g), len(w))
	}
	if w[0].Parent.SpanID() != g[0].SpanContext.SpanID() || !w[0].Parent.IsRemote() {
		t.Errorf("attempt's parent %v; want the message span %v (remote)", w[0].Parent.SpanID(), g[0].SpanContext.SpanID())
	}
	if w[0].Status.Description != "the model is unavailable" {
		t.Errorf("status %+v", w[0].Status)
	}
	if ctx := wk.WithTraceParent(context.Background(), "not a traceparent"); wk.TraceID(ctx) != "" {
		t.Error("a malformed traceparent gave a trace")
	}
}

// TestLogHandler: a line logged with a span's context names its trace,
// once; a line without one, none.
func TestLogHandler(t *testing.T) {
	tr, _ := newTracer(t)
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewTextHandler(&buf, nil)))
	ctx, span := tr.Start(context.Background(), "job.attempt")
	defer span.End()
	id := tr.TraceID(ctx)
	log.InfoContext(ctx, "with")
	log.Info("without")
	core.TraceLogger(ctx, tr, log).InfoContext(ctx, "scoped")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines:\n%s", buf.String())
	}
	if strings.Count(lines[0], "trace_id="+id) != 1 || strings.Contains(lines[1], "trace_id") || strings.Count(lines[2], "trace_id=") != 1 || !strings.Contains(lines[2], id) {
		t.Errorf("lines:\n%s", buf.String())
	}
}

func TestProtocol(t *testing.T) {
	for _, c := range []struct {
		traces, all, want string
	}{
		{"", "", ProtocolHTTP}, {"", "http/protobuf", ProtocolHTTP}, {"http/protobuf", "grpc", ProtocolHTTP},
		{"", "grpc", ProtocolGRPC}, {"grpc", "", ProtocolGRPC}, {"grpc", "http/json", ProtocolGRPC},
		{"", "http/json", ""}, {"http/json", "grpc", ""},
	} {
		got, err := Protocol(c.traces, c.all)
		if got != c.want || (c.want == "") != errors.Is(err, ErrProtocol) {
			t.Errorf("Protocol(%q, %q) = %q, %v; want %q", c.traces, c.all, got, err, c.want)
		}
	}
}
