package sim

import (
	"errors"
	"fmt"
	"math"
	"net/http"

	"github.com/google/uuid"
)

// TransactionEdit plants a change in the partner's transaction records
// (PUT /__sim/transactions/{transactionId}): what a partner's bug, a
// manual correction or an application outside the bridge would leave, for
// tests of loyalty-bridge reconcile.
type TransactionEdit struct {
	// Kind is TypeAccrual or TypeRedemption: which of the transactionId's
	// records (a transactionId may name one of each).
	Kind string `json:"kind"`
	// LoyaltyID is the member of a record to create (required then; an
	// existing record keeps its member).
	LoyaltyID string `json:"loyaltyId,omitempty"`
	// Points and Amount replace the record's transactionPoint and
	// transactionAmount when given (required when creating).
	Points *int64   `json:"points,omitempty"`
	Amount *float64 `json:"amount,omitempty"`
}

var errNoSuchKind = fmt.Errorf("kind: want %s or %s", TypeAccrual, TypeRedemption)

// EditTransaction changes the record of e.Kind named transactionID (its
// points, its amount), or creates one for e.LoyaltyID (a seeded or
// onboarded member) with a new bitReference. No balance moves and the
// ledger of effects is left alone: it plants a disagreement between the
// records and what the bridge reported, nothing else. created says
// whether the record is new.
func (s *Server) EditTransaction(transactionID string, e TransactionEdit) (created bool, err error) {
	switch {
	case transactionID == "":
		return false, errors.New("transactionId: required")
	case e.Points != nil && (*e.Points < 0 || *e.Points > maxAmount):
		return false, fmt.Errorf("points: want 0 to %g", maxAmount)
	case e.Amount != nil && (*e.Amount < 0 || *e.Amount > maxAmount || math.IsNaN(*e.Amount)):
		return false, fmt.Errorf("amount: want 0 to %g", maxAmount)
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	byID, err := s.st.records(e.Kind)
	if err != nil {
		return false, err
	}
	t := byID[transactionID]
	if t == nil {
		if e.LoyaltyID == "" || e.Points == nil || e.Amount == nil {
			return false, errors.New("a new record needs loyaltyId, points and amount")
		}
		if s.st.get(e.LoyaltyID) == nil {
			return false, fmt.Errorf("loyaltyId %s: no such member", e.LoyaltyID)
		}
		now := s.now()
		t = &txn{kind: s.typeName(e.Kind), loyaltyID: e.LoyaltyID, transactionID: transactionID, bitReference: s.st.bitRef(),
			requestID: uuid.NewString(), at: now, txTime: now}
		byID[transactionID] = t
		s.st.byBitRef[t.bitReference] = t
		created = true
	}
	if e.Points != nil {
		t.points = wholePoints(*e.Points)
	}
	if e.Amount != nil {
		t.amount = *e.Amount
	}
	if e.Kind == TypeAccrual {
		t.result = accrualResult{SponsorID: SponsorID, TransactionID: t.transactionID, BitReference: t.bitReference,
			LoyaltyID: t.loyaltyID, Timestamp: t.at.UTC().Format(isoMillisUTC), RequestID: t.requestID}
	} else {
		t.result = redemptionResult{RequestID: t.requestID, TransactionID: t.transactionID, BitReference: t.bitReference,
			UsedPoint: t.points.number(), Timestamp: t.at.UTC().Format(isoMillisUTC)}
	}
	return created, nil
}

// DeleteTransaction removes the record of kind named transactionID, as a
// partner that lost it would: lookups find it no more, by transactionId
// or bitReference. Balances and the ledger of effects are left alone. It
// reports whether there was such a record.
func (s *Server) DeleteTransaction(kind, transactionID string) (bool, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	byID, err := s.st.records(kind)
	if err != nil {
		return false, err
	}
	t := byID[transactionID]
	if t == nil {
		return false, nil
	}
	delete(byID, transactionID)
	delete(s.st.byBitRef, t.bitReference)
	return true, nil
}

// typeName is the transactionType the simulator's profile gives records
// of the admin API's kind (TypeAccrual or TypeRedemption), so that a
// planted record answers as the API's own do.
func (s *Server) typeName(kind string) string {
	if kind == TypeAccrual {
		return s.opts.Profile.AccrualType
	}
	return s.opts.Profile.RedemptionType
}

// records are the transactions of kind by transactionId. Caller holds mu.
func (st *state) records(kind string) (map[string]*txn, error) {
	switch kind {
	case TypeAccrual:
		return st.accruals, nil
	case TypeRedemption:
		return st.redemptions, nil
	}
	return nil, errNoSuchKind
}

// adminTransaction serves /__sim/transactions/{transactionId}: PUT
// EditTransaction, DELETE ?kind=K DeleteTransaction (404 when there is no
// such record).
func (s *Server) adminTransaction(r *http.Request, id string, readJSON func(any) error) reply {
	switch r.Method {
	case http.MethodPut:
		var e TransactionEdit
		if err := readJSON(&e); err != nil {
			return adminBad(err)
		}
		created, err := s.EditTransaction(id, e)
		if err != nil {
			return adminBad(err)
		}
		return adminOK(map[string]bool{"created": created})
	case http.MethodDelete:
		found, err := s.DeleteTransaction(r.URL.Query().Get("kind"), id)
		switch {
		case err != nil:
			return adminBad(err)
		case !found:
			return badRequest(CodeTransactionNotFound, "Transaction not found")
		}
		return adminOK(map[string]bool{"deleted": true})
	}
	return methodNotAllowed(http.MethodPut, http.MethodDelete)
}
