// Package signing makes the two JWTs the partner API asks of a partner: the
// redemption `sign` token and the partner token traded at exchange-token.
//
// A Signer holds one private key (RSA for RS256, ECDSA P-256 for ES256) read
// from PEM (PKCS#1, PKCS#8 or SEC1), an optional key id put in the `kid`
// header, and the partner's client_id used as `iss`. It is safe for
// concurrent use. A Signer of New keeps its key; one of LoadFile follows
// its key file (read through internal/secretfile): before each token it
// stats the file, and uses the new key once the file changes, so that a
// rotated Kubernetes Secret takes effect without a restart. A new key that
// cannot be used leaves the last good one in place.
//
// Claims. The spec names none ("How sign is computed and what it covers:
// not shown"; "Claims required in the partner token: not shown"): they are
// the partner profile's JWT section (partnerprofile.JWT, the
// --partner-jwt-*, --partner-sign-* and --partner-token-* settings), which
// the simulator (internal/sim) verifies the same way. Its defaults, the
// claims this package has always made:
//
//   - redemption sign: iss (the client_id), aud = RedemptionSignAudience,
//     typ = RedemptionSignType, iat, exp (short: 2 minutes, never more
//     than MaxSignTTL, 5), jti random, and loyaltyId, transactionId,
//     usedPoint, transactionAmount, transactionDate exactly as they travel
//     in the request body (transactionDate is the body's text, untouched);
//   - partner token: iss, aud = PartnerTokenAudience, typ =
//     PartnerTokenType, iat, exp (2 minutes, never more than
//     MaxPartnerTokenTTL, 5), jti random.
//
// A profile may name another algorithm (PS256 of an RSA key), iss, aud
// and typ (or none), lifetime, jti (random, the transactionId, or none)
// and the body fields a sign covers, each under a claim name of its own
// and as in the body or as a string. RedemptionSignClaims and
// PartnerTokenClaims show what would be signed (`loyalty-bridge api sign
// --explain` prints them).
//
// By default aud and typ keep one kind from being accepted as the other.
// A random jti is 128 bits from crypto/rand, new at every call: the
// service accepts each jti once, so a sign or partner token is good for
// one request and a retry needs a new one (the bridge signs each attempt
// afresh). Only registered claims and typ are added, which a verifier
// that does not know them ignores.
//
// The package owns key parsing and token minting only. It never logs, and no
// error it returns contains key material or a token.
package signing
