package bridge

import (
	"context"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing"
)

// With tracing off (no Tracer) the span helpers on the record's path make
// nothing: no span, no context, no attribute. A no-op tracer instead
// would allocate a context per span.
func TestTracingOffAllocatesNothing(t *testing.T) {
	b := &Bridge{}
	ctx := context.Background()
	ev := &events.PurchaseCompleted{TransactionID: "t-1"}
	r := &events.LoyaltyResult{Outcome: events.OutcomeApplied}
	n := testing.AllocsPerRun(100, func() {
		c, sp := b.span(ctx, tracing.SpanAttempt)
		if s := recording(sp); s != nil {
			t.Fatal("a span with tracing off")
		}
		traceEvent(sp, ev)
		traceResult(sp, r, 1)
		traceError(sp, events.CategoryInternal, 1)
		endSpan(sp, nil)
		if c != ctx {
			t.Fatal("a new context with tracing off")
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per record step with tracing off, want 0", n)
	}
}
