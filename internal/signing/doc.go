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
// Claims (the spec names none; these are fixed with the simulator,
// internal/sim, which reads the constants of this package):
//
//   - redemption sign: iss, aud = RedemptionSignAudience, typ =
//     RedemptionSignType, iat, exp (short: SignTTL, default 2 minutes,
//     never more than MaxSignTTL, 5), jti random, and loyaltyId,
//     transactionId, usedPoint, transactionAmount, transactionDate exactly
//     as they travel in the request body (transactionDate is the body's
//     string, untouched);
//   - partner token: iss, aud = PartnerTokenAudience, typ =
//     PartnerTokenType, iat, exp (PartnerTokenTTL, default 2 minutes, never
//     more than MaxPartnerTokenTTL, 5), jti random.
//
// aud and typ keep one kind from being accepted as the other. jti is 128
// bits from crypto/rand, new at every call: the service accepts each jti
// once, so a sign or partner token is good for one request and a retry
// needs a new one (the bridge signs each attempt afresh). Only registered
// claims and typ are added, which a verifier that does not know them
// ignores.
//
// The package owns key parsing and token minting only. It never logs, and no
// error it returns contains key material or a token.
package signing
