// Package bridge turns one input record into the partner API calls it asks
// for and the one terminal output record that answers it: a LoyaltyResult on
// <topic>.result or a LoyaltyError on <topic>.error, keyed by transactionId.
//
// Bridge.Handle is a pipeline.Handler. It decodes (a *codec.DecodeError is a
// DECODE error event; a registry outage is waited out, never turned into an
// error event), validates (VALIDATION), then calls:
//
//   - PurchaseCompleted → point-accrual;
//   - RedemptionRequested → point-redemption-with-token (a sign in the event
//     is passed through; otherwise Options.Signer signs, afresh for every
//     attempt, or the client's own signer; with neither it is a VALIDATION
//     error naming sign);
//   - PurchaseRefunded → lookup of the original accrual, points =
//     round(transactionPoint × refundAmount / transactionAmount) capped at
//     transactionPoint, then a redemption with transactionId = refundId;
//     original unknown → BUSINESS error with reason ORIGINAL_NOT_FOUND; zero
//     points → NO_OP without a call;
//   - MemberOnboardRequested → user/onboard (ONBOARDED);
//   - MemberLinkRequested / MemberUnlinkRequested → link / unlink, where
//     MEMBER_IS_LINKED and MEMBER_IS_NOT_LINKED_YET are results
//     (ALREADY_LINKED, NOT_LINKED, stateChanged false), not errors.
//
// # No double effects
//
// Accrual and redemption (refunds included) are guarded: before a write that
// might repeat an earlier one, the bridge looks the transactionId up, and a
// transaction found applied becomes ALREADY_APPLIED with its bitReference
// and points.
// A write might repeat an earlier one when a previous attempt of the same
// record was ambiguous (timeout after sending, 5xx), when the record is Fresh
// (its partition was just assigned, so a previous owner may have processed
// it without committing), and for every replayed record. A duplicate
// answer is looked up the same way; a partner that
// answers duplicates with the original data (the simulator's
// return-original policy) applies nothing and the result is APPLIED again.
// Fresh is exact: the pipeline marks the records between the committed
// offset and the dispatch horizon a previous owner left, which covers
// everything it can have sent, however it died (see the pipeline's doc), so
// no protection rests on the partner rejecting a repeated transactionId.
//
// What a lookup answer means is the partner profile's (Options.Profile, a
// partnerprofile.Profile read by loyalty.ClassifyLookup), never a string of
// the bridge's own: its not-found and duplicate codes, its transactionType
// of each kind, its applied and failed statuses. Found applied means the
// kind asked with an applied status; a failed status, the other kind or a
// not-found code mean not applied. An answer the profile does not name (an
// unknown code, type or status) is not guessed at: the attempt fails
// transiently, nothing is written, and the record is retried under the
// budget and the circuit, then reported TRANSIENT_EXHAUSTED (retryable),
// with loyalty_bridge_unrecognised_answers_total{field} and a warning
// naming the field and value. A refund's lookup of its original reads the
// same way.
// Onboarding has no idempotency key: an ambiguous onboarding is not retried
// but reported (TRANSIENT_EXHAUSTED, retryable) so that an operator checks
// before replaying it.
//
// # Retry budget and the circuit
//
// A record gets RecordAttempts attempts at transient failures (after the
// client's own retries within each). One attempt is the whole call sequence
// the record still needs (guard lookup, write; for a refund, the original's
// lookup until found, then the guarded redemption). Every attempt passes the
// circuit breaker first, which blocks while the API is known to be down: an
// outage holds records instead of spending their budget, and they become
// TRANSIENT_EXHAUSTED only when attempts the circuit allowed kept failing.
// The breaker hears only API failures (loyalty.IsAPIFailure): a business error or a
// refused credential is an answer from a healthy API and reported as a
// success, so a stream of bad events cannot open the circuit.
// Refused credentials (loyalty.IsCredentialRefused: a refused token grant,
// or a 401 to a renewed token) are a partner outage too: with
// Options.Hold, such an attempt waits in the auth hold (internal/authhold)
// until a token is obtainable and is then made again, spending no budget
// and never becoming an AUTH error event. A 403 stays the record's AUTH
// error: the token was accepted, this resource was not.
// A half-open probe that fails does not count against its record: it
// measured the API, not the record, and the probing record would otherwise
// be exhausted after a few open periods while every other record waits.
//
// # Outputs
//
// Headers: event-type, source-topic, source-partition, source-offset,
// attempts; correlation-id and traceparent copied from the input when
// well-formed (dropped-headers names the others); replayed: true in replay
// mode. Error events carry the source position and timestamp and, with
// IncludeOriginal, the original key and value. Every output fits
// MaxOutputBytes, and an output the broker refuses as too large is answered
// by a minimal error event, so that no input can stop the pipeline. No output
// and no log line carries personal data (onboarding's phone, names, e-mail,
// ID and passport numbers, address, birthday) or a secret: results copy only
// ids, points and API references, and API error texts are stripped of the
// event's personal values before they are copied.
//
// # Structure
//
// Handle composes three parts, and data flows one way through them:
//
//   - the codec adapter (adapter.go): record → event (decode, waiting out
//     registry outages), and outcome → output record (result or error
//     event, headers, size bounds, scrubbing);
//   - pure per-event handlers (handlers.go): (ctx, event, partner) →
//     outcome or error; they build requests and map answers, nothing else;
//   - the attempt policy (policy.go), wrapped around a handler the way
//     middleware wraps an HTTP handler: retry (budget, back-off), auth
//     hold (refused credentials), circuit (admission, health) and guard (lookups before writes that may repeat
//     an earlier one, duplicate answers), in that order, outermost first.
//
// Whether an error says the partner API is unwell is decided in one place,
// loyalty.IsAPIFailure.
//
// The package owns the mapping from events to calls and from outcomes to
// reply records. It holds no Kafka client: the pipeline consumes, produces
// what Handle returns and commits.
package bridge
