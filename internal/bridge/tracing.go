package bridge

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing"
)

// Traces (Options.Tracer). Everything here is skipped, at the cost of a
// nil check, when tracing is off: Handle goes straight to handle, and the
// helpers return before they make a span, a context or an attribute.

// handleTraced is Handle with a "<topic> process" span around the
// record's handling. Its parent is the span the Kafka client's tracing
// hook put in rec.Context (the record's receive span, itself a child of
// the producer's traceparent); without one, the input's traceparent when
// carriedHeaders would copy it (the first, well-formed). Every output
// carries the process span in its Context, for the client's publish span,
// whose context the hook writes to its traceparent header; without the
// hook, the process span's is written there. Either replaces the copied
// one: the reply continues the trace.
func (b *Bridge) handleTraced(ctx context.Context, rec *kgo.Record, m pipeline.Meta) ([]*kgo.Record, error) {
	parent := trace.SpanContextFromContext(rec.Context)
	fromHook := parent.IsValid()
	if !fromHook {
		parent = incomingTrace(rec.Headers)
	}
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	ctx, span := b.o.Tracer.Start(ctx, rec.Topic+tracing.SpanProcess, trace.WithSpanKind(trace.SpanKindConsumer))
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrMessagingSystem, "kafka"),
			attribute.String(tracing.AttrMessagingDestination, rec.Topic),
			attribute.String(tracing.AttrMessagingOperation, "process"),
			attribute.Int(tracing.AttrMessagingPartition, int(rec.Partition)),
			attribute.Int64(tracing.AttrMessagingOffset, rec.Offset))
	}
	outs, err := b.handle(ctx, rec, m)
	if err != nil {
		span.SetStatus(codes.Error, "abandoned")
		return outs, err
	}
	// A client with the tracing hook (its span in rec.Context) writes the
	// publish span's traceparent over whatever the output carries; one
	// without (replay's) gets the process span's from here.
	tp := ""
	if !fromHook {
		tp = traceparentOf(ctx)
	}
	for _, o := range outs {
		o.Context = ctx
		if tp != "" {
			setHeader(o, HeaderTraceparent, tp)
		}
	}
	return outs, nil
}

// incomingTrace is the span context of rec's first traceparent header when
// it is well-formed (the one an output copies), else the invalid zero.
func incomingTrace(hs []kgo.RecordHeader) trace.SpanContext {
	for _, h := range hs {
		if h.Key != HeaderTraceparent {
			continue
		}
		if !validTraceparent(h.Value) {
			return trace.SpanContext{}
		}
		ctx := tracing.Propagator().Extract(context.Background(), propagation.MapCarrier{HeaderTraceparent: string(h.Value)})
		return trace.SpanContextFromContext(ctx)
	}
	return trace.SpanContext{}
}

// traceparentOf is ctx's span context as a traceparent ("" when invalid).
func traceparentOf(ctx context.Context) string {
	c := propagation.MapCarrier{}
	tracing.Propagator().Inject(ctx, c)
	return c[HeaderTraceparent]
}

// setHeader replaces the first header key of r, or adds it.
func setHeader(r *kgo.Record, key, value string) {
	for i := range r.Headers {
		if r.Headers[i].Key == key {
			r.Headers[i].Value = []byte(value)
			return
		}
	}
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

// span starts a child span of ctx named name, or returns ctx and nil when
// tracing is off. Callers set attributes only on a recording span: a
// variadic argument would be allocated even when off.
func (b *Bridge) span(ctx context.Context, name string) (context.Context, trace.Span) {
	if b.o.Tracer == nil {
		return ctx, nil
	}
	return b.o.Tracer.Start(ctx, name)
}

// recording is span when it records, else nil.
func recording(span trace.Span) trace.Span {
	if span == nil || !span.IsRecording() {
		return nil
	}
	return span
}

// endSpan ends span (nil: off), marking it failed when err is set.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

// traceEvent names the decoded event on the record's process span.
func traceEvent(span trace.Span, ev events.Event) {
	if span = recording(span); span != nil {
		span.SetAttributes(attribute.String(tracing.AttrEventType, string(ev.Type())),
			attribute.String(tracing.AttrTransactionID, ev.ID()))
	}
}

// traceResult and traceError record the record's answer on its process
// span: the outcome or the error's category and reason, and the attempts.
func traceResult(span trace.Span, r *events.LoyaltyResult, attempts int) {
	if span = recording(span); span != nil {
		span.SetAttributes(attribute.String(tracing.AttrOutcome, string(r.Outcome)),
			attribute.Int(tracing.AttrRecordAttempts, attempts))
	}
}

func traceError(span trace.Span, cat events.Category, attempts int) {
	if span = recording(span); span != nil {
		span.SetAttributes(attribute.String(tracing.AttrOutcome, "error"),
			attribute.String(tracing.AttrErrorCategory, string(cat)),
			attribute.Int(tracing.AttrRecordAttempts, attempts))
		span.SetStatus(codes.Error, string(cat))
	}
}

// wait is sleep inside a "retry wait" span saying how long (tracing on).
func (b *Bridge) wait(ctx context.Context, d time.Duration) error {
	_, span := b.span(ctx, tracing.SpanRetryWait)
	if s := recording(span); s != nil {
		s.SetAttributes(attribute.Int64(tracing.AttrRecordWait, d.Milliseconds()))
	}
	err := sleep(ctx, d)
	endSpan(span, nil)
	return err
}
