package bridge_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing"
)

// Without a Kafka client's tracing hook (replay's client), the reply's
// traceparent is the record's process span, in the producer's trace when
// the input's traceparent is one the bridge would copy; a malformed one
// starts a trace of the bridge's own, as carriedHeaders drops it.
func TestReplyTraceparentWithoutHook(t *testing.T) {
	s := newStack(t, stackOpts{})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	b := s.bridge(func(o *bridge.Options) { o.Tracer = tp.Tracer("test") })
	const producerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	for i, tc := range []struct {
		in        string
		sameTrace bool
	}{
		{"00-" + producerTrace + "-00f067aa0ba902b7-01", true},
		{"00-" + strings.ToUpper(producerTrace) + "-00f067aa0ba902b7-01", false}, // not lower-case hex: not copied
	} {
		r := s.handle(b, s.record(topics.Purchase, purchase("tp-"+string(rune('a'+i)), 1, 1000),
			kgo.RecordHeader{Key: "traceparent", Value: []byte(tc.in)}), false)
		got := strings.Split(r.header("traceparent"), "-")
		if len(got) != 4 {
			t.Fatalf("%s: reply traceparent %q", tc.in, r.header("traceparent"))
		}
		var process sdktrace.ReadOnlySpan
		for _, sp := range rec.Ended() {
			if sp.Name() == topics.Purchase+tracing.SpanProcess && sp.SpanContext().SpanID().String() == got[2] {
				process = sp
			}
		}
		if process == nil {
			t.Fatalf("%s: reply traceparent %q names no process span", tc.in, r.header("traceparent"))
		}
		if (got[1] == producerTrace) != tc.sameTrace || (process.Parent().IsValid()) != tc.sameTrace {
			t.Errorf("%s: reply's trace %s, process span's parent %v; want the producer's trace: %v", tc.in, got[1], process.Parent(), tc.sameTrace)
		}
	}
}
