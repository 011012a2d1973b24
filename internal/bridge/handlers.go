package bridge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/circuit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
)

// Transaction types of lookup answers.
const (
	typeAccrual    = "ACCRUAL"
	typeRedemption = "REDEMPTION"
)

func (b *Bridge) accrue(ctx context.Context, j *job, ev *events.PurchaseCompleted) error {
	req := loyalty.AccrualRequest{LoyaltyID: ev.LoyaltyID, TransactionID: ev.TransactionID,
		TransactionDate: loyalty.TransactionDate{Time: ev.TransactionDate}, TransactionAmount: ev.Amount,
		TransactionCurrency: ev.Currency, TransactionDes: rawJSON(ev.Description), ExtraData: rawJSON(ev.ExtraData)}
	if ev.ItemID != nil {
		req.ItemID = *ev.ItemID
	}
	return b.retry(ctx, j, func(ctx context.Context) error {
		if done, err := b.guarded(ctx, j, ev.LoyaltyID, ev.TransactionID, typeAccrual); done || err != nil {
			return err
		}
		r, _, err := b.o.Client.Accrue(ctx, req)
		if err != nil {
			return b.writeFailed(ctx, j, ev.LoyaltyID, ev.TransactionID, typeAccrual, err)
		}
		j.result = &events.LoyaltyResult{Outcome: events.OutcomeApplied, LoyaltyID: &ev.LoyaltyID,
			BitReference: optional(r.BitReference), SponsorID: ptr(r.SponsorID), RequestID: optional(r.RequestID),
			APITimestamp: optional(r.Timestamp)}
		return nil
	})
}

func (b *Bridge) redeem(ctx context.Context, j *job, ev *events.RedemptionRequested) error {
	req := loyalty.RedemptionRequest{TransactionID: ev.TransactionID, LoyaltyID: ev.LoyaltyID,
		TransactionDate: apiDate(ev.TransactionDate), TransactionAmount: ev.Amount, UsedPoint: ev.UsedPoint}
	if ev.Description != nil {
		req.TransactionDes = *ev.Description
	}
	if ev.Sign != nil {
		req.Sign = *ev.Sign
	}
	return b.retry(ctx, j, func(ctx context.Context) error { return b.redemption(ctx, j, req) })
}

// redemption is one attempt at a guarded point-redemption-with-token. An
// unsigned req is signed here, afresh each attempt: a sign made before an
// outage may have expired after it.
func (b *Bridge) redemption(ctx context.Context, j *job, req loyalty.RedemptionRequest) error {
	if done, err := b.guarded(ctx, j, req.LoyaltyID, req.TransactionID, typeRedemption); done || err != nil {
		return err
	}
	if req.Sign == "" && b.o.Signer != nil {
		s, err := b.o.Signer.RedemptionSign(signing.Redemption{LoyaltyID: req.LoyaltyID, TransactionID: req.TransactionID,
			UsedPoint: req.UsedPoint, TransactionAmount: req.TransactionAmount, TransactionDate: req.TransactionDate})
		if err != nil {
			return &recordFailure{cat: events.CategoryInternal, err: fmt.Errorf("bridge: sign redemption %s: %w", req.TransactionID, err)}
		}
		req.Sign = s
	}
	r, _, err := b.o.Client.Redeem(ctx, req)
	if err != nil {
		return b.writeFailed(ctx, j, req.LoyaltyID, req.TransactionID, typeRedemption, err)
	}
	j.result = &events.LoyaltyResult{Outcome: events.OutcomeApplied, LoyaltyID: &req.LoyaltyID,
		BitReference: optional(r.BitReference), UsedPoint: ptr(r.UsedPoint), RequestID: optional(r.RequestID),
		APITimestamp: optional(r.Timestamp)}
	return nil
}

// refund is a clawback: the original accrual is looked up once, then the
// proportional redemption is attempted (guarded) until done. One record
// attempt is the whole sequence, so a refund that goes through at once
// reports one attempt.
func (b *Bridge) refund(ctx context.Context, j *job, ev *events.PurchaseRefunded) error {
	var req *loyalty.RedemptionRequest
	return b.retry(ctx, j, func(ctx context.Context) error {
		if req == nil {
			t, _, err := b.o.Client.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: ev.LoyaltyID, TransactionID: ev.OriginalTransactionID})
			switch {
			case errors.Is(err, loyalty.ErrTransactionNotFound):
				return &recordFailure{cat: events.CategoryBusiness, reason: events.ReasonOriginalNotFound,
					err: fmt.Errorf("refund %s: original transaction %s not found: %w", ev.TransactionID, ev.OriginalTransactionID, err)}
			case err != nil:
				return err
			case t.TransactionType != "" && t.TransactionType != typeAccrual:
				return &recordFailure{cat: events.CategoryBusiness, reason: events.ReasonOriginalNotFound,
					err: fmt.Errorf("refund %s: original transaction %s is a %s, not an accrual", ev.TransactionID,
						ev.OriginalTransactionID, t.TransactionType)}
			}
			points := clawback(t.TransactionPoint, t.TransactionAmount, ev.RefundAmount)
			if points == 0 {
				j.result = &events.LoyaltyResult{Outcome: events.OutcomeNoOp, LoyaltyID: &ev.LoyaltyID, UsedPoint: ptr(int64(0))}
				return nil
			}
			req = &loyalty.RedemptionRequest{TransactionID: ev.TransactionID, LoyaltyID: ev.LoyaltyID,
				TransactionDate: apiDate(ev.RefundDate), TransactionAmount: ev.RefundAmount, UsedPoint: points,
				TransactionDes: "refund of " + ev.OriginalTransactionID}
		}
		return b.redemption(ctx, j, *req)
	})
}

// clawback is round(points × refund / amount), capped at points; a zero or
// negative original amount claws back nothing.
func clawback(points int64, amount, refund float64) int64 {
	if points <= 0 || amount <= 0 || refund <= 0 {
		return 0
	}
	p := int64(math.Round(float64(points) * refund / amount))
	return min(max(p, 0), points)
}

// guarded runs the idempotency guard when j needs it: true when the
// transaction already exists (j.result is then ALREADY_APPLIED).
func (b *Bridge) guarded(ctx context.Context, j *job, loyaltyID, txID, kind string) (bool, error) {
	if !j.guard {
		return false, nil
	}
	j.guarded = true
	found, err := b.lookup(ctx, j, loyaltyID, txID, kind)
	if err != nil {
		return false, err
	}
	j.guard = false
	return found, nil
}

// lookup asks whether txID of kind exists, and sets j.result to
// ALREADY_APPLIED if so.
func (b *Bridge) lookup(ctx context.Context, j *job, loyaltyID, txID, kind string) (bool, error) {
	t, _, err := b.o.Client.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: loyaltyID, TransactionID: txID})
	result := "found"
	switch {
	case errors.Is(err, loyalty.ErrTransactionNotFound):
		result, err = "not_found", nil
	case err != nil:
		result = "error"
	case t.TransactionType != "" && t.TransactionType != kind:
		// The same id names a transaction of the other kind.
		result = "not_found"
	}
	if m := b.o.Metrics; m != nil {
		m.GuardLookups.WithLabelValues(result).Inc()
	}
	if result != "found" {
		return false, err
	}
	j.result = &events.LoyaltyResult{Outcome: events.OutcomeAlreadyApplied, LoyaltyID: &loyaltyID,
		BitReference: optional(t.BitReference), Points: ptr(t.TransactionPoint), RequestID: optional(t.RequestID),
		APITimestamp: optional(t.Timestamp)}
	if kind == typeRedemption {
		j.result.UsedPoint = ptr(t.TransactionPoint)
	}
	b.log.Debug("already applied", zap.String("transactionId", txID), zap.String("kind", kind))
	return true, nil
}

// writeFailed handles a failed accrual or redemption: a duplicate is
// looked up (ALREADY_APPLIED), an ambiguous failure guards the next attempt.
func (b *Bridge) writeFailed(ctx context.Context, j *job, loyaltyID, txID, kind string, err error) error {
	if errors.Is(err, loyalty.ErrDuplicateTransaction) {
		b.log.Debug("write answered duplicate; looking it up", zap.String("transactionId", txID), zap.String("kind", kind),
			zap.Bool("guarded", j.guarded))
		found, lerr := b.lookup(ctx, j, loyaltyID, txID, kind)
		switch {
		case lerr != nil:
			j.guard = true
			return lerr
		case found:
			return nil
		}
		// Duplicate by the partner's account but not found by lookup:
		// nothing to apply twice, and nothing to report as applied.
		return err
	}
	if loyalty.IsAmbiguous(err) {
		j.guard = true
	}
	return err
}

func (b *Bridge) onboard(ctx context.Context, j *job, ev *events.MemberOnboardRequested) error {
	req := loyalty.OnboardRequest{Phone: ev.Phone, FullName: ev.FullName, Gender: ev.Gender, Birthday: ev.Birthday,
		IsKYC: ev.IsKYC, PlaceOfIssue: ev.PlaceOfIssue, PlaceOfBirth: ev.PlaceOfBirth, IssueDate: ev.IssueDate,
		ExpireDate: ev.ExpireDate, Nationality: ev.Nationality, Address: ev.Address, ExternalID: ev.ExternalID,
		FirstName: deref(ev.FirstName), LastName: deref(ev.LastName), Email: deref(ev.Email),
		IDNumber: deref(ev.IDNumber), PassportNumber: deref(ev.PassportNumber)}
	err := b.retry(ctx, j, func(ctx context.Context) error {
		m, _, err := b.o.Client.Onboard(ctx, req)
		if err != nil {
			if loyalty.IsAmbiguous(err) {
				// No idempotency key: a second call could enrol the
				// person twice. Report it for an operator to check.
				return &recordFailure{cat: events.CategoryTransientExhausted,
					err: fmt.Errorf("onboarding may have been applied, not re-sent (check externalId %s before replaying): %w", ev.ExternalID, err)}
			}
			return err
		}
		j.result = &events.LoyaltyResult{Outcome: events.OutcomeOnboarded, LoyaltyID: optional(m.MemberCode),
			MemberCode: optional(m.MemberCode), CreatedAt: optional(m.CreatedAt)}
		return nil
	})
	if err == nil {
		b.enrich(ctx, j.result)
	}
	return err
}

func (b *Bridge) link(ctx context.Context, j *job, loyaltyID, partnerID string, unlink bool) error {
	req := loyalty.LinkRequest{LoyaltyID: loyaltyID, PartnerMemberID: partnerID}
	err := b.retry(ctx, j, func(ctx context.Context) error {
		var err error
		if unlink {
			_, _, err = b.o.Client.Unlink(ctx, req)
		} else {
			_, _, err = b.o.Client.Link(ctx, req)
		}
		r := &events.LoyaltyResult{LoyaltyID: &loyaltyID}
		switch {
		case err == nil && unlink:
			r.Outcome, r.LinkState, r.StateChanged = events.OutcomeUnlinked, ptr(events.LinkStateNotLinked), ptr(true)
		case err == nil:
			r.Outcome, r.LinkState, r.StateChanged = events.OutcomeLinked, ptr(events.LinkStateLinked), ptr(true)
		case !unlink && loyalty.IsMemberLinked(err):
			r.Outcome, r.LinkState, r.StateChanged = events.OutcomeAlreadyLinked, ptr(events.LinkStateLinked), ptr(false)
			r.APIErrorCode = ptr(string(loyalty.ErrMemberIsLinked))
		case unlink && loyalty.IsMemberNotLinked(err):
			r.Outcome, r.LinkState, r.StateChanged = events.OutcomeNotLinked, ptr(events.LinkStateNotLinked), ptr(false)
			r.APIErrorCode = ptr(string(loyalty.ErrMemberNotLinked))
		default:
			return err
		}
		j.result = r
		return nil
	})
	if err == nil {
		b.enrich(ctx, j.result)
	}
	return err
}

// enrich adds non-personal profile fields to a member result; failures
// only leave them out. It does not wait for an open or probing circuit:
// optional fields are not worth holding a command's answer.
func (b *Bridge) enrich(ctx context.Context, r *events.LoyaltyResult) {
	if !b.o.Enrich || r.LoyaltyID == nil {
		return
	}
	if b.o.Breaker != nil && b.o.Breaker.State() != circuit.Closed {
		return
	}
	if p, _, err := b.o.Client.CustomerInfo(ctx, *r.LoyaltyID); err == nil {
		r.MemberStatus, r.EKYCStatus = optional(p.Status), optional(p.EKYCStatus)
	} else {
		b.log.Debug("enrichment: customer info", zap.String("loyaltyId", *r.LoyaltyID), zap.Error(err))
	}
	if p, _, err := b.o.Client.CustomerProfile(ctx, *r.LoyaltyID); err == nil {
		r.TierClass = optional(p.TierClass)
	} else {
		b.log.Debug("enrichment: customer profile", zap.String("loyaltyId", *r.LoyaltyID), zap.Error(err))
	}
}

// apiDate is a redemption transactionDate: RFC 3339 UTC with milliseconds.
func apiDate(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func rawJSON(s *string) json.RawMessage {
	if s == nil || *s == "" {
		return nil
	}
	return json.RawMessage(*s)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// piiScrubber removes the event's personal data (events.PersonalFields)
// from API texts copied into error events (a partner may echo a phone or an
// ID number back), putting events.Redacted in its place. Values shorter
// than 3 bytes are left alone: replacing them would mangle the text and
// they identify no one. Longer values go first, so that a last name inside
// the full name cannot leave the rest of the full name behind.
func piiScrubber(ev events.Event) func(string) string {
	o, ok := ev.(*events.MemberOnboardRequested)
	if !ok {
		return func(s string) string { return s }
	}
	var values []string
	for _, v := range o.PersonalData() {
		if len(v) >= 3 {
			values = append(values, v)
		}
	}
	slices.SortFunc(values, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	return func(s string) string {
		for _, v := range values {
			s = strings.ReplaceAll(s, v, events.Redacted)
		}
		return s
	}
}
