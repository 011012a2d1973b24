package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// partner is the partner API as a handler sees it: the calls an event may
// need, without call metadata. The attempt policy hands each attempt a
// partner whose writes are guarded (see policy.go); handlers neither know
// nor care.
type partner interface {
	Accrue(ctx context.Context, r loyalty.AccrualRequest) (*loyalty.AccrualResult, error)
	Redeem(ctx context.Context, r loyalty.RedemptionRequest) (*loyalty.RedemptionResult, error)
	LookupTransaction(ctx context.Context, r loyalty.LookupRequest) (*loyalty.Transaction, error)
	Onboard(ctx context.Context, r loyalty.OnboardRequest) (*loyalty.OnboardedMember, error)
	Link(ctx context.Context, r loyalty.LinkRequest) error
	Unlink(ctx context.Context, r loyalty.LinkRequest) error
	CustomerInfo(ctx context.Context, loyaltyID string) (*loyalty.MemberProfile, error)
	CustomerProfile(ctx context.Context, loyaltyID string) (*loyalty.ExtendedProfile, error)
}

// handler is one attempt at what an event asks of the partner: the outcome
// to report, or an error. Handlers are pure functions of the event and the
// partner's answers; retries, the circuit and the idempotency guard are the
// policy wrapped around them.
type handler func(ctx context.Context, p partner) (*events.LoyaltyResult, error)

// handlerFor binds ev to its handler; prof is what the partner answers
// where the spec is silent. A pointer: a Profile captured by value was
// moved to the heap on every call, whatever ev was (half a kilobyte per
// record).
func handlerFor(ev events.Event, prof *partnerprofile.Profile) (handler, error) {
	switch ev := ev.(type) {
	case *events.PurchaseCompleted:
		return func(ctx context.Context, p partner) (*events.LoyaltyResult, error) { return accrue(ctx, ev, p) }, nil
	case *events.RedemptionRequested:
		return func(ctx context.Context, p partner) (*events.LoyaltyResult, error) { return redeem(ctx, ev, *prof, p) }, nil
	case *events.PurchaseRefunded:
		return func(ctx context.Context, p partner) (*events.LoyaltyResult, error) { return refund(ctx, ev, *prof, p) }, nil
	case *events.MemberOnboardRequested:
		return func(ctx context.Context, p partner) (*events.LoyaltyResult, error) { return onboard(ctx, ev, p) }, nil
	case *events.MemberLinkRequested:
		return func(ctx context.Context, p partner) (*events.LoyaltyResult, error) {
			return link(ctx, p, ev.LoyaltyID, ev.PartnerMemberID, false)
		}, nil
	case *events.MemberUnlinkRequested:
		return func(ctx context.Context, p partner) (*events.LoyaltyResult, error) {
			return link(ctx, p, ev.LoyaltyID, ev.PartnerMemberID, true)
		}, nil
	}
	return nil, fmt.Errorf("bridge: no handler for %s", ev.Type())
}

// memberEvent reports whether ev's result may be enriched with profile
// fields.
func memberEvent(ev events.Event) bool {
	switch ev.(type) {
	case *events.MemberOnboardRequested, *events.MemberLinkRequested, *events.MemberUnlinkRequested:
		return true
	}
	return false
}

func accrue(ctx context.Context, ev *events.PurchaseCompleted, p partner) (*events.LoyaltyResult, error) {
	req := loyalty.AccrualRequest{LoyaltyID: ev.LoyaltyID, TransactionID: ev.TransactionID,
		TransactionDate: loyalty.TransactionDate{Time: ev.TransactionDate}, TransactionAmount: ev.Amount,
		TransactionCurrency: ev.Currency, TransactionDes: rawJSON(ev.Description), ExtraData: rawJSON(ev.ExtraData)}
	if ev.ItemID != nil {
		req.ItemID = *ev.ItemID
	}
	r, err := p.Accrue(ctx, req)
	if err != nil {
		return nil, err
	}
	return &events.LoyaltyResult{Outcome: events.OutcomeApplied, LoyaltyID: &ev.LoyaltyID,
		BitReference: optional(r.BitReference), SponsorID: ptr(r.SponsorID), RequestID: optional(r.RequestID),
		APITimestamp: optional(r.Timestamp)}, nil
}

func redeem(ctx context.Context, ev *events.RedemptionRequested, prof partnerprofile.Profile, p partner) (*events.LoyaltyResult, error) {
	req := loyalty.RedemptionRequest{TransactionID: ev.TransactionID, LoyaltyID: ev.LoyaltyID,
		TransactionDate: prof.RedemptionDate(ev.TransactionDate), TransactionAmount: ev.Amount, UsedPoint: ev.UsedPoint}
	if ev.Description != nil {
		req.TransactionDes = *ev.Description
	}
	if ev.Sign != nil {
		req.Sign = *ev.Sign
	}
	return redemption(ctx, p, req)
}

func redemption(ctx context.Context, p partner, req loyalty.RedemptionRequest) (*events.LoyaltyResult, error) {
	r, err := p.Redeem(ctx, req)
	if err != nil {
		return nil, err
	}
	return &events.LoyaltyResult{Outcome: events.OutcomeApplied, LoyaltyID: &req.LoyaltyID,
		BitReference: optional(r.BitReference), UsedPoint: ptr(r.UsedPoint), RequestID: optional(r.RequestID),
		APITimestamp: optional(r.Timestamp)}, nil
}

// refund is a clawback: the original accrual is looked up, then the
// proportional redemption is made in the original's next clawback slot,
// capped at what its earlier clawbacks left (clawback.go).
// One record attempt is the whole sequence, so a refund that goes through
// at once reports one attempt.
func refund(ctx context.Context, ev *events.PurchaseRefunded, prof partnerprofile.Profile, p partner) (*events.LoyaltyResult, error) {
	t, err := p.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: ev.LoyaltyID, TransactionID: ev.OriginalTransactionID})
	notFound := func(format string, args ...any) *recordFailure {
		return &recordFailure{cat: events.CategoryBusiness, reason: events.ReasonOriginalNotFound,
			err: fmt.Errorf("refund %s: original transaction %s "+format, append([]any{ev.TransactionID, ev.OriginalTransactionID}, args...)...)}
	}
	// An answer the profile does not name (an unknown code, type or
	// status) is an attempt failure retry holds: nothing is clawed back on
	// a guess.
	switch v, err := loyalty.ClassifyLookup(prof, partnerprofile.Accrual, t, err); v {
	case loyalty.LookupNotFound:
		// Perhaps not yet: purchases and refunds are on different topics.
		// With parking, the refund waits for it (park.go).
		f := notFound("not found")
		f.originalMissing = true
		return nil, f
	case loyalty.LookupMemberNotFound:
		// The partner does not know the member: its refusal, with its
		// code, is the answer (BUSINESS), as an accrual's would be.
		return nil, err
	case loyalty.LookupOtherKind:
		return nil, notFound("is a %s, not an accrual", t.TransactionType)
	case loyalty.LookupNotApplied:
		return nil, notFound("was not applied (status %s): nothing was earned", t.Status)
	case loyalty.LookupApplied:
	default:
		return nil, err
	}
	points := clawback(t.TransactionPoint, t.TransactionAmount, ev.RefundAmount)
	if points == 0 {
		return &events.LoyaltyResult{Outcome: events.OutcomeNoOp, LoyaltyID: &ev.LoyaltyID, UsedPoint: ptr(int64(0)),
			Points: ptr(int64(0)), RequestedPoints: ptr(int64(0))}, nil
	}
	return clawBack(ctx, p, ev, t.TransactionPoint, points)
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

func onboard(ctx context.Context, ev *events.MemberOnboardRequested, p partner) (*events.LoyaltyResult, error) {
	req := loyalty.OnboardRequest{Phone: ev.Phone, FullName: ev.FullName, Gender: ev.Gender, Birthday: ev.Birthday,
		IsKYC: ev.IsKYC, PlaceOfIssue: ev.PlaceOfIssue, PlaceOfBirth: ev.PlaceOfBirth, IssueDate: ev.IssueDate,
		ExpireDate: ev.ExpireDate, Nationality: ev.Nationality, Address: ev.Address, ExternalID: ev.ExternalID,
		FirstName: deref(ev.FirstName), LastName: deref(ev.LastName), Email: deref(ev.Email),
		IDNumber: deref(ev.IDNumber), PassportNumber: deref(ev.PassportNumber)}
	m, err := p.Onboard(ctx, req)
	if err != nil {
		if loyalty.IsAmbiguous(err) {
			// No idempotency key: a second call could enrol the person
			// twice. Report it for an operator to check.
			return nil, &recordFailure{cat: events.CategoryTransientExhausted,
				err: fmt.Errorf("onboarding may have been applied, not re-sent (check externalId %s before replaying): %w", ev.ExternalID, err)}
		}
		return nil, err
	}
	return &events.LoyaltyResult{Outcome: events.OutcomeOnboarded, LoyaltyID: optional(m.MemberCode),
		MemberCode: optional(m.MemberCode), CreatedAt: optional(m.CreatedAt)}, nil
}

// link links or unlinks; the partner's "already in that state" answers
// are results (stateChanged false), not errors.
func link(ctx context.Context, p partner, loyaltyID, partnerID string, unlink bool) (*events.LoyaltyResult, error) {
	req := loyalty.LinkRequest{LoyaltyID: loyaltyID, PartnerMemberID: partnerID}
	var err error
	if unlink {
		err = p.Unlink(ctx, req)
	} else {
		err = p.Link(ctx, req)
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
		return nil, err
	}
	return r, nil
}

// enrich adds non-personal profile fields to a member result; failures
// only leave them out and are returned for the caller to log.
func enrich(ctx context.Context, p partner, r *events.LoyaltyResult) []error {
	var errs []error
	if pr, err := p.CustomerInfo(ctx, *r.LoyaltyID); err == nil {
		r.MemberStatus, r.EKYCStatus = optional(pr.Status), optional(pr.EKYCStatus)
	} else {
		errs = append(errs, fmt.Errorf("customer info: %w", err))
	}
	if pr, err := p.CustomerProfile(ctx, *r.LoyaltyID); err == nil {
		r.TierClass = optional(pr.TierClass)
	} else {
		errs = append(errs, fmt.Errorf("customer profile: %w", err))
	}
	return errs
}

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
