// Package partnerprofile names what the partner API spec
// (docs/partner-api.md) leaves open and a client must
// nevertheless know: the error codes of "transaction not found" and
// "duplicate transaction", the transactionType values of accruals and
// redemptions, whether a transaction is keyed by its transactionId alone
// or by id and kind (TransactionKey), which transaction statuses mean
// applied (and which mean failed), the wire encodings of the accrual and
// redemption transactionDate (format and JSON type), whether an unset idNumber or
// passportNumber is left out or sent as null, what a fractional point
// value means, which query parameters of an error's resultUrl may be
// published, and the claims of the two JWTs a partner signs (JWT: the
// algorithm, iss, aud, typ, lifetime and jti of the redemption sign and
// the partner token, the body fields the sign covers, and the codes of a
// refused sign), and the codes of a call refused for the form of a field
// those wire settings choose (with FieldParam, how an onboarding refusal
// names the field).
//
// A Profile is plain data with its defaults, which are the simulator's
// choices: the simulator (internal/sim) answers as its Profile says, the
// client (internal/loyalty) decodes and classifies answers as its Profile
// says, and the bridge never matches a partner's string of its own. The
// package imports nothing of the project, so that the simulator can use it
// without knowing the client; reading a lookup answer through a Profile is
// loyalty.ClassifyLookup. Its settings are the config.Partner section.
package partnerprofile
