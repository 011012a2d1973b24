// Package provider runs the tracer provider that package tracing
// describes: the OTLP (HTTP or gRPC) or stdout exporter, the parent-based
// ratio sampler, the resource, and the franz-go hooks (kotel) that trace
// the records a Kafka client fetches and produces. It is apart from
// package tracing so that the packages that only name spans (the bridge,
// the partner client, the token cache, the configuration) do not link the
// SDK, the exporters and gRPC: only the service, which starts tracing,
// imports this one.
//
// New returns a nil *Provider when tracing is off; every method of a nil
// Provider works and does nothing. The package never logs.
package provider
