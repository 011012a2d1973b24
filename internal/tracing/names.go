package tracing

// Span names the bridge makes, besides kotel's "<topic> receive" and
// "<topic> publish". They are fixed strings: no id, key or value of a
// record is ever part of a name.
const (
	// SpanProcess is "<topic> process": one record's handling, from
	// dispatch to its output, a child of its receive span.
	SpanProcess = " process"
	// SpanDecode is the record's decoding (a registry fetch at worst).
	SpanDecode = "decode"
	// SpanAttempt is one attempt of the record's call sequence (the
	// bridge's retry budget), attribute loyalty.record_attempt.
	SpanAttempt = "attempt"
	// SpanCircuit is the attempt's admission by the circuit breaker: it
	// lasts as long as the circuit held the record.
	SpanCircuit = "circuit admission"
	// SpanGuardLookup is the guard's lookup of a write that may repeat an
	// earlier one.
	SpanGuardLookup = "guard lookup"
	// SpanPartnerPrefix + endpoint is one HTTP attempt of a partner call
	// ("partner point-accrual").
	SpanPartnerPrefix = "partner "
	// SpanTokenGrant is one grant of an access token (login, refresh,
	// exchange).
	SpanTokenGrant = "token grant"
)

// Attribute keys of the bridge's own spans. Messaging attributes follow
// the OTel conventions (messaging.*); the rest are the bridge's.
const (
	AttrMessagingSystem      = "messaging.system"
	AttrMessagingDestination = "messaging.destination.name"
	AttrMessagingOperation   = "messaging.operation"
	AttrMessagingPartition   = "messaging.kafka.destination.partition"
	AttrMessagingOffset      = "messaging.kafka.message.offset"

	AttrEventType      = "loyalty.event_type"
	AttrTransactionID  = "loyalty.transaction_id"
	AttrOutcome        = "loyalty.outcome"        // a result's outcome, or "error"
	AttrErrorCategory  = "loyalty.error.category" // an error event's category
	AttrRecordAttempts = "loyalty.record_attempts"
	AttrRecordAttempt  = "loyalty.record_attempt"
	AttrRecordWait     = "loyalty.retry_wait_ms" // the back-off before the next attempt or HTTP attempt
	AttrCircuitState   = "loyalty.circuit.state" // at the admission's start
	AttrGuardResult    = "loyalty.guard.result"

	AttrEndpoint       = "loyalty.endpoint"
	AttrHTTPAttempt    = "loyalty.attempt" // the HTTP attempt's number within its call, from 1
	AttrHTTPMethod     = "http.request.method"
	AttrHTTPStatusCode = "http.response.status_code"
	AttrErrorType      = "error.type"
	AttrTokenResult    = "loyalty.token.result"
)

// SpanRetryWait is a record's back-off between attempts, or while held on
// an answer the profile does not name or on a missing original, with
// loyalty.retry_wait_ms.
const SpanRetryWait = "retry wait"
