package tracing

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"go.opentelemetry.io/otel/propagation"
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

// Propagator reads and writes the W3C traceparent.
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }
