// Package loyalty is the typed client of the Partner Loyalty Points API
// (docs/partner-api.md): Customer Info, Customer Profile,
// User Onboarding, link-member, unlink-member, Point Redemption With Token,
// Point Accrual and Lookup Transaction. The token calls (password, refresh,
// exchange) live in internal/tokensource, redemption signing in
// internal/signing.
//
// # Calls
//
// Every method takes a context first and returns (value, CallInfo, error).
// CallInfo.Attempts counts the HTTP requests made; CallInfo.Ambiguous says
// that a failed write may nevertheless have been applied. Request and
// result structs carry the spec's field names and JSON types; the envelope
// is decoded in one place (call/decodeData).
//
// Bodies are JSON as encoding/json writes and reads them, byte for byte
// and value for value. On the hot path (accrual, redemption, lookup) the
// request body is appended without reflection (bodyencode.go) and a
// success envelope of the spec's exact shape is read without it
// (fastdecode.go); anything else, or any value those do not handle
// themselves, goes to encoding/json, so its bytes, values and errors are
// the only ones. FuzzEncodeBody and FuzzFastDecode compare each with
// encoding/json.
//
// # Retry contract
//
// Reads (CustomerInfo, CustomerProfile, LookupTransaction) are retried on
// every transient failure: transport errors, attempt timeouts, 408, 429 and
// 5xx. Writes (Onboard, Link, Unlink, Redeem, Accrue) are retried only when
// the failure is known not to have been applied:
//
//   - the request never fully reached the connection (dial refused, reset
//     before the body was written — observed with httptrace);
//   - 408, 429 and 503: the service refused the request before processing;
//   - a token grant failed transiently (nothing was sent);
//   - 401: the token is invalidated and the call is sent once more at once.
//
// A write that times out or breaks after it was sent, or is answered with a
// 5xx other than 503, is NOT re-sent: the client returns a *TransientError
// with Ambiguous true (and CallInfo.Ambiguous). The caller — the bridge's
// idempotency guard — looks the transaction up (LookupTransaction by
// transactionId) before deciding to send it again. A 2xx to a write that
// cannot be decoded is a *MalformedResponseError, also Ambiguous.
//
// Back-off is exponential with full jitter (uniform in [0, min(Max,
// Initial·2ⁿ⁻¹))), bounded by MaxAttempts and MaxElapsed; a Retry-After
// answer replaces the jittered wait, capped at MaxRetryAfter. No retry
// starts once the wait would pass MaxElapsed, and ctx ends every wait. 400
// (and every other 4xx but 401, 408 and 429) is never retried.
//
// # Errors
//
// *BusinessError (the error envelope; errors.Is against the Code
// sentinels, IsMemberLinked, IsMemberNotLinked), *AuthError, *TransientError,
// *RejectedError, *MalformedResponseError, *UnrecognisedAnswerError and
// *ValidationError (refused before any call). Category maps each to the error-event category of
// LoyaltyError (docs/events.md, schemas/error.avsc), Retryable to its retryable flag.
//
// An answer is classified by its status first, then by its body:
//
//   - transport error, attempt timeout, 408, 429, 5xx: *TransientError,
//     retried as above; an API failure (IsAPIFailure), which the circuit
//     breaker hears;
//   - 401 (after one renewal) and 403: *AuthError, with or without the
//     envelope;
//   - any other 4xx with the error envelope: *BusinessError;
//   - any other 4xx without it — a gateway's or proxy's 404, 405, 413,
//     415, HTML or empty: *RejectedError, category INTERNAL, sent once,
//     not retryable, and not an API failure: the request was not applied
//     and would be refused again, and a route or size limit in front of
//     the API says nothing about the API's health;
//   - a 2xx that is not the success envelope: *MalformedResponseError, an
//     API failure, Ambiguous for a write; a 3xx (never followed) too, not
//     Ambiguous. The success envelope must carry statusCode 200 and message
//     SUCCESS, as the spec shows, and its data must read as the spec's
//     types: its "number" fields (transactionPoint, usedPoint,
//     transactionAmount, sponsorId) are decoded as json.Number and
//     converted with checks (numbers.go), a fractional point value rounded
//     or refused as Options.FractionalPoints says, anything out of range
//     refused;
//   - unlink-member answered data false: a *BusinessError whose Data is
//     "false" (not applied, the partner's answer);
//   - whatever the status, a body over Options.MaxResponseBytes (default
//     64 KiB; the spec's are under 1 KB): *MalformedResponseError
//     (ErrResponseTooLarge), Ambiguous for a write answered 2xx or 5xx
//     but 503. No more than the limit and a byte is read (nothing when
//     Content-Length says it is over) and the connection is dropped, so
//     a gateway's large error pages under load cost each attempt in
//     flight at most the limit, not the page.
//
// # The partner profile
//
// What the spec leaves open (the codes of "not found" and "duplicate",
// transaction types and statuses, date formats, fractional points) is a
// partnerprofile.Profile. ClassifyLookup reads a LookupTransaction answer
// through it, the one place that decides what such an answer means
// (applied, not applied, not found, the other kind, unrecognised, failed);
// IsDuplicate reads a write's refusal. An answer the profile does not name
// is an *UnrecognisedAnswerError: category TRANSIENT_EXHAUSTED, retryable,
// not an API failure. So is a transaction of the other kind found under
// the transactionId when the profile keys transactions by id and type
// (the default): the lookup shows one record, and the kind asked may be
// the other one under the same id. Only a partner keyed by id alone makes
// the other kind an answer (LookupOtherKind). ErrTransactionNotFound and ErrDuplicateTransaction
// are only the simulator's defaults.
//
// Error strings name the endpoint, the HTTP status when there was one, and
// the transaction id (or loyaltyId / externalId), never a secret, token or
// personal datum; the server's free-text message is kept in a field, not in
// Error(), and a body that is not the envelope is not quoted at all.
//
// # Concurrency
//
// Options.Calls (or a fixed Options.MaxCalls) bounds the attempts in
// progress: a slot is held from before the request until the answer is
// read, never while a call waits to retry, nor while a write waits for
// its Options.WriteGate (the bridge's lease): the write takes its slot
// after the gate opened and checks the gate again, without waiting, once
// it holds it; a gate closed meanwhile sends the slot back, telling the
// limiter nothing, and the write waits again. So reads do not queue
// behind writes waiting for a heartbeat, and the wait is not measured as
// the partner's latency. With an adaptive
// callimit.Limiter the client tells it what each answer said about the
// partner's load (loadSignal): 408, 429, 503 and any answer carrying
// Retry-After are push-backs, an attempt timeout or a 504 a timeout,
// other 5xx, 3xx and broken connections neutral failures, everything
// else (4xx included) a processed call. The Retry-After itself is
// honoured by the call that received it, as its retry's wait.
//
// # Transport
//
// One http.Client for the process (NewHTTPClient: pool sized for the
// configured concurrency, optional CA and client certificate). Each attempt
// is bounded by Options.Timeout through its context, which also names the
// endpoint (internal/apiendpoint: "user-profile", "point-accrual", …) for
// whatever wraps the transport, so that metrics never guess it from the
// path. With Options.Tracer, each attempt is also a span ("partner
// <endpoint>", tracing.go) carrying the endpoint, the attempt's number,
// its status or the kind of failure, and the back-off before the next:
// never the URL (a path parameter is a loyaltyId), a body or an answer's
// text. The transport sees the span in the request's context (the
// metrics take its trace id as a latency exemplar). No trace context is
// sent to the partner.
//
// The package must not know about Kafka, events or outcomes: it reports
// what the API said and whether it might have applied the call.
package loyalty
