package reconcile

import (
	"errors"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
)

// Kind is the kind of partner transaction a reply is about.
type Kind string

// Kinds. A refund's clawback is a redemption on the partner's side.
const (
	KindAccrual    Kind = "accrual"
	KindRedemption Kind = "redemption"
)

// Answer is what a lookup-transaction-id answer means for one transaction.
type Answer int

// Answers. The zero value is Unrecognised, so that a classifier that
// forgets a case reports it instead of guessing.
const (
	// Unrecognised: an answer the classifier does not know (a status, a
	// transactionType or an error code it was not told about). Reported
	// as such, never taken for "applied" or "not found".
	Unrecognised Answer = iota
	// NotFound: the partner has no such transaction.
	NotFound
	// Applied: the partner has it, applied.
	Applied
)

func (a Answer) String() string {
	switch a {
	case NotFound:
		return "not found"
	case Applied:
		return "applied"
	}
	return "unrecognised"
}

// Classifier says what a lookup answer means for a transaction of kind:
// t is the record the partner returned, or nil with err the answer it
// gave instead (a *loyalty.BusinessError: its error envelope; a
// *loyalty.MalformedResponseError: an answer that does not read). Calls
// that got no answer (retries exhausted, credentials refused) never reach
// it: they are reported as not checked.
//
// It is the one place where the partner's names for "not found", its
// transaction types and its statuses are interpreted, so that reconcile
// and the bridge's idempotency guard read an answer the same way: the
// coordinator plugs the partner profile's classifier in here
// (Options.Classify). It must be safe for concurrent use.
type Classifier func(kind Kind, t *loyalty.Transaction, err error) Answer

// Names of the simulator's answers that GuardRules knows, as the bridge's
// guard matches them today.
const (
	guardAccrualType    = "ACCRUAL"
	guardRedemptionType = "REDEMPTION"
	guardStatusApplied  = "SUCCESS"
)

// GuardRules classifies as the bridge's guard does today, with the
// simulator's names (the spec shows none): the error code
// TRANSACTION_NOT_FOUND is NotFound; a record whose transactionType is the
// other kind's (ACCRUAL, REDEMPTION) is NotFound too, as the guard takes
// it (the id names another transaction); a record of the kind asked, or of
// no type, is Applied when its status is SUCCESS or empty. Anything else
// is Unrecognised: another error code, another transactionType, another
// status (stricter than the guard, which ignores the status), an answer
// that does not read. It is the default of Options.Classify until the
// partner profile's classifier replaces it.
func GuardRules(kind Kind, t *loyalty.Transaction, err error) Answer {
	switch {
	case errors.Is(err, loyalty.ErrTransactionNotFound):
		return NotFound
	case err != nil || t == nil:
		return Unrecognised
	}
	want, other := guardAccrualType, guardRedemptionType
	if kind == KindRedemption {
		want, other = other, want
	}
	switch t.TransactionType {
	case want, "":
	case other:
		return NotFound
	default:
		return Unrecognised
	}
	if t.Status != guardStatusApplied && t.Status != "" {
		return Unrecognised
	}
	return Applied
}
