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
//     error naming sign. A sign made here and refused with one of the
//     profile's sign-refused codes is a refusal of the credentials: the
//     auth hold holds records, since no record can fix the bridge's JWT
//     settings or key; a passed-through sign refused is its record's
//     BUSINESS error);
//   - PurchaseRefunded → lookup of the original accrual, points =
//     round(transactionPoint × refundAmount / transactionAmount) capped at
//     transactionPoint and at what the original's earlier clawbacks left,
//     then a redemption in the original's next clawback slot (see Refunds);
//     original not found → parked (Options.ParkedTopic, park.go: set
//     aside on the parked topic and tried again after a back-off, its
//     partition going on; after OriginalWait a retryable
//     TRANSIENT_EXHAUSTED error with reason ORIGINAL_NOT_FOUND), or
//     without parking (replay) a BUSINESS error with that reason; an
//     original found unapplied or of the other kind is that BUSINESS
//     error at once; zero points → NO_OP without a call;
//   - MemberOnboardRequested → user/onboard (ONBOARDED);
//   - MemberLinkRequested / MemberUnlinkRequested → link / unlink, where
//     MEMBER_IS_LINKED and MEMBER_IS_NOT_LINKED_YET are results
//     (ALREADY_LINKED, NOT_LINKED, stateChanged false), not errors.
//
// A call refused, with one of the profile's wire-refused codes, for a
// field whose form the wire settings choose (transactionDate; an
// idNumber or passportNumber the record leaves unset) is a refusal of the
// credentials too: the auth hold holds records, naming the field and the
// settings to check, until the partner takes a call; once another call
// with the same setting was accepted after a record's first such refusal,
// the refusal is that record's BUSINESS error (wirerefusal.go argues why).
//
// # No double effects
//
// Accrual and redemption are guarded (a refund's clawback by its slots, see
// Refunds): before a write that might repeat an earlier one, the bridge
// looks the transactionId up, and a transaction found applied becomes
// ALREADY_APPLIED with its bitReference and points.
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
// The transaction ledger (Options.Ledger, ledger.go, package ledger) is
// the bridge's own memory, which offsets resets, expired or deleted groups
// and a producer's duplicate events cannot erase: every write's intent is
// durable before the write is sent, and its settled outcome is one of the
// record's outputs. A transaction the ledger has settled is answered from
// it, with no call; one it shows intended without an outcome is guarded
// (and a refund knows its own slot from its intent); one it has no entry
// for, where the ledger speaks for the partition (ledger.Covers), was
// never sent and is not guarded.
//
// A lookup answers only once the write it looks for has settled. The
// partner may apply a write after answering it (a 504 from its gateway, a
// timeout on our side): the profile's apply window (--partner-apply-window,
// Profile.ApplyWindow) bounds how long after its sending. So after an
// ambiguous write the record's next attempt, which starts with the guard's
// lookup, waits until the write's return plus the window (the return is
// no earlier than the sending, so this errs towards waiting longer): retry
// makes its back-off at least that long, holding no pipeline slot, and the
// guard waits out whatever is left before it looks (nothing, after
// retry's wait). A not-found inside the window is not an answer. Records
// another process may have sent are covered by the takeover wait and the
// lease, which add the same window to the call timeout (internal/pipeline).
//
// What a lookup answer means is the partner profile's (Options.Profile, a
// partnerprofile.Profile read by loyalty.ClassifyLookup), never a string of
// the bridge's own: its not-found and duplicate codes, its transactionType
// of each kind, its applied and failed statuses, whether it keys
// transactions by id alone or by id and type. Found applied means the kind
// asked with an applied status; a failed status or a not-found code mean
// not applied. The other kind found under the transactionId (an order paid
// partly with points: its accrual and redemption share the id) never
// means not applied. Keyed by id and type (the default, the simulator's),
// the partner may hold both and the lookup shows one, so it says nothing
// of the kind asked: an answer not understood, as below (field
// sharedTransactionId). Keyed by id alone, the partner holds only the
// other: the guarded write is a BUSINESS error TRANSACTION_ID_CONFLICT (not
// retryable; nothing written, since a write would collide with the other,
// and no wait would change that), a refund's original ORIGINAL_NOT_FOUND,
// a clawback slot CLAWBACK_CONFLICT.
//
// An answer the profile does not name (an unknown code, type or status,
// or the shared id above) is not guessed at: the record is held. Nothing
// is written, the guard stays armed, and the attempt is made again after a
// back-off (doubling from RetryBackoff, capped at a minute, half
// jittered) through pipeline.Wait, so the held record keeps its key's lane
// and its place in the commit order but no in-flight slot, and spends no
// attempt of its budget, as in the auth hold. A held record shows in
// loyalty_bridge_held_unrecognised_records and Bridge.Health (the
// service's /readyz check partner-answers), each answer in
// loyalty_bridge_unrecognised_answers_total{field}, and a warning names the
// field and value, once a minute at most per pair. An answer the profile
// names ends the hold (a pending status that settles is read as it is
// then); after UnrecognisedHold (default 15 minutes) from the first such
// answer, the record is a retryable TRANSIENT_EXHAUSTED error event with
// reason UNRECOGNISED_ANSWER. A refund's lookup of its original and of its
// clawback slots reads the same way.
// Onboarding has no idempotency key: an ambiguous onboarding is not retried
// but reported (TRANSIENT_EXHAUSTED, retryable) so that an operator checks
// before replaying it.
//
// # Refunds
//
// A purchase may be refunded in several parts, and all its clawbacks
// together must never take more points than it earned. The partner offers
// no list of a member's transactions and no description in a lookup, only
// lookups by exact transactionId, and the ledger (when there is one) knows
// only this process's partitions' refunds, not what other processes
// clawed back. So the clawbacks of an original O that earned P points live in numbered
// slots, redemptions with transactionId ClawbackID(O, k) = O~cb1, O~cb2, …
// (at most MaxClawbacks). A refund R with proportional share s:
//
//  1. takes the lane of (loyaltyId, O) for the attempt: within one
//     process, one refund of O at a time, whatever the ordering mode and
//     the records' keys;
//  2. looks slots 1, 2, … up until one is not found, adding up their points
//     (whatever their status: a filled slot cannot be reused, and counting
//     it errs towards clawing back less); a slot that is R's own (below)
//     ends it as ALREADY_APPLIED;
//  3. writes the first free slot k with n = min(s, P − the points of slots
//     1..k−1), only if n > 0 (else NO_OP with points 0 and requestedPoints
//     s), then looks slot k up again (below);
//  4. answers APPLIED with points = usedPoint = n, requestedPoints = s,
//     clawbackTransactionId = the slot's id, keyed by R's own transactionId.
//
// The cap. A slot is written only after the slots before it were seen
// filled and it was seen free, with at most what they left; so as long as
// each slot holds one effect, the points of slots 1..k never exceed P, for
// every k. A slot gets two effects only if two writers claim it at once. In
// one process the lane rules that out: the lane is held from the first
// lookup to the end of the write, and a retry starts again at slot 1.
// It is let go with the attempt, an ambiguous one included, never kept
// across a back-off: it is taken inside the circuit's admission, and a
// refund waiting with it for the only half-open probe (or its pipeline
// slot) would stall for good another refund of O that holds the probe and
// waits for the lane. Letting go is safe under the assumption below
// because the lane remembers until when its last ambiguous write may
// still land (that write's return plus the apply window): no refund of O
// looks slots up before then. It waits for that moment before it takes
// the lane (a timer, not a lock, so it cannot deadlock; it holds the
// circuit's admission for at most the window), so it sees the slot filled
// (and counts it) or free for good, and the record's own next attempt is
// guarded and finds the slot as its own.
// Across processes (refunds of one original in flight in two members at
// once, which needs keys other than the loyaltyId docs/events.md asks for, or
// a replay of refunds beside the live bridge), the partner settles it by
// rejecting the second write (DUPLICATE_TRANSACTION): the loser looks the
// slot up again and moves on. A partner that answers it with the first
// write's answer (a success) makes the loser take the winner's clawback
// for its own: a success answer is always the writer's own clawback,
// never read as another's, which would claw back twice had it been
// applied. The loser then claws back less, never more.
// A partner that applies a repeated transactionId again gives nothing to
// settle it with: no call the bridge can make is an atomic claim. So:
//
//   - Guaranteed: the clawbacks of one original take at most what it
//     earned, with any duplicate policy, whenever its refunds are handled
//     by one process at a time (refunds keyed by loyaltyId or by
//     originalTransactionId, any ordering mode, replays and restarts
//     included), and with any placement of refunds when the partner rejects
//     a repeated transactionId.
//   - Checked: a refund whose record key is neither its loyaltyId nor its
//     originalTransactionId (its own transactionId, any other value, an
//     empty or a null key, which producers spread over partitions) could
//     be handled beside another refund of its original in another
//     member. By default (Options.RefundKeyCheck, --refund-key-check
//     refuse) it is answered, before any call, with a VALIDATION error
//     event, reason REFUND_KEY, naming the rule and the keys accepted
//     (never the key: it may be personal data); retryable, as a replay
//     handles its records in one process and does not check keys. With
//     warn it is handled, counted
//     (loyalty_bridge_refund_key_mismatches_total) and logged, and the cap
//     then rests on the partner rejecting a repeated transactionId. A
//     producer must key all refunds one way: some by loyaltyId and others
//     of the same original by originalTransactionId pass the check and
//     may still land in two partitions.
//   - Not guaranteed: refunds of one original in two processes at the same
//     moment against a partner that applies duplicates. Both claims of a
//     slot are applied and the lookup shows one, so later refunds count too
//     little. The lookup after each write catches it (a bitReference not its
//     own) and says so in an error log line naming the original. Measured,
//     three processes racing twelve refunds per original: 197 of 200
//     originals over-clawed, every one named.
//   - Assumed, as for every guarded write: the partner applies a write
//     within its apply window (--partner-apply-window) of its sending, or
//     never; a write answered by a 5xx or timed out may land until then,
//     and no slot it may fill is looked up before. The window is the
//     partner's to state (the spec says nothing); a partner that applies
//     later than it can make a lookup miss a write, and then the slot is
//     written twice. And the partner returns a slot's transactionAmount
//     (to within a currency unit) and transactionPoint as sent, and the
//     original's points unchanged.
//
// Idempotency. A refund is applied when one slot holds its clawback.
// Whether R looks for its own is decided by the guard flag, as for every
// guarded write: a refund that may have been sent before (an ambiguous
// write of an earlier attempt, a Fresh record, every replayed record)
// looks for it; a slot is R's own when its amount is R's refundAmount and
// its points are exactly what R would have claimed there, behind the slots
// before it. That never misses R's own clawback, so a replayed or
// restarted refund claws back nothing new. It can take a twin's (another
// refund of O with the same amount, whose clawback came to the same
// points) for R's own: R then claws back nothing and its result names the
// twin's clawback. A refund the guard flag says was never sent (below no
// previous owner's dispatch horizon, not replayed, no ambiguous attempt)
// has no clawback yet, so every slot it finds is another refund's, however
// alike. Nothing of a slot's transactionTime is read: the spec does not say
// that it echoes the transactionDate sent, and a partner stamping its own
// time would otherwise make a twin handled in the same second look like
// R's copy. The one case this leaves out is a copy of R in flight in
// another process at the same moment while R is handled for the first
// time here (a replay running ahead of the live bridge over records it has
// not consumed yet): R is then clawed back in two slots, still within the
// cap, and reconcile reports the two results naming two clawbacks
// (DIFFERS).
// Clawbacks made before slots existed, under the refund's own id, are
// looked for too (a guarded refund's first lookup); they keep their own
// refund idempotent but are not counted against other refunds' cap.
//
// Every other doubt ends in clawing back less, and says so: a full original
// is a NO_OP with points below requestedPoints; a slot holding something
// other than a redemption is a BUSINESS error CLAWBACK_CONFLICT; MaxClawbacks
// filled slots a BUSINESS error CLAWBACK_LIMIT; a slot lost to other writers
// more than a few times in a row (each write refused as a duplicate, so
// none applied) a TRANSIENT_EXHAUSTED error CLAWBACK_CONFLICT, retryable.
// A success answer echoing other points than sent is the refund's
// clawback all the same: points is what was sent, usedPoint the partner's
// figure, and a warning says so. A slot's transactionPoint that is no
// count (negative, or past int64 summed) is an answer not understood: the
// record is held (field transactionPoint), as for any such answer.
// A refund costs n + 4 calls when the original has n earlier clawbacks:
// the original's lookup, n + 1 slot lookups, the write and its verifying
// lookup; a guarded refund one more.
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
// An attempt that made no call (answered from the ledger, another
// process's intent heeded, a send-by passed) counts neither way
// (circuit.ErrNotAttempted): as the probe it frees the slot and leaves the
// circuit half-open, since closing it on no evidence would let every held
// record at a partner still down; closed, it does not break a run of
// failures.
//
// # Outputs
//
// Headers: event-type, source-topic, source-partition, source-offset,
// attempts; correlation-id and traceparent copied from the input when
// well-formed (dropped-headers names the others); replayed: true in replay
// mode. With tracing on (Options.Tracer, tracing.go) the traceparent is
// the bridge's own span in the same trace instead (the Kafka client's
// publish span, or the record's process span), so a reader of the reply
// continues the producer's trace; off, nothing changes and nothing is
// spent on it. Error events carry the source position and timestamp and, with
// IncludeOriginal, the original key and value. Every output fits
// MaxOutputBytes by construction: an error event's texts are bounded (the
// detail by MaxDetailBytes; dropped headers are named up to four and the
// rest counted, however many a record carries), so without its original it
// stays under ErrorEventBudget, and the original is carried only when it
// fits beside that. An output the broker refuses as too large (a reply
// topic with a lower max.message.bytes) is answered by a minimal error
// event, so that no input can stop the pipeline. No output
// and no log line carries personal data (onboarding's phone, names, e-mail,
// ID and passport numbers, address, birthday) or a secret: results copy only
// ids, points and API references. Every text of the partner's is untrusted
// (internal/partnertext): messages, codes, resultUrl and the ids and
// statuses of answers lose token shapes, secret key=values and control
// characters and are capped, and a resultUrl keeps only the query
// parameters the profile names (Profile.ResultURLParams, default none). An
// onboarding's error event keeps only the partner's codes, and its codes
// and detail lose the member's data in any spelling (internal/personalmatch:
// the phone's digits, the birthday's formats, names in any case, with or
// without diacritics).
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
//     middleware wraps an HTTP handler: retry (budget, back-off, the
//     unrecognised hold), auth
//     hold (refused credentials), circuit (admission, health) and guard (lookups before writes that may repeat
//     an earlier one, duplicate answers), in that order, outermost first.
//
// Traces (tracing.go) are made beside these parts, never by them: Handle
// wraps the record's handling in its process span, the adapter and the
// policy start child spans (decode, attempt, circuit admission, guard
// lookup, retry wait) only when Options.Tracer is set, and the client's
// spans are children of theirs.
//
// Whether an error says the partner API is unwell is decided in one place,
// loyalty.IsAPIFailure.
//
// The package owns the mapping from events to calls and from outcomes to
// reply records. It holds no Kafka client: the pipeline consumes, produces
// what Handle returns and commits.
package bridge
