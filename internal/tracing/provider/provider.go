package provider

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing"
)

// Provider is a running tracer provider. A nil *Provider is tracing off:
// every method works and does nothing.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// New starts a tracer provider, or returns nil when o.Exporter is Off.
// Connections to an OTLP collector are made lazily: a collector that is
// down costs dropped spans, never a failed start. Shutdown flushes it.
func New(ctx context.Context, o tracing.Options) (*Provider, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	exp, _ := tracing.ParseExporter(string(o.Exporter))
	if exp == tracing.Off {
		return nil, nil
	}
	e, err := exporter(ctx, exp, o)
	if err != nil {
		return nil, err
	}
	sp := sdktrace.NewBatchSpanProcessor(e)
	name := o.ServiceName
	if name == "" {
		name = "loyalty-bridge"
	}
	// Later detectors win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// over the default name.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", name)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && res == nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio))))
	return &Provider{tp: tp, tracer: tp.Tracer(tracing.InstrumentationName)}, nil
}

// exporter builds the span exporter of e.
func exporter(ctx context.Context, e tracing.Exporter, o tracing.Options) (sdktrace.SpanExporter, error) {
	if e == tracing.Stdout {
		w := o.Stdout
		if w == nil {
			w = os.Stdout
		}
		x, err := stdouttrace.New(stdouttrace.WithWriter(w))
		if err != nil {
			return nil, fmt.Errorf("tracing: stdout exporter: %w", err)
		}
		return x, nil
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	proto, err := tracing.Protocol(getenv)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	var x sdktrace.SpanExporter
	if proto == "grpc" {
		x, err = otlptracegrpc.New(ctx)
	} else {
		x, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP %s exporter: %w", proto, err)
	}
	return x, nil
}

// Tracer is the bridge's tracer, nil when tracing is off: callers check
// for nil before they make a span.
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return p.tracer
}

// KafkaOpts are the client options that trace a Kafka client's records
// (none when off): a "<topic> receive" span for each record fetched, a
// child of the traceparent its producer wrote when there is one, put in
// the record's Context; and a "<topic> publish" span for each record
// produced, a child of the span in the record's Context, whose context is
// written to the record's traceparent header (replacing one copied from
// an input). Record keys are left out of the spans: they may be personal
// data. group names the consumer group in the receive spans.
func (p *Provider) KafkaOpts(group string) []kgo.Opt {
	if p == nil {
		return nil
	}
	t := kotel.NewTracer(kotel.TracerProvider(p.tp), kotel.TracerPropagator(tracing.Propagator()),
		kotel.ConsumerGroup(group), kotel.KeyFormatter(noKey))
	return []kgo.Opt{kgo.WithHooks(kotel.NewKotel(kotel.WithTracer(t)).Hooks()...)}
}

// errNoKey leaves a record's key out of kotel's spans.
var errNoKey = errors.New("record keys are not traced")

func noKey(*kgo.Record) (string, error) { return "", errNoKey }

// Shutdown flushes the spans still buffered and stops the provider,
// within ctx.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}
