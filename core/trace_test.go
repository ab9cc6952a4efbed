package core

import (
	"context"
	"log/slog"
	"testing"
)

func TestTraceIDOf(t *testing.T) {
	for tp, want := range map[string]string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "4bf92f3577b34da6a3ce929d0e0e4736",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": "",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01": "",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7":    "",
		"": "",
	} {
		if got := TraceIDOf(tp); got != want {
			t.Errorf("TraceIDOf(%q) = %q; want %q", tp, got, want)
		}
	}
}

// TestNoTracerCostsNothing: with tracing off (a nil Tracer) a span is
// neither built nor allocated, and loggers are left as they are.
func TestNoTracerCostsNothing(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	allocs := testing.AllocsPerRun(100, func() {
		c, span := StartSpan(ctx, nil, "movement")
		span.Fail(nil)
		span.End()
		if c != ctx || TraceLogger(c, nil, log) != log {
			t.Fatal("a nil tracer changed the context or the logger")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per span with tracing off; want 0", allocs)
	}
}
