// Package service assembles a running loyalty-bridge from its configuration.
//
// The configuration (package config) is parsed and validated by the caller.
//
// New then connects, in the order an operator would check by hand: the
// brokers and input topics (a wrong TLS or SASL setting fails here, not in
// a reconnect loop), the Schema Registry (the codec registers or looks up
// the schemas), the partner identity provider (refused credentials fail;
// an unreachable one only warns, because the circuit breaker holds records
// until the API answers). Run consumes through the pipeline with the
// bridge's handlers and serves /metrics, /healthz and /readyz until its
// context ends, then shuts down gracefully.
//
// With --tracing, Connect starts the tracer provider (package tracing)
// before the partner client, which traces its attempts and token grants;
// the pipeline's Kafka client gets the receive and publish hooks (the
// ledger's and admin clients do not), and Close flushes the last spans.
//
// Deps.WaitingFor tells an operator what records wait for (refused
// credentials, an open circuit, calls waiting out a Retry-After): it reads
// the breaker's and the auth hold's state and what the client's retry
// waits and the partner's answers showed, and changes none of them.
//
// The package wires; it holds no business rules (package bridge) and no
// Kafka mechanics (package pipeline).
package service
