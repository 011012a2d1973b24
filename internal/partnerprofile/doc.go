// Package partnerprofile names what the partner API spec
// (../shared/spec/partner-loyalty-api.md) leaves open and a client must
// nevertheless know: the error codes of "transaction not found" and
// "duplicate transaction", the transactionType values of accruals and
// redemptions, which transaction statuses mean applied (and which mean
// failed), the wire formats of the accrual and redemption
// transactionDate, what a fractional point value means, and which query
// parameters of an error's resultUrl may be published.
//
// A Profile is plain data with its defaults, which are the simulator's
// choices: the simulator (internal/sim) answers as its Profile says, the
// client (internal/loyalty) decodes and classifies answers as its Profile
// says, and the bridge never matches a partner's string of its own. The
// package imports nothing of the project, so that the simulator can use it
// without knowing the client; reading a lookup answer through a Profile is
// loyalty.ClassifyLookup. Its settings are the config.Partner section.
package partnerprofile
