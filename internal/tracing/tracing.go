package tracing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Exporter says where spans go.
type Exporter string

// Exporters.
const (
	// Off makes no spans at all (the default).
	Off Exporter = "off"
	// OTLP exports by OTLP, HTTP or gRPC, configured by the standard
	// OTEL_EXPORTER_OTLP_* variables.
	OTLP Exporter = "otlp"
	// Stdout writes spans as JSON to Options.Stdout (the dev command's).
	Stdout Exporter = "stdout"
)

// ParseExporter parses off, otlp or stdout ("" is off).
func ParseExporter(s string) (Exporter, error) {
	switch e := Exporter(strings.ToLower(strings.TrimSpace(s))); e {
	case "", Off:
		return Off, nil
	case OTLP, Stdout:
		return e, nil
	}
	return "", errors.New("want off, otlp or stdout")
}

// DefaultSampleRatio is the share of records without a sampled parent
// that are traced when tracing is on: every one. A busy bridge lowers it
// (0.1 costs about a tenth of tracing them all).
const DefaultSampleRatio = 1.0

// InstrumentationName names the tracer of every span the bridge makes.
const InstrumentationName = "github.com/loyalty-bridge/loyalty-bridge"

// Options configures New. The zero value is tracing off.
type Options struct {
	Exporter Exporter
	// SampleRatio, in [0, 1], is the probability that a record whose
	// producer sent no traceparent is traced; a record with one follows
	// its sampled flag. 0 traces only records whose producer sampled them.
	SampleRatio float64
	// Stdout receives the Stdout exporter's spans (nil: os.Stdout).
	Stdout io.Writer
	// ServiceName is the resource's service.name unless OTEL_SERVICE_NAME
	// sets it (default "loyalty-bridge").
	ServiceName string
	// Getenv reads OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL (default
	// os.Getenv). The exporters read their other variables themselves.
	Getenv func(string) string
	// SpanProcessor, when set, receives the spans instead of an exporter
	// of Exporter's (tests: an in-memory recorder).
	SpanProcessor sdktrace.SpanProcessor
}

// Validate reports what New would refuse.
func (o Options) Validate() error {
	var errs []error
	if _, err := ParseExporter(string(o.Exporter)); err != nil {
		errs = append(errs, fmt.Errorf("exporter %q: %w", o.Exporter, err))
	}
	if !(o.SampleRatio >= 0 && o.SampleRatio <= 1) { // NaN included
		errs = append(errs, fmt.Errorf("sample ratio %v: want a number from 0 to 1", o.SampleRatio))
	}
	return errors.Join(errs...)
}

// Provider is a running tracer provider. A nil *Provider is tracing off:
// every method works and does nothing.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// New starts a tracer provider, or returns nil when o.Exporter is Off.
// Connections to an OTLP collector are made lazily: a collector that is
// down costs dropped spans, never a failed start. Shutdown flushes it.
func New(ctx context.Context, o Options) (*Provider, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	exp, _ := ParseExporter(string(o.Exporter))
	if exp == Off {
		return nil, nil
	}
	sp := o.SpanProcessor
	if sp == nil {
		e, err := exporter(ctx, exp, o)
		if err != nil {
			return nil, err
		}
		sp = sdktrace.NewBatchSpanProcessor(e)
	}
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
	return &Provider{tp: tp, tracer: tp.Tracer(InstrumentationName)}, nil
}

// exporter builds the span exporter of e.
func exporter(ctx context.Context, e Exporter, o Options) (sdktrace.SpanExporter, error) {
	if e == Stdout {
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
	proto, err := Protocol(getenv)
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

// Protocol is the OTLP protocol the standard variables choose:
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
// else http/protobuf. http/json is refused: the Go exporter does not
// speak it.
func Protocol(getenv func(string) string) (string, error) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		switch p := strings.TrimSpace(getenv(v)); p {
		case "":
			continue
		case "grpc", "http/protobuf":
			return p, nil
		default:
			return "", fmt.Errorf("%s %q: want grpc or http/protobuf", v, p)
		}
	}
	return "http/protobuf", nil
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
	t := kotel.NewTracer(kotel.TracerProvider(p.tp), kotel.TracerPropagator(propagation.TraceContext{}),
		kotel.ConsumerGroup(group), kotel.KeyFormatter(noKey))
	return []kgo.Opt{kgo.WithHooks(kotel.NewKotel(kotel.WithTracer(t)).Hooks()...)}
}

// errNoKey leaves a record's key out of kotel's spans.
var errNoKey = errors.New("record keys are not traced")

func noKey(*kgo.Record) (string, error) { return "", errNoKey }

// Propagator reads and writes the W3C traceparent.
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

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
