package tracing

import (
	"context"
	"net"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// collector is an OTLP trace receiver over gRPC that keeps the names of
// the spans it is sent.
type collector struct {
	coltrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string // guarded by mu
}

func (c *collector) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				c.names = append(c.names, sp.GetName())
			}
		}
	}
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// TestExportOverGRPC: with the protocol grpc, spans reach a collector
// listening for OTLP over gRPC where OTEL_EXPORTER_OTLP_ENDPOINT says.
func TestExportOverGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	col := &collector{}
	coltrace.RegisterTraceServiceServer(srv, col)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")

	ctx := context.Background()
	tr, err := New(ctx, Config{Role: "test", Protocol: ProtocolGRPC})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.Start(ctx, "job.attempt")
	span.End()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown (the spans' last export): %v", err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.names) != 1 || col.names[0] != "job.attempt" {
		t.Errorf("the collector got spans %v, want [job.attempt]", col.names)
	}
}
