// Package sim is a stateful simulator of the Partner Loyalty Points API
// (docs/partner-api.md) for development, tests,
// benchmarks and partner sandboxes. A *Server is an http.Handler serving
// the identity provider ({auth_url}) and the service ({base_url}) on one
// address; mount it on httptest.NewServer in tests, or run cmd/loyalty-sim.
//
// It owns: the partner client's credentials, the tokens it issued, the
// members, their balances and link state, the transactions, fault
// injection and the counters tests assert on. It must not know anything of
// the bridge, Kafka or the API client: it speaks only HTTP as the spec
// describes, so that tests through it exercise the real client.
//
// # Model
//
// Members MemberID(1)…MemberID(Options.Members) exist from the start (built
// on first use from their index, so a large population costs nothing
// until touched), each with Options.InitialBalance points, not linked.
// Onboarding adds members with the next ids. Accrual credits
// floor(transactionAmount × EarnRate) points; redemption debits usedPoint,
// which may be fractional (the spec says only "positive number"; it is
// kept exact to a thousandth, and a finer one is refused);
// both are recorded as transactions found again by lookup-transaction-id
// through bitReference or transactionId. The ledger (Effects, Ledger,
// EffectsOver) counts how often each transactionId was applied, which is
// how tests prove "no double accrual", also against a partner that
// applies a repeated transactionId again (DuplicateApply).
//
// Tokens are RS256 JWTs signed with a key the Server generates at New
// (published as a JWKS); they are valid while the Server remembers them
// (RevokeTokens forgets all) and their exp, read on the Server's clock
// (Options.Now), is ahead.
//
// The client secret and password can be rotated at run time
// (RotateCredentials, POST /__sim/credentials), so that tests can revoke a
// client's credentials: from then on the token endpoint refuses the old
// ones (invalid_client, invalid_grant). Tokens issued before stay valid
// until they expire, as at a real identity provider, unless the rotation
// asks to revoke them too (RevokeTokens: true), which makes even a fresh
// token answer 401 at once.
//
// # What the spec says and what is ours
//
// From the spec: paths, methods, request and response fields and types,
// the success envelope, the onboarding error envelope (code 0001,
// BAD_REQUEST, data.resultUrl), the link/unlink errors MEMBER_IS_LINKED and
// MEMBER_IS_NOT_LINKED_YET with errors.name, the four link transitions, the
// limits (transactionAmount ≥ 0, usedPoint > 0, currency VND by default,
// lookup by bitReference or transactionId), and the token response fields.
//
// Our own, where the spec is silent (each documented in docs/simulator.md too).
// The codes of "transaction not found" and "duplicate transaction", the
// transactionType values and the applied status are Options.Profile's (a
// partnerprofile.Profile, also --profile FILE and the --partner-* flags of
// cmd/loyalty-sim); the values below are its defaults, so that tests can
// prove the bridge follows its own profile against a partner that answers
// differently:
//
//   - Error codes, all in the spec's error envelope with errors.code =
//     errors.errorCode: MEMBER_NOT_FOUND (unknown loyaltyId on any member,
//     point or lookup endpoint; the profile's first member-not-found code), INSUFFICIENT_POINT, DUPLICATE_TRANSACTION,
//     INVALID_SIGN, INVALID_REQUEST (missing or mistyped field, malformed
//     JSON, a Content-Type other than application/json on any business
//     endpoint, GETs included, as the spec requires the header of every one;
//     limits; 413 when the body exceeds 1 MiB),
//     TRANSACTION_NOT_FOUND (also when the transaction belongs to another
//     loyaltyId), PARTNER_MEMBER_ID_IN_USE (link with a partnerMemberId
//     already linked to another member), and 401 UNAUTHORIZED with
//     statusCode 401 for a missing, unknown, revoked or expired bearer
//     token and for every exchange-token failure; OVER_CAPACITY with
//     Options.OverCapacityStatus for a business request beyond
//     Options.Capacity.
//   - Onboarding failure reasons, carried as the errorCode (and field)
//     query parameters of data.resultUrl (OnboardingResultURL):
//     INVALID_REQUEST, MISSING_FIELD, MISSING_ID_DOCUMENT, INVALID_PHONE,
//     INVALID_EMAIL, INVALID_GENDER, INVALID_DATE, INVALID_NATIONALITY,
//     DUPLICATE_EXTERNAL_ID. Onboarding does not link the new member.
//   - Token endpoint errors as Keycloak answers them: 401 invalid_client
//     (client_id/secret), 401 invalid_grant (user credentials), 400
//     invalid_grant (refresh token unknown, revoked, expired or not a
//     refresh token), 400 unsupported_grant_type, 400 invalid_request.
//     expires_in and refresh_expires_in are whole seconds, or
//     milliseconds when the profile's TokenLifetimeUnit says so (the spec
//     does not say).
//   - Partner JWTs, the exchange-token partner token and the redemption
//     sign; see "Partner JWTs" below.
//   - Accrual transactionDate: a JSON number of epoch milliseconds (the
//     spec's example) or a string of digits (the same) or ISO 8601 (RFC
//     3339, or YYYY-MM-DD at midnight +07:00). transactionDes and extraData
//     must be JSON objects. usedPoint must be a whole number.
//   - Duplicates: a transactionId is unique per kind (accrual, redemption).
//     DuplicateReject answers DUPLICATE_TRANSACTION;
//     DuplicateReturnOriginal answers the first call's data again; either
//     way nothing is applied twice. DuplicateApply plays a partner
//     without duplicate detection: the repeat is applied again, and the
//     ledger counts it (EffectsOver(1), GET /__sim/ledger?over=1, lists
//     every double effect). A redemption refused (bad sign, insufficient
//     points) is not recorded and may be sent again, with a new sign.
//   - Unlink with a partnerMemberId other than the one linked is
//     MEMBER_IS_NOT_LINKED_YET (the member is not linked to that id).
//   - Values: transactionType ACCRUAL or REDEMPTION, transactionSource
//     PARTNER, status SUCCESS, sponsor LOYALTY_PARTNER, sponsorId 1001,
//     eKycStatus VERIFIED or PENDING, status ACTIVE, tierClass BASIC,
//     SILVER, GOLD or PLATINUM, bitReference BIT + 12 digits. Timestamps
//     are UTC with milliseconds; transactionTime is the partner's
//     transactionDate (processing time when it cannot be read, or always
//     with Options.StampProcessingTime) at +07:00.
//     Lookup by a transactionId used for both kinds finds the accrual.
//
// # Partner JWTs
//
// The spec names no claim of the two JWTs a partner signs. The Server
// requires what its profile's JWT section says (Options.Profile.JWT, the
// same partnerprofile settings the bridge signs by); by default the claims
// internal/signing has always made: registered claims and Keycloak's typ
// claim, which a verifier that does not know them ignores. A refusal names
// the claim refused (iss, aud, typ, jti, alg, or the body fields that
// differ), in the error envelope with the profile's first sign-refused
// code for a sign, and with 401 for a partner token.
//
//   - Both kinds: RS256 or ES256 by a registered partner key (the
//     profile's algorithm only, when it names one; a kid in the header
//     selects keys), iss = client_id (or the profile's issuer), iat not in
//     the future, exp not passed and after iat, jti (unless the profile's
//     is none; with transaction-id, a sign's jti is its transactionId).
//   - Partner token (exchange-token): aud
//     "/api-identity/public/v1/exchange-token", typ "partner-token" (or the
//     profile's; none: not checked), exp at most 5 minutes ahead
//     (MaxPartnerTokenAhead).
//   - Redemption sign: aud
//     "/api-point/partner/v1/point-redemption-with-token", typ
//     "redemption-sign" (or the profile's), a lifetime exp − iat of at most
//     Options.MaxSignLifetime (default 5 minutes, the longest the bridge's
//     signer makes; a sign valid for years is refused), and a claim for
//     each body field the profile's sign claims name (by default loyaltyId,
//     transactionId, usedPoint, transactionAmount and transactionDate under
//     their own names), equal to the body's value as it travels (numbers
//     compared exactly) or, for a claim the profile encodes as a string, to
//     its text. Checked after the member exists and before duplicates and
//     balance.
//
// aud and typ keep one kind from being used as the other: a sign, which
// carries every claim a partner token needs, is refused at exchange-token,
// and a partner token carrying the sign's claims is refused as a sign. An
// aud that is a list is accepted when it holds the kind's aud.
//
// Clocks differ: every time check of a partner JWT allows Options.ClockSkew
// (default 30 s, at most 5 minutes). iat may be up to that far ahead of
// the Server's clock, exp up to that far behind it, and a partner token's
// exp up to 5 minutes plus the skew ahead. The Server's clock is
// Options.Now, so tests move it rather than sleep.
//
// Each partner JWT is accepted once: the jti of every accepted one is
// remembered, per kind, until the JWT can no longer be accepted anyway (exp
// plus the skew), and a JWT with a remembered jti is refused, even the very
// same request sent again. A jti is used up when its JWT passes every check
// of its own, whatever then becomes of the call (a redemption refused for
// INSUFFICIENT_POINT or DUPLICATE_TRANSACTION included); a JWT refused for
// its claims or signature does not use it up. A client retrying a
// redemption or an exchange therefore signs again, as the bridge does at
// every attempt; a new sign for an applied redemption still gets
// DUPLICATE_TRANSACTION or, under DuplicateReturnOriginal, the original
// answer. The jtis remembered are bounded (Options.ReplayCacheSize, default
// 100,000): while it is full of unexpired ones new partner JWTs are refused
// (becoming full is logged as a warning), rather than a jti forgotten
// early, which would let its JWT be replayed.
//
// Refusals use the error envelope: 401 UNAUTHORIZED at exchange-token, 400
// INVALID_SIGN at redemption, with a message naming the claim at fault
// (never quoting the JWT).
//
// # Faults
//
// Faults (Options.Faults, SetFaults, PUT /__sim/faults) add latency, drop
// connections, hang, answer injected statuses without doing anything, or
// apply a write and answer 500. They act on the token endpoints and
// business endpoints (never the JWKS or admin API), limited to
// Faults.Endpoints when set. Decisions come from one random source seeded
// by Options.Seed. Injected answers carry {"statusCode":N,"message":text};
// injected 429 and 503 carry Retry-After (Faults.RetryAfter, default 1s),
// or none when it is NoRetryAfter (the flag's and admin API's "0s"), so
// that a client can be tested with and without one.
//
// # A partner as bad as the spec allows
//
// Four more Faults settings play what the spec does not forbid, each off
// in the zero value. LateApplyRate answers an accrual or a redemption 504
// (or lets a client give up under injected latency) and applies it
// LateApplyDelay later, through the duplicate policy as it stands then:
// it counts once in Effects, and a repeat sent in between finds nothing,
// which is how a guard lookup after a 504 can be fooled. The request is
// checked when it arrives, as a partner validates before it queues:
// body, member, date, and a redemption's sign, whose jti is used up then
// (a sign that expires before the write lands does not refuse it, and a
// retry reusing the jti is refused as a replay). A request refused on
// arrival is answered 504 all the same and never lands; balance and the
// duplicate policy are applied when it lands.
// FlushLateApplies (POST /__sim/late-applies/flush) lands them at once and
// returns once they have landed, so that tests need not wait. Close drops
// the late writes still pending (Counters.LateDropped), and those
// accepted after it: a write answered 504 may never apply, so this is a
// partner the spec allows, and a closed Server changes no state behind a
// test's back nor leaves a timer running. A write landing when Close is
// called is waited for. LookupLag hides a transaction from
// lookups for a while after it applied (Options.Now's clock).
// NullNumbersRate nulls, or leaves out, every number in a 200 answer's
// data. Transactions are always keyed by id and type, as the spec's two
// endpoints allow, so an accrual and a redemption may share an id; which
// one a lookup by the id alone answers is SharedIDLookup's (the accrual by
// default, the redemption, or the one applied last). These settings
// exist so that a client's guards can be shown to hold against them.
//
// # Capacity
//
// Options.Capacity plays a partner that is overloaded rather than broken:
// at most that many business requests (the endpoints that take a bearer
// token) are handled at once; 0, the default, is unlimited. The token
// endpoints (token, exchange-token), the JWKS and the admin API are
// neither limited nor counted, since a gateway limits the API and not the
// identity provider, and a client that cannot get a token cannot be
// tested against an overloaded API. A request beyond the limit is
// answered at once, without being handled, with Options.OverCapacityStatus
// (503 by default, or 429) in the error envelope, code OVER_CAPACITY, and
// the Retry-After of the faults in force (Faults.RetryAfter; none with
// NoRetryAfter). A request holds its place from arrival to its answer,
// injected latency and hangs included (latency plus capacity is a slow
// partner with a fixed number of workers), and gives it back before the
// answer is written, so that a client holding an answer may send again at
// once. Over-capacity answers are counted in Calls under their status and
// per endpoint in OverCapacity (Counters.OverCapacity, "overCapacity" of
// /__sim/counters).
//
// Concurrency: every method of Server is safe for concurrent use. Business
// state sits behind one mutex; the simulator's cost per request is
// measured by BenchmarkAccrual.
//
// Personal data and secrets: the Server logs state changes with loyaltyIds
// only; it never logs request bodies, tokens, credentials or profiles.
package sim
