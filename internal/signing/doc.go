// Package signing makes the two JWTs the partner API asks of a partner: the
// redemption `sign` token and the partner token traded at exchange-token.
//
// A Signer holds one private key (RSA for RS256, ECDSA P-256 for ES256) read
// from PEM (PKCS#1, PKCS#8 or SEC1), an optional key id put in the `kid`
// header, and the partner's client_id used as `iss`. It is immutable after
// New and safe for concurrent use.
//
// Claims (fixed with the simulator, internal/sim):
//
//   - redemption sign: iss, iat, exp (short: SignTTL, default 2 minutes),
//     jti = transactionId, and loyaltyId, transactionId, usedPoint,
//     transactionAmount, transactionDate exactly as they travel in the
//     request body (transactionDate is the body's string, untouched);
//   - partner token: iss, iat, exp (PartnerTokenTTL, default 2 minutes,
//     never more than 5), jti random.
//
// The package owns key parsing and token minting only. It never logs, and no
// error it returns contains key material or a token.
package signing
