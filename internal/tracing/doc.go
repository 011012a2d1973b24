// Package tracing describes the bridge's OpenTelemetry traces: the
// settings (Options: exporter, sample ratio; the OTLP protocol the
// standard variables choose) and the names of the spans and attributes
// the other packages make, which are a contract for whoever reads the
// traces (dashboards, the README's list). Package tracing/provider runs
// them: the tracer provider (exporter, sampler, resource) and the
// franz-go hooks (kotel) that trace the records a Kafka client fetches and
// produces. This package is light (it links no SDK and no exporter), so
// that whatever names a span or reads a setting can import it.
//
// Off is the default and costs nothing on the hot path: provider.New
// returns a nil *Provider, whose Tracer is nil and whose KafkaOpts are
// none, so no hook runs and no span, context or attribute is made. The packages that make
// spans (internal/bridge, internal/loyalty, internal/tokensource) take a
// trace.Tracer that is nil when tracing is off and check it before anything
// else: a no-op tracer would still allocate a context per span.
//
// The exporter is OTLP, over HTTP (protobuf) or gRPC as the standard
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL says
// (default http/protobuf), with its endpoint, headers, TLS, compression and
// timeout read by the OTLP exporters from the standard OTEL_EXPORTER_OTLP_*
// variables; or stdout (the dev command's), which writes spans as JSON
// lines to a writer. Sampling is parent-based: a record whose producer's
// traceparent says sampled is traced, one that says not sampled is not,
// and a record without one is traced with the probability SampleRatio
// (--tracing-sample-ratio). OTEL_TRACES_SAMPLER and its argument are not
// read: the flag is the one place the ratio is set.
//
// No span name or attribute carries personal data or a secret: names are
// fixed strings, attributes are topics, partitions, offsets, event types,
// transactionIds, endpoint names, statuses, attempt counts and waits. The
// records' keys (a loyaltyId, or whatever a producer chose) are left out of
// kotel's spans. The package never logs.
package tracing
