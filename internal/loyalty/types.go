package loyalty

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// Member profile, returned by CustomerInfo (spec: Customer Info).
type MemberProfile struct {
	LoyaltyID   string `json:"loyaltyId"`
	DateOfBirth string `json:"dateOfBirth"` // DD-MM-YYYY
	DateOfJoin  string `json:"dateOfJoin"`  // DD-MM-YYYY
	Email       string `json:"email"`
	FirstName   string `json:"firstName"`
	LastName    string `json:"lastName"`
	FullName    string `json:"fullName"`
	EKYCStatus  string `json:"eKycStatus"`
	Status      string `json:"status"`
	Phone       string `json:"phone"`
}

// ExtendedProfile is returned by CustomerProfile (spec: Customer Profile).
type ExtendedProfile struct {
	EnrollingSponsor string `json:"enrollingSponsor"`
	PassportNumber   string `json:"passportNumber"`
	NationalID       string `json:"nationalId"`
	TierClass        string `json:"tierClass"`
	LoyaltyID        string `json:"loyaltyId"`
}

// OnboardRequest is the User Onboarding body. One of IDNumber and
// PassportNumber must be set; empty optional fields are left out.
type OnboardRequest struct {
	Phone          string `json:"phone"`
	FullName       string `json:"fullName"`
	FirstName      string `json:"firstName,omitempty"`
	LastName       string `json:"lastName,omitempty"`
	Gender         string `json:"gender"`   // male, female, other
	Birthday       string `json:"birthday"` // YYYY-MM-DD
	Email          string `json:"email,omitempty"`
	IsKYC          bool   `json:"isKYC"`
	IDNumber       string `json:"idNumber,omitempty"`
	PassportNumber string `json:"passportNumber,omitempty"`
	PlaceOfIssue   string `json:"placeOfIssue"`
	PlaceOfBirth   string `json:"placeOfBirth"`
	IssueDate      string `json:"issueDate"`   // YYYY-MM-DD
	ExpireDate     string `json:"expireDate"`  // YYYY-MM-DD
	Nationality    string `json:"nationality"` // ISO 3166-1 alpha-3
	Address        string `json:"address"`
	ExternalID     string `json:"externalId"`
	// MemberCode appears in the spec's request example only; sent when set.
	MemberCode string `json:"memberCode,omitempty"`
}

// onboardKeyed is an OnboardRequest whose unset idNumber and
// passportNumber go as null (partnerprofile.KeyedNull): its fields shadow
// the request's own.
type onboardKeyed struct {
	OnboardRequest
	IDNumber       *string `json:"idNumber"`
	PassportNumber *string `json:"passportNumber"`
}

// wire is r as the profile's keyed encoding sends it.
func (r OnboardRequest) wire(k partnerprofile.Keyed) any {
	if k != partnerprofile.KeyedNull {
		return r
	}
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return onboardKeyed{OnboardRequest: r, IDNumber: opt(r.IDNumber), PassportNumber: opt(r.PassportNumber)}
}

// OnboardedMember is returned by Onboard.
type OnboardedMember struct {
	Phone      string `json:"phone"`
	FullName   string `json:"fullName"`
	FirstName  string `json:"firstName"`
	LastName   string `json:"lastName"`
	MemberCode string `json:"memberCode"`
	CreatedAt  string `json:"createdAt"` // ISO 8601 UTC with milliseconds
}

// LinkRequest is the body of link-member and unlink-member.
type LinkRequest struct {
	LoyaltyID       string `json:"loyaltyId"`
	PartnerMemberID string `json:"partnerMemberId"`
}

// LinkResult is returned by Link.
type LinkResult struct {
	Phone     string `json:"phone"`
	LoyaltyID string `json:"loyaltyId"`
}

// DateFormat says how a transactionDate travels (partnerprofile owns the
// formats; the names here are kept for the client's callers).
type DateFormat = partnerprofile.DateFormat

// Accrual transactionDate formats (partnerprofile has the others). The
// spec declares a string but its example sends a number of epoch
// milliseconds, hence the default.
const (
	DateEpochMillis = partnerprofile.DateEpochMillis // JSON number, ms since the epoch (default)
	DateISO8601     = partnerprofile.DateISO8601     // JSON string, RFC 3339 UTC with milliseconds
)

// ParseDateFormat accepts the partnerprofile.DateFormat values ("" gives
// the accrual default).
func ParseDateFormat(s string) (DateFormat, error) {
	f, err := partnerprofile.ParseDateFormat(s)
	if f == "" && err == nil {
		f = partnerprofile.DefaultAccrualDateFormat
	}
	return f, err
}

// TransactionDate is an accrual transactionDate. It marshals as Format
// and Type say (the client fills an empty Format, and its Type, from the
// profile; an empty Type is a number for an epoch format, a string
// otherwise); it unmarshals from either a number of epoch milliseconds or
// an RFC 3339 string, remembering which.
type TransactionDate struct {
	Time   time.Time
	Format DateFormat
	Type   partnerprofile.DateType
}

// MarshalJSON implements json.Marshaler.
func (d TransactionDate) MarshalJSON() ([]byte, error) {
	f := partnerprofile.Profile{AccrualDateFormat: d.Format, AccrualDateType: d.Type}.AccrualDate()
	return f.JSON(d.Time), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *TransactionDate) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
			d.Time, d.Format = time.UnixMilli(ms).UTC(), DateEpochMillis
			return nil
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return fmt.Errorf("transactionDate: want epoch milliseconds or RFC 3339")
		}
		d.Time, d.Format = t, DateISO8601
		return nil
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("transactionDate: want epoch milliseconds or RFC 3339")
	}
	d.Time, d.Format = time.UnixMilli(ms).UTC(), DateEpochMillis
	return nil
}

// AccrualRequest is the Point Accrual body.
type AccrualRequest struct {
	LoyaltyID     string `json:"loyaltyId"`
	TransactionID string `json:"transactionId"`
	ItemID        string `json:"itemId,omitempty"`
	// TransactionDes is free-form product information (a JSON object).
	TransactionDes      json.RawMessage `json:"transactionDes,omitempty"`
	TransactionDate     TransactionDate `json:"transactionDate"`
	TransactionAmount   float64         `json:"transactionAmount"`
	TransactionCurrency string          `json:"transactionCurrency"` // "" → VND
	// ExtraData is free-form (a JSON object).
	ExtraData json.RawMessage `json:"extraData,omitempty"`
}

// AccrualResult is the data of a Point Accrual answer.
type AccrualResult struct {
	SponsorID     int64  `json:"sponsorId"`
	TransactionID string `json:"transactionId"`
	BitReference  string `json:"bitReference"`
	LoyaltyID     string `json:"loyaltyId"`
	Timestamp     string `json:"timestamp"`
	RequestID     string `json:"requestId"`
}

// RedemptionRequest is the Point Redemption With Token body. When Sign is
// empty the client signs with Options.Signer. TransactionDate is the
// date's text in the profile's format; the client sends it as the
// profile's JSON type (its digits as a number, if so).
type RedemptionRequest struct {
	TransactionID     string  `json:"transactionId"`
	TransactionDes    string  `json:"transactionDes,omitempty"`
	TransactionDate   string  `json:"transactionDate"`
	TransactionAmount float64 `json:"transactionAmount"`
	LoyaltyID         string  `json:"loyaltyId"`
	UsedPoint         int64   `json:"usedPoint"`
	Sign              string  `json:"sign"`
}

// redemptionBody is a RedemptionRequest as it travels: its
// transactionDate in the profile's JSON type.
type redemptionBody struct {
	RedemptionRequest
	TransactionDate json.RawMessage `json:"transactionDate"`
}

// RedemptionResult is the data of a redemption answer.
type RedemptionResult struct {
	RequestID     string `json:"requestId"`
	TransactionID string `json:"transactionId"`
	BitReference  string `json:"bitReference"`
	UsedPoint     int64  `json:"usedPoint"`
	Timestamp     string `json:"timestamp"`
}

// LookupRequest is the Lookup Transaction body: LoyaltyID and one of
// BitReference and TransactionID.
type LookupRequest struct {
	LoyaltyID     string `json:"loyaltyId"`
	BitReference  string `json:"bitReference,omitempty"`
	TransactionID string `json:"transactionId,omitempty"`
}

// Transaction is the data of a Lookup Transaction answer.
type Transaction struct {
	TransactionPoint  int64   `json:"transactionPoint"`
	TransactionAmount float64 `json:"transactionAmount"`
	TransactionSource string  `json:"transactionSource"`
	TransactionType   string  `json:"transactionType"`
	TransactionID     string  `json:"transactionId"`
	BitReference      string  `json:"bitReference"`
	Sponsor           string  `json:"sponsor"`
	Status            string  `json:"status"`
	TransactionTime   string  `json:"transactionTime"`
	RequestID         string  `json:"requestId"`
	Timestamp         string  `json:"timestamp"`
}
