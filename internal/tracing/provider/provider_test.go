package provider_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing/provider"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// spanNames collects the names of the spans a receiver got.
type spanNames struct {
	mu    sync.Mutex
	names []string
}

func (s *spanNames) add(req *coltracepb.ExportTraceServiceRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.names = append(s.names, sp.GetName())
			}
		}
	}
}

func (s *spanNames) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.names, ",")
}

type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	got *spanNames
}

func (g grpcReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.got.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Both OTLP protocols, chosen by the standard variables, deliver a span
// to a receiver of that protocol; Shutdown flushes it.
func TestOTLPProtocols(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			got := &spanNames{}
			var endpoint string
			if protocol == "grpc" {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				srv := grpc.NewServer()
				coltracepb.RegisterTraceServiceServer(srv, grpcReceiver{got: got})
				go func() { _ = srv.Serve(ln) }()
				t.Cleanup(srv.Stop)
				endpoint = "http://" + ln.Addr().String()
			} else {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					var req coltracepb.ExportTraceServiceRequest
					if err := proto.Unmarshal(b, &req); err != nil {
						http.Error(w, err.Error(), http.StatusBadRequest)
						return
					}
					got.add(&req)
					w.Header().Set("Content-Type", "application/x-protobuf")
				}))
				t.Cleanup(srv.Close)
				endpoint = srv.URL
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			p, err := provider.New(ctx, tracing.Options{Exporter: tracing.OTLP, SampleRatio: 1})
			if err != nil {
				t.Fatal(err)
			}
			_, sp := p.Tracer().Start(ctx, "one")
			sp.End()
			if err := p.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if got.String() != "one" {
				t.Fatalf("the receiver got spans %q, want one", got.String())
			}
		})
	}
}

// Off is a nil Provider: no tracer, no Kafka hooks, nothing to shut down.
func TestOffIsNil(t *testing.T) {
	p, err := provider.New(context.Background(), tracing.Options{})
	if err != nil || p != nil {
		t.Fatalf("New(off) = %v, %v; want nil, nil", p, err)
	}
	if p.Tracer() != nil || p.KafkaOpts("g") != nil || p.Shutdown(context.Background()) != nil {
		t.Fatal("a nil Provider does something")
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		o    tracing.Options
		want string
	}{
		{tracing.Options{Exporter: "zipkin"}, `exporter "zipkin": want off, otlp or stdout`},
		{tracing.Options{Exporter: tracing.OTLP, SampleRatio: 1.5}, "sample ratio 1.5: want a number from 0 to 1"},
		{tracing.Options{Exporter: tracing.OTLP, SampleRatio: -0.1}, "sample ratio -0.1"},
	} {
		if _, err := provider.New(context.Background(), tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
	env := map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}
	if _, err := tracing.Protocol(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Errorf("http/json: %v, want refused naming the variable", err)
	}
	env = map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}
	if p, err := tracing.Protocol(func(k string) string { return env[k] }); p != "grpc" || err != nil {
		t.Errorf("the traces variable over the general one: %q, %v", p, err)
	}
}
