package bridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// A lookup that finds the transactionId as the other kind's transaction
// is never "not applied": keyed by id and type (the default), the kind
// asked may be beside it unseen, so the record is held (an unrecognised
// answer, field sharedTransactionId); keyed by id alone, the partner holds
// only the other one, and the record is its BUSINESS error, the guard's
// TRANSACTION_ID_CONFLICT, a refund's ORIGINAL_NOT_FOUND or
// CLAWBACK_CONFLICT. Nothing is written either way.
func TestSharedTransactionID(t *testing.T) {
	byID := prof
	byID.TransactionKey = partnerprofile.KeyID
	accrual := &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 100, TransactionAmount: 1000}
	asRedemption := &loyalty.Transaction{TransactionType: redemptionType, Status: appliedStatus, TransactionPoint: 5}
	refundEv := &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 250,
		RefundDate: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	guarded := func(f *fakePartner, p partnerprofile.Profile, guard bool) *guardedPartner {
		return &guardedPartner{partner: f, b: &Bridge{o: Options{Profile: p}, log: zap.NewNop()}, st: &recordState{guard: guard}}
	}
	for _, tc := range []struct {
		name   string
		run    func(p partnerprofile.Profile) (*fakePartner, error)
		reason string // with id alone
		writes int    // made before the lookup (an unguarded first write)
	}{
		{"guarded redemption finds the accrual", func(p partnerprofile.Profile) (*fakePartner, error) {
			f := &fakePartner{lookup: accrual}
			_, err := redemption(context.Background(), guarded(f, p, true),
				loyalty.RedemptionRequest{TransactionID: "T-1", LoyaltyID: "L-1", UsedPoint: 100, Sign: "s"})
			return f, err
		}, events.ReasonTransactionIDConflict, 0},
		{"duplicate answer, looked up, finds the accrual", func(p partnerprofile.Profile) (*fakePartner, error) {
			f := &fakePartner{lookup: accrual, redeem: &loyalty.BusinessError{Code: partnerprofile.DefaultDuplicateCode}}
			_, err := redemption(context.Background(), guarded(f, p, false),
				loyalty.RedemptionRequest{TransactionID: "T-1", LoyaltyID: "L-1", UsedPoint: 100, Sign: "s"})
			return f, err
		}, events.ReasonTransactionIDConflict, 1},
		{"refund's original found as a redemption", func(p partnerprofile.Profile) (*fakePartner, error) {
			f := &fakePartner{lookup: asRedemption}
			_, err := refund(context.Background(), refundEv, p, guarded(f, p, false))
			return f, err
		}, events.ReasonOriginalNotFound, 0},
		{"clawback slot found as an accrual", func(p partnerprofile.Profile) (*fakePartner, error) {
			f := &fakePartner{lookup: accrual, slots: map[string]*loyalty.Transaction{"T-1~cb1": {TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 5}}}
			_, err := refund(context.Background(), refundEv, p, guarded(f, p, false))
			return f, err
		}, events.ReasonClawbackConflict, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := tc.run(prof)
			var ue *loyalty.UnrecognisedAnswerError
			if !errors.As(err, &ue) || ue.Field != loyalty.FieldSharedID || !transient(err) {
				t.Errorf("keyed by id and type: %v, want a held sharedTransactionId answer", err)
			}
			if writes(f) != tc.writes {
				t.Errorf("keyed by id and type: wrote %v", f.calls)
			}
			f, err = tc.run(byID)
			var rf *recordFailure
			if !errors.As(err, &rf) || rf.cat != events.CategoryBusiness || rf.reason != tc.reason {
				t.Errorf("keyed by id: %v, want BUSINESS %s", err, tc.reason)
			}
			if writes(f) != tc.writes {
				t.Errorf("keyed by id: wrote %v", f.calls)
			}
		})
	}
}

// writes counts f's redemption calls.
func writes(f *fakePartner) int {
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, "redeem") {
			n++
		}
	}
	return n
}
