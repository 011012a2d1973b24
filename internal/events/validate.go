package events

import (
	"encoding/json"
	"math"
	"strings"
	"time"
)

// DefaultCurrency is the currency of a purchase that names none (the API's default).
const DefaultCurrency = "VND"

// FieldProblem is one invalid field. Message never contains the value.
type FieldProblem struct {
	Field   string
	Message string
}

// ValidationError lists every problem of one event, in field order.
type ValidationError struct {
	Type     EventType
	Problems []FieldProblem
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("invalid ")
	b.WriteString(string(e.Type))
	b.WriteString(": ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.Field)
		b.WriteString(": ")
		b.WriteString(p.Message)
	}
	return b.String()
}

// checker collects problems; its methods take the field name and the value
// but only ever record the name and a fixed message.
type checker struct {
	t        EventType
	problems []FieldProblem
}

func (c *checker) add(field, msg string) { c.problems = append(c.problems, FieldProblem{field, msg}) }

func (c *checker) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	return &ValidationError{Type: c.t, Problems: c.problems}
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

func (c *checker) required(field, v string) {
	if blank(v) {
		c.add(field, "required")
	}
}

func (c *checker) nonNegative(field string, v float64) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		c.add(field, "must be a finite number")
	case v < 0:
		c.add(field, "must be >= 0")
	}
}

func (c *checker) notZeroTime(field string, v time.Time) {
	if v.IsZero() {
		c.add(field, "required")
	}
}

// jsonObject checks an optional field that must carry a JSON object.
func (c *checker) jsonObject(field string, v *string) {
	if v == nil {
		return
	}
	s := strings.TrimSpace(*v)
	if !strings.HasPrefix(s, "{") || !json.Valid([]byte(s)) {
		c.add(field, "must be a JSON object")
	}
}

// isoDate checks a required YYYY-MM-DD date that exists in the calendar.
func (c *checker) isoDate(field, v string) {
	if blank(v) {
		c.add(field, "required")
		return
	}
	if _, err := time.Parse(time.DateOnly, v); err != nil || len(v) != len(time.DateOnly) {
		c.add(field, "must be an existing date in the form YYYY-MM-DD")
	}
}

// optionalPresent reports whether an optional string is set and not blank.
func optionalPresent(v *string) bool { return v != nil && !blank(*v) }

// Validate sets Currency to DefaultCurrency when empty, then checks the event.
func (e *PurchaseCompleted) Validate() error {
	if blank(e.Currency) {
		e.Currency = DefaultCurrency
	}
	c := checker{t: e.Type()}
	c.required("transactionId", e.TransactionID)
	c.required("loyaltyId", e.LoyaltyID)
	if e.ItemID != nil && blank(*e.ItemID) {
		c.add("itemId", "must not be blank when present")
	}
	c.notZeroTime("transactionDate", e.TransactionDate)
	c.nonNegative("amount", e.Amount)
	if len(e.Currency) != 3 || strings.ToUpper(e.Currency) != e.Currency {
		c.add("currency", "must be a 3-letter upper-case ISO 4217 code")
	}
	c.jsonObject("description", e.Description)
	c.jsonObject("extraData", e.ExtraData)
	return c.err()
}

// Validate checks the event.
func (e *RedemptionRequested) Validate() error {
	c := checker{t: e.Type()}
	c.required("transactionId", e.TransactionID)
	c.required("loyaltyId", e.LoyaltyID)
	c.notZeroTime("transactionDate", e.TransactionDate)
	c.nonNegative("amount", e.Amount)
	if e.UsedPoint <= 0 {
		c.add("usedPoint", "must be > 0")
	}
	if e.Sign != nil && blank(*e.Sign) {
		c.add("sign", "must not be blank when present (leave it null for the bridge to sign)")
	}
	return c.err()
}

// Validate checks the event.
func (e *PurchaseRefunded) Validate() error {
	c := checker{t: e.Type()}
	c.required("transactionId", e.TransactionID)
	c.required("originalTransactionId", e.OriginalTransactionID)
	if !blank(e.TransactionID) && e.TransactionID == e.OriginalTransactionID {
		c.add("transactionId", "the refund id must differ from originalTransactionId")
	}
	c.required("loyaltyId", e.LoyaltyID)
	c.nonNegative("refundAmount", e.RefundAmount)
	c.notZeroTime("refundDate", e.RefundDate)
	return c.err()
}

// Genders accepted by the API's onboarding.
var genders = map[string]bool{"male": true, "female": true, "other": true}

// Validate checks the event against the API's onboarding field list.
func (e *MemberOnboardRequested) Validate() error {
	c := checker{t: e.Type()}
	c.required("transactionId", e.TransactionID)
	c.required("phone", e.Phone)
	c.required("fullName", e.FullName)
	switch {
	case blank(e.Gender):
		c.add("gender", "required")
	case !genders[e.Gender]:
		c.add("gender", "must be one of male, female, other")
	}
	c.isoDate("birthday", e.Birthday)
	if e.Email != nil && blank(*e.Email) {
		c.add("email", "must not be blank when present")
	}
	if !optionalPresent(e.IDNumber) && !optionalPresent(e.PassportNumber) {
		c.add("idNumber", "required when passportNumber is absent")
	}
	c.required("placeOfIssue", e.PlaceOfIssue)
	c.required("placeOfBirth", e.PlaceOfBirth)
	c.isoDate("issueDate", e.IssueDate)
	c.isoDate("expireDate", e.ExpireDate)
	switch {
	case blank(e.Nationality):
		c.add("nationality", "required")
	case !IsCountryAlpha3(e.Nationality):
		c.add("nationality", "must be an ISO 3166-1 alpha-3 country code (e.g. VNM)")
	}
	c.required("address", e.Address)
	c.required("externalId", e.ExternalID)
	return c.err()
}

// Validate checks the event.
func (e *MemberLinkRequested) Validate() error {
	c := checker{t: e.Type()}
	c.required("transactionId", e.TransactionID)
	c.required("loyaltyId", e.LoyaltyID)
	c.required("partnerMemberId", e.PartnerMemberID)
	return c.err()
}

// Validate checks the event.
func (e *MemberUnlinkRequested) Validate() error {
	c := checker{t: e.Type()}
	c.required("transactionId", e.TransactionID)
	c.required("loyaltyId", e.LoyaltyID)
	c.required("partnerMemberId", e.PartnerMemberID)
	return c.err()
}
