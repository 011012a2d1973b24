package loyalty

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing"
)

// attemptSpan is one HTTP attempt's span ("partner <endpoint>"). Its zero
// value, tracing off, does nothing and costs nothing.
type attemptSpan struct{ span trace.Span }

// startAttempt starts attempt n of a call to ep as a child of ctx's span;
// with tracing off it returns ctx itself.
func (c *Client) startAttempt(ctx context.Context, ep endpoint, n int) (context.Context, attemptSpan) {
	if c.tracer == nil {
		return ctx, attemptSpan{}
	}
	ctx, sp := c.tracer.Start(ctx, tracing.SpanPartnerPrefix+ep.name, trace.WithSpanKind(trace.SpanKindClient))
	if sp.IsRecording() {
		// The path's template, never the URL: a path parameter is a
		// loyaltyId, and the query may carry anything.
		sp.SetAttributes(attribute.String(tracing.AttrEndpoint, ep.name), attribute.Int(tracing.AttrHTTPAttempt, n),
			attribute.String(tracing.AttrHTTPMethod, ep.method))
	}
	return ctx, attemptSpan{sp}
}

// answered records what the attempt got: a status, or the kind of failure
// (never its text, which may quote the partner).
func (s attemptSpan) answered(res attemptResult) {
	if s.span == nil || !s.span.IsRecording() {
		return
	}
	switch {
	case res.err != nil:
		s.span.SetAttributes(attribute.String(tracing.AttrErrorType, errorType(res.err)))
		s.span.SetStatus(codes.Error, "no answer")
	case res.status != 0:
		s.span.SetAttributes(attribute.Int(tracing.AttrHTTPStatusCode, res.status))
		if res.status >= 400 {
			s.span.SetAttributes(attribute.String(tracing.AttrErrorType, strconv.Itoa(res.status)))
			s.span.SetStatus(codes.Error, "")
		}
	}
}

// end ends the span; wait is the back-off before the call's next attempt
// (0: none follows).
func (s attemptSpan) end(wait time.Duration) {
	if s.span == nil {
		return
	}
	if wait > 0 && s.span.IsRecording() {
		s.span.SetAttributes(attribute.Int64(tracing.AttrRecordWait, wait.Milliseconds()))
	}
	s.span.End()
}

// errorType names a transport failure without its text.
func errorType(err error) string {
	switch {
	case errors.Is(err, errAttemptTimeout):
		return "timeout"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "transport"
}
