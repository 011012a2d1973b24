// Package tokensource obtains and caches the access tokens the partner API
// wants in `Authorization: Bearer …`.
//
// The model follows golang.org/x/oauth2: Source is a small interface, each
// grant is an implementation, and caching is a wrapper every grant gets:
//
//   - Password: grant_type=password against
//     {auth_url}/realms/loyalty-partner/protocol/openid-connect/token, and
//     grant_type=refresh_token with the last refresh token while it is
//     valid; a refresh the identity provider rejects falls back to a full
//     login.
//   - Exchange: a partner JWT (internal/signing) traded at
//     {base_url}/api-identity/public/v1/exchange-token. Partner tokens are
//     cheap to mint, so every grant is a fresh exchange.
//   - Cache: wraps any Source. It hands out the cached token while it is
//     fresh, refreshes proactively when less than min(RefreshBefore,
//     RefreshFraction × lifetime) of its lifetime remains, and lets exactly
//     one grant call be in flight however many goroutines ask (single
//     flight). Callers' contexts are respected: a caller that gives up does
//     not cancel the grant the others wait for. Invalidate(stale) drops the
//     cached token only if it is still the one a 401 rejected, so a burst of
//     401s for one token causes one new grant, not one per caller. A failed
//     grant is not retried before a back-off: seconds after a transient
//     failure, minutes after a refusal (wrong credentials), so that the
//     bridge cannot lock the partner account; a change of the credentials
//     (CacheOptions.CredentialsChanged, a stat of the secret files) ends
//     that back-off at once.
//
// With CacheOptions.Tracer, each grant call is a span ("token grant": ok,
// transient or refused, never the error's text), a child of the span of
// the caller whose wait started it.
//
// One Cache is meant to be shared by every worker of a process; all types
// here are safe for concurrent use.
//
// Secrets: client secret, password, access and refresh tokens never appear
// in an error string or a log line. Token's String and Format print only the
// type and expiry. The package owns token acquisition only; it knows nothing
// of business endpoints (internal/loyalty calls Invalidate on a 401). Its
// requests name their own endpoint (EndpointToken, EndpointExchange) in
// their context (internal/apiendpoint) for the transport's metrics; grants
// are counted by the Cache's OnGrant, once per grant.
//
// An answer is read up to MaxResponseBytes; a longer one is a malformed
// answer, read no further. An OAuth2 error code is kept only when it looks
// like one (sanitizeCode): the identity provider's text travels into logs,
// readiness and error events, and is bounded before it leaves here.
package tokensource
