package tokensource

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing"
)

// startGrant starts a grant's span (nil with tracing off).
func (c *Cache) startGrant(ctx context.Context) (context.Context, trace.Span) {
	if c.opts.Tracer == nil {
		return ctx, nil
	}
	return c.opts.Tracer.Start(ctx, tracing.SpanTokenGrant, trace.WithSpanKind(trace.SpanKindClient))
}

// endGrant ends span with the grant's result: its kind only, never the
// error's text, which may quote the identity provider's answer.
func endGrant(span trace.Span, err error) {
	if span == nil {
		return
	}
	result := "ok"
	switch {
	case err != nil && IsTransient(err):
		result = "transient"
	case err != nil:
		result = "refused"
	}
	span.SetAttributes(attribute.String(tracing.AttrTokenResult, result))
	if err != nil {
		span.SetStatus(codes.Error, result)
	}
	span.End()
}
