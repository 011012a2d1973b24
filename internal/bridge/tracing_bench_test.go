package bridge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// BenchmarkHandlePurchase is one purchase through Handle (decode, the
// accrual over HTTP to the simulator, the result record), with tracing
// off and on: its allocs/op with tracing off are the branch base's
// (tracing costs a nil check then), and on shows what spans cost, for a
// record the ratio leaves out (unsampled) and one it keeps (sampled,
// exported to nowhere by a batch processor).
func BenchmarkHandlePurchase(b *testing.B) {
	s := newStack(b, stackOpts{})
	cases := []struct {
		name  string
		ratio float64 // <0: tracing off
	}{{"tracing=off", -1}, {"tracing=on,unsampled", 0}, {"tracing=on,sampled", 1}}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var mod func(*bridge.Options)
			if tc.ratio >= 0 {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(tc.ratio))),
					sdktrace.WithBatcher(discard{}))
				defer func() { _ = tp.Shutdown(context.Background()) }()
				mod = func(o *bridge.Options) { o.Tracer = tp.Tracer("bench") }
			}
			br := s.bridge(mod)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				rec := s.record(topics.Purchase, &events.PurchaseCompleted{TransactionID: fmt.Sprintf("bench-%s-%d", tc.name, i),
					LoyaltyID: sim.MemberID(1 + i%10), TransactionDate: time.Now(), Amount: 1000, Currency: "VND"})
				out, err := br.Handle(ctx, rec, pipeline.Meta{})
				if err != nil || len(out) != 1 || out[0].Topic != topics.ResultTopic(topics.Purchase) {
					b.Fatalf("Handle: %v, %d outputs", err, len(out))
				}
			}
		})
	}
}

// discard is a span exporter that drops what it gets.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
