package loyalty

import (
	"errors"
	"fmt"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// LookupVerdict is what a Lookup Transaction answer says about a
// transaction of one kind, read through the partner profile.
type LookupVerdict int

// Verdicts of ClassifyLookup.
const (
	// LookupFailed: no answer to read (transient, auth, malformed...); the
	// error says why.
	LookupFailed LookupVerdict = iota
	// LookupApplied: found, of the kind asked, with an applied status.
	LookupApplied
	// LookupNotApplied: found, of the kind asked, with a failed status: it
	// took no effect.
	LookupNotApplied
	// LookupNotFound: answered with a not-found code.
	LookupNotFound
	// LookupMemberNotFound: answered with a member-not-found code: the
	// partner does not know the loyaltyId, so nothing was applied to it.
	// The error is the *BusinessError, for callers that report it.
	LookupMemberNotFound
	// LookupOtherKind: the transactionId names a transaction of the other
	// kind (the profile's type of it), and the profile keys transactions
	// by id alone (partnerprofile.KeyID): nothing of the kind asked, and
	// none can be written under that id. With id-and-type keying the
	// other kind is LookupUnrecognised (FieldSharedID) instead.
	LookupOtherKind
	// LookupUnrecognised: an error code, transactionType or status that
	// the profile does not name. The error is an
	// *UnrecognisedAnswerError; nothing may be concluded from it.
	LookupUnrecognised
)

func (v LookupVerdict) String() string {
	switch v {
	case LookupFailed:
		return "failed"
	case LookupApplied:
		return "applied"
	case LookupNotApplied:
		return "not_applied"
	case LookupNotFound:
		return "not_found"
	case LookupMemberNotFound:
		return "member_not_found"
	case LookupOtherKind:
		return "other_kind"
	case LookupUnrecognised:
		return "unrecognised"
	}
	return fmt.Sprintf("LookupVerdict(%d)", int(v))
}

// Fields an UnrecognisedAnswerError names.
const (
	FieldErrorCode       = "errorCode"
	FieldTransactionType = "transactionType"
	FieldStatus          = "status"
	// FieldTransactionPoint is refused by a caller that counts a lookup's
	// points and finds them no count (negative, or past int64 summed): the
	// bridge's clawback slots.
	FieldTransactionPoint = "transactionPoint"
	// FieldSharedID names a lookup that found the transactionId as the
	// other kind's transaction (Value: its transactionType) from a
	// partner keyed by id and type: the kind asked may exist beside it,
	// unseen, so nothing may be concluded (an order paid partly with
	// points, its accrual and redemption under one id).
	FieldSharedID = "sharedTransactionId"
)

// UnrecognisedAnswerError: a lookup answer whose error code,
// transactionType or status the partner profile does not name. The
// partner answered, but what it means is unknown: the bridge holds the
// record (asked again, never written) for a bounded time, rather than
// guess. Category TRANSIENT_EXHAUSTED, retryable; not
// an API failure.
type UnrecognisedAnswerError struct {
	Op, Ref string
	Field   string // FieldErrorCode, FieldTransactionType, FieldStatus, FieldTransactionPoint or FieldSharedID
	Value   string // as answered (at most 32 bytes and an ellipsis)
	Err     error  // the *BusinessError of an unrecognised code, else nil
}

func (e *UnrecognisedAnswerError) Error() string {
	if e.Field == FieldSharedID {
		return fmt.Sprintf("%sthe transactionId names a transaction of the other kind (transactionType %q); with transactions keyed by id and type, the one asked may exist beside it unseen", prefix(e.Op, e.Ref), e.Value)
	}
	return fmt.Sprintf("%sanswer not in the partner profile: %s %q", prefix(e.Op, e.Ref), e.Field, e.Value)
}

func (e *UnrecognisedAnswerError) Unwrap() error { return e.Err }

// IsUnrecognised reports whether err is an *UnrecognisedAnswerError.
func IsUnrecognised(err error) bool {
	_, ok := errors.AsType[*UnrecognisedAnswerError](err) // errors.As's target escaped: an allocation per call
	return ok
}

// ClassifyLookup reads the answer of LookupTransaction (t, err) about a
// transaction of kind through profile p. It is the one place that decides
// what a lookup answer means; the bridge's guard, its refunds and
// reconciliation all ask it.
//
//   - err a *BusinessError with one of p's not-found codes (in code,
//     errorCode or name): LookupNotFound, nil.
//   - err a *BusinessError with one of p's member-not-found codes:
//     LookupMemberNotFound and err (nothing was applied to a member the
//     partner does not know: a guarded write goes ahead, and is refused
//     as it would be unguarded; a refund reports the partner's code).
//   - err another *BusinessError: LookupUnrecognised and an
//     *UnrecognisedAnswerError (FieldErrorCode) wrapping it.
//   - any other err: LookupFailed, err.
//   - t of the other kind's type: with p keying transactions by id alone,
//     LookupOtherKind, nil; by id and type (the default),
//     LookupUnrecognised (FieldSharedID), since the kind asked may exist
//     under the same id and the lookup shows only one of them.
//   - t of a type p does not name: LookupUnrecognised (FieldTransactionType).
//   - t of kind with an applied status: LookupApplied; a failed status:
//     LookupNotApplied; another: LookupUnrecognised (FieldStatus).
func ClassifyLookup(p partnerprofile.Profile, kind partnerprofile.Kind, t *Transaction, err error) (LookupVerdict, error) {
	if err != nil {
		var be *BusinessError
		if !errors.As(err, &be) {
			return LookupFailed, err
		}
		for _, c := range []string{be.Code, be.ErrorCode, be.Name} {
			if p.IsNotFound(c) {
				return LookupNotFound, nil
			}
		}
		for _, c := range []string{be.Code, be.ErrorCode, be.Name} {
			if p.IsMemberNotFound(c) {
				return LookupMemberNotFound, err
			}
		}
		return LookupUnrecognised, &UnrecognisedAnswerError{Op: be.Op, Ref: be.Ref, Field: FieldErrorCode,
			Value: short(be.APICode()), Err: err}
	}
	if t == nil {
		return LookupFailed, fmt.Errorf("%sno transaction and no error", prefix(epLookup.name, ""))
	}
	unrecognised := func(field, value string) (LookupVerdict, error) {
		return LookupUnrecognised, &UnrecognisedAnswerError{Op: epLookup.name, Ref: tx(t.TransactionID), Field: field, Value: short(value)}
	}
	switch k := p.KindOf(t.TransactionType); {
	case k == 0:
		return unrecognised(FieldTransactionType, t.TransactionType)
	case k != kind && p.Key() == partnerprofile.KeyID:
		return LookupOtherKind, nil
	case k != kind:
		return unrecognised(FieldSharedID, t.TransactionType)
	}
	switch p.StatusOf(t.Status) {
	case partnerprofile.StatusApplied:
		return LookupApplied, nil
	case partnerprofile.StatusFailed:
		return LookupNotApplied, nil
	}
	return unrecognised(FieldStatus, t.Status)
}

// IsDuplicate reports whether err is a *BusinessError with one of p's
// duplicate codes (in code, errorCode or name): a write refused because
// its transactionId was seen before.
func IsDuplicate(p partnerprofile.Profile, err error) bool {
	var be *BusinessError
	if !errors.As(err, &be) {
		return false
	}
	return p.IsDuplicate(be.Code) || p.IsDuplicate(be.ErrorCode) || p.IsDuplicate(be.Name)
}
