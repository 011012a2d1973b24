// Package circuit is the bridge's view of partner API health: a circuit
// breaker (github.com/sony/gobreaker) turned into back-pressure.
//
// A plain breaker fails fast while open, which in a Kafka consumer turns an
// outage into a storm of error events. The bridge wants the opposite: while
// the API is failing, hold records and stop fetching, and spend a record's
// retry budget only on attempts the breaker actually let through. So Breaker
// offers two blocking calls instead of an error:
//
//   - Ready blocks while the circuit is open; the pipeline consults it before
//     dispatching a record, which pauses consumption.
//   - Acquire blocks until one API attempt may proceed (closed, or one of the
//     half-open probes) and returns the function that reports its outcome.
//
// What counts as failure is the caller's business (Options.IsFailure): the
// bridge counts transient errors (network, timeouts, 429, 5xx) and not
// business 400s, which prove the API is up.
//
// Status tells an operator where the circuit stands: since when it is
// open, and the last failure. Options.Off makes a breaker that never
// opens, for operators who want failures to become error events at once.
//
// Breaker does not call the API, log per attempt, or know about Kafka.
package circuit
