package config

import (
	"errors"
	"fmt"

	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing"
)

// Tracing is where OpenTelemetry traces go (package tracing): off, OTLP
// (endpoint, protocol, headers and TLS from the standard
// OTEL_EXPORTER_OTLP_* variables) or stdout, and the share of records
// without a sampled parent that are traced.
type Tracing struct {
	Exporter    tracing.Exporter
	SampleRatio float64

	exporter *choice[tracing.Exporter]
}

// Define defines the section's flags on b's flag set and binds them.
func (t *Tracing) Define(b *flagenv.Binder) {
	fs := b.FlagSet()
	t.exporter = defineChoice(fs, &t.Exporter, "tracing", tracing.Off, tracing.ParseExporter,
		"OpenTelemetry traces of each record: off, otlp (to the collector the standard OTEL_EXPORTER_OTLP_* variables name; protocol http/protobuf, or grpc with OTEL_EXPORTER_OTLP_PROTOCOL=grpc) or stdout (JSON spans on standard output)")
	fs.Float64Var(&t.SampleRatio, "tracing-sample-ratio", tracing.DefaultSampleRatio,
		"with --tracing: the share, from 0 to 1, of records whose producer sent no traceparent that are traced; a record with one follows its sampled flag (parent-based; OTEL_TRACES_SAMPLER is not read)")
}

// Validate reports every problem of the section, each naming its flag.
func (t *Tracing) Validate() error {
	var errs []error
	if err := t.exporter.check("tracing"); err != nil {
		errs = append(errs, err)
	}
	if !(t.SampleRatio >= 0 && t.SampleRatio <= 1) {
		errs = append(errs, fmt.Errorf("--tracing-sample-ratio %v: want a number from 0 to 1", t.SampleRatio))
	}
	return errors.Join(errs...)
}

// Build returns the tracing options (the caller adds a writer for stdout).
func (t *Tracing) Build() tracing.Options {
	return tracing.Options{Exporter: t.Exporter, SampleRatio: t.SampleRatio}
}
