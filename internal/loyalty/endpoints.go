package loyalty

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
)

func member(id string) string {
	if id == "" {
		return ""
	}
	return "member=" + id
}

func tx(id string) string {
	if id == "" {
		return ""
	}
	return "tx=" + id
}

func require(op, ref string, checks ...any) error {
	var problems []string
	for i := 0; i+1 < len(checks); i += 2 {
		if ok, _ := checks[i].(bool); !ok {
			problems = append(problems, checks[i+1].(string))
		}
	}
	if problems != nil {
		return &ValidationError{Op: op, Ref: ref, Problems: problems}
	}
	return nil
}

// CustomerInfo is GET user-profile/{loyaltyId}: the member's profile. A read:
// retried on any transient failure.
func (c *Client) CustomerInfo(ctx context.Context, loyaltyID string) (*MemberProfile, CallInfo, error) {
	if err := require(epUserProfile.name, "", loyaltyID != "", "loyaltyId is required"); err != nil {
		return nil, CallInfo{}, err
	}
	return call[MemberProfile](ctx, c, epUserProfile, loyaltyID, member(loyaltyID), nil)
}

// CustomerProfile is GET user-profile-ext/{loyaltyId}: the extended profile.
// A read.
func (c *Client) CustomerProfile(ctx context.Context, loyaltyID string) (*ExtendedProfile, CallInfo, error) {
	if err := require(epUserProfileExt.name, "", loyaltyID != "", "loyaltyId is required"); err != nil {
		return nil, CallInfo{}, err
	}
	return call[ExtendedProfile](ctx, c, epUserProfileExt, loyaltyID, member(loyaltyID), nil)
}

// Onboard is POST user/onboard. A write. A refusal is a *BusinessError with
// Code "0001", ErrorCode "BAD_REQUEST" (errors.Is ErrOnboardingRejected)
// and ResultURL. Errors name the externalId only.
func (c *Client) Onboard(ctx context.Context, r OnboardRequest) (*OnboardedMember, CallInfo, error) {
	ref := ""
	if r.ExternalID != "" {
		ref = "externalId=" + r.ExternalID
	}
	if err := require(epOnboard.name, ref, r.ExternalID != "", "externalId is required"); err != nil {
		return nil, CallInfo{}, err
	}
	return call[OnboardedMember](ctx, c, epOnboard, "", ref, r.wire(c.prof.Keyed()))
}

// Link is POST user/link-member. A write. "Already linked" is a
// *BusinessError for which IsMemberLinked is true.
func (c *Client) Link(ctx context.Context, r LinkRequest) (*LinkResult, CallInfo, error) {
	if err := require(epLink.name, member(r.LoyaltyID), r.LoyaltyID != "", "loyaltyId is required",
		r.PartnerMemberID != "", "partnerMemberId is required"); err != nil {
		return nil, CallInfo{}, err
	}
	return call[LinkResult](ctx, c, epLink, "", member(r.LoyaltyID), r)
}

// Unlink is POST user/unlink-member; its data is a boolean. A write. "Not
// linked yet" is a *BusinessError for which IsMemberNotLinked is true; a
// success envelope with data false is a *BusinessError whose Data is
// "false" (the member was not unlinked, for no reason given). It returns
// true or an error.
func (c *Client) Unlink(ctx context.Context, r LinkRequest) (bool, CallInfo, error) {
	if err := require(epUnlink.name, member(r.LoyaltyID), r.LoyaltyID != "", "loyaltyId is required",
		r.PartnerMemberID != "", "partnerMemberId is required"); err != nil {
		return false, CallInfo{}, err
	}
	v, info, err := call[bool](ctx, c, epUnlink, "", member(r.LoyaltyID), r)
	if err != nil {
		return false, info, err
	}
	if !*v {
		// The partner's answer, not a failure: it says the member was not
		// unlinked, without an error code.
		return false, info, &BusinessError{Op: epUnlink.name, Ref: member(r.LoyaltyID), HTTPStatus: info.Status,
			StatusCode: http.StatusOK, StatusMessage: SuccessMessage, Data: "false"}
	}
	return true, info, nil
}

// Redeem is POST point-redemption-with-token. A write. When r.Sign is empty
// it is signed with Options.Signer over the body's own values.
func (c *Client) Redeem(ctx context.Context, r RedemptionRequest) (*RedemptionResult, CallInfo, error) {
	ref := tx(r.TransactionID)
	if err := require(epRedemption.name, ref,
		r.TransactionID != "", "transactionId is required",
		r.LoyaltyID != "", "loyaltyId is required",
		r.TransactionDate != "", "transactionDate is required",
		r.TransactionAmount >= 0, "transactionAmount must not be negative",
		r.UsedPoint > 0, "usedPoint must be positive",
		r.Sign != "" || c.signer != nil, "sign is required (no partner key configured)"); err != nil {
		return nil, CallInfo{}, err
	}
	if _, err := EncodeRedemption(c.prof, r); err != nil {
		return nil, CallInfo{}, &ValidationError{Op: epRedemption.name, Ref: ref, Problems: []string{err.Error()}}
	}
	if r.Sign == "" {
		s, err := c.signer.RedemptionSign(SignedFields(r))
		if err != nil {
			return nil, CallInfo{}, fmt.Errorf("%s%w", prefix(epRedemption.name, ref), err)
		}
		r.Sign = s
	}
	body, err := EncodeRedemption(c.prof, r)
	if err != nil {
		return nil, CallInfo{}, &ValidationError{Op: epRedemption.name, Ref: ref, Problems: []string{err.Error()}}
	}
	w, info, err := call[redemptionWire](ctx, c, epRedemption, "", ref, body)
	if err != nil {
		return nil, info, err
	}
	res, err := w.value(c.frac)
	if err != nil {
		return nil, info, malformed(epRedemption, ref, &info, err)
	}
	return res, info, nil
}

// EncodeRedemption is r's body as the client sends it under profile p:
// its transactionDate in p's JSON type. A date p sends as a number must
// be its digits; any text goes as a string, since the partner, not the
// client, says which it reads.
func EncodeRedemption(p partnerprofile.Profile, r RedemptionRequest) (json.RawMessage, error) {
	date := p.RedemptionDateEncoding()
	if _, err := date.Format.Parse(r.TransactionDate); err != nil && date.Type == partnerprofile.DateNumber {
		return nil, fmt.Errorf("transactionDate is not %s: %w", date, err)
	}
	b, err := marshalRedemption(redemptionBody{RedemptionRequest: r, TransactionDate: date.TextJSON(r.TransactionDate)})
	if err != nil {
		return nil, fmt.Errorf("body does not encode: %w", err)
	}
	return b, nil
}

// SignedFields are the fields of r a sign may cover.
func SignedFields(r RedemptionRequest) signing.Redemption {
	return signing.Redemption{LoyaltyID: r.LoyaltyID, TransactionID: r.TransactionID, UsedPoint: r.UsedPoint,
		TransactionAmount: r.TransactionAmount, TransactionDate: r.TransactionDate, TransactionDes: r.TransactionDes}
}

// Accrue is POST point-accrual. A write. An empty TransactionCurrency is
// sent as VND; an empty TransactionDate.Format takes
// Options.AccrualDateFormat.
func (c *Client) Accrue(ctx context.Context, r AccrualRequest) (*AccrualResult, CallInfo, error) {
	ref := tx(r.TransactionID)
	if err := require(epAccrual.name, ref,
		r.TransactionID != "", "transactionId is required",
		r.LoyaltyID != "", "loyaltyId is required",
		!r.TransactionDate.Time.IsZero(), "transactionDate is required",
		r.TransactionAmount >= 0, "transactionAmount must not be negative"); err != nil {
		return nil, CallInfo{}, err
	}
	if r.TransactionCurrency == "" {
		r.TransactionCurrency = "VND"
	}
	if r.TransactionDate.Format == "" {
		f := c.prof.AccrualDate()
		r.TransactionDate.Format, r.TransactionDate.Type = f.Format, f.Type
	}
	w, info, err := call[accrualWire](ctx, c, epAccrual, "", ref, r)
	if err != nil {
		return nil, info, err
	}
	res, err := w.value()
	if err != nil {
		return nil, info, malformed(epAccrual, ref, &info, err)
	}
	return res, info, nil
}

// LookupTransaction is POST lookup-transaction-id, by bitReference or by
// the partner's transactionId. A read (retried freely): the bridge's
// idempotency guard. Not found is a *BusinessError whose code the partner
// profile names; read the answer with ClassifyLookup.
func (c *Client) LookupTransaction(ctx context.Context, r LookupRequest) (*Transaction, CallInfo, error) {
	ref := tx(r.TransactionID)
	if ref == "" && r.BitReference != "" {
		ref = "bitReference=" + r.BitReference
	}
	if err := require(epLookup.name, ref, r.LoyaltyID != "", "loyaltyId is required",
		r.BitReference != "" || r.TransactionID != "", "bitReference or transactionId is required"); err != nil {
		return nil, CallInfo{}, err
	}
	w, info, err := call[transactionWire](ctx, c, epLookup, "", ref, r)
	if err != nil {
		return nil, info, err
	}
	t, err := w.value(c.frac)
	if err != nil {
		return nil, info, malformed(epLookup, ref, &info, err)
	}
	return t, info, nil
}
