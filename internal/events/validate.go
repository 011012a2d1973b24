package events

import (
	"encoding/json"
	"math"
	"strconv"
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
	switch {
	case len(s) > MaxJSONLen:
		c.add(field, "longer than "+strconv.Itoa(MaxJSONLen)+" bytes")
	case !strings.HasPrefix(s, "{") || !json.Valid([]byte(s)):
		c.add(field, "must be a JSON object")
	case jsonDepth(s) > MaxJSONDepth:
		c.add(field, "nested deeper than "+strconv.Itoa(MaxJSONDepth)+" levels")
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

// Limits on field sizes. Upstream is another team's code and may send
// garbage; these keep one record's cost (memory, the API request, the error
// event) bounded. Generous for real data: an id is a few dozen characters.
const (
	MaxIDLen       = 128      // transactionId, loyaltyId, itemId, partnerMemberId, externalId, …
	MaxNameLen     = 256      // names, places
	MaxAddressLen  = 512      // address
	MaxContactLen  = 254      // email (RFC 5321), phone
	MaxDocumentLen = 64       // idNumber, passportNumber
	MaxTextLen     = 1024     // a redemption's free-text description
	MaxSignLen     = 8 << 10  // a redemption sign (a JWT)
	MaxJSONLen     = 16 << 10 // description and extraData of a purchase
	MaxJSONDepth   = 16       // nesting of those JSON objects
)

// maxLen records a problem when v is longer than n bytes.
func (c *checker) maxLen(field, v string, n int) {
	if len(v) > n {
		c.add(field, "longer than "+strconv.Itoa(n)+" bytes")
	}
}

func (c *checker) maxLenOpt(field string, v *string, n int) {
	if v != nil {
		c.maxLen(field, *v, n)
	}
}

// jsonDepth is the deepest nesting of objects and arrays in a JSON text.
func jsonDepth(s string) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case escaped:
			escaped = false
		case inString && ch == '\\':
			escaped = true
		case ch == '"':
			inString = !inString
		case inString:
		case ch == '{' || ch == '[':
			depth++
			deepest = max(deepest, depth)
		case ch == '}' || ch == ']':
			depth--
		}
	}
	return deepest
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
	c.maxLen("transactionId", e.TransactionID, MaxIDLen)
	c.maxLen("loyaltyId", e.LoyaltyID, MaxIDLen)
	c.maxLenOpt("itemId", e.ItemID, MaxIDLen)
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
	c.maxLen("transactionId", e.TransactionID, MaxIDLen)
	c.maxLen("loyaltyId", e.LoyaltyID, MaxIDLen)
	c.maxLenOpt("description", e.Description, MaxTextLen)
	c.maxLenOpt("sign", e.Sign, MaxSignLen)
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
	c.maxLen("transactionId", e.TransactionID, MaxIDLen)
	c.maxLen("originalTransactionId", e.OriginalTransactionID, MaxIDLen)
	c.maxLen("loyaltyId", e.LoyaltyID, MaxIDLen)
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
	c.maxLen("transactionId", e.TransactionID, MaxIDLen)
	c.maxLen("phone", e.Phone, MaxContactLen)
	c.maxLen("fullName", e.FullName, MaxNameLen)
	c.maxLenOpt("firstName", e.FirstName, MaxNameLen)
	c.maxLenOpt("lastName", e.LastName, MaxNameLen)
	c.maxLenOpt("email", e.Email, MaxContactLen)
	c.maxLenOpt("idNumber", e.IDNumber, MaxDocumentLen)
	c.maxLenOpt("passportNumber", e.PassportNumber, MaxDocumentLen)
	c.maxLen("placeOfIssue", e.PlaceOfIssue, MaxNameLen)
	c.maxLen("placeOfBirth", e.PlaceOfBirth, MaxNameLen)
	c.maxLen("address", e.Address, MaxAddressLen)
	c.maxLen("externalId", e.ExternalID, MaxIDLen)
	return c.err()
}

// Validate checks the event.
func (e *MemberLinkRequested) Validate() error {
	c := checker{t: e.Type()}
	c.required("transactionId", e.TransactionID)
	c.required("loyaltyId", e.LoyaltyID)
	c.required("partnerMemberId", e.PartnerMemberID)
	c.maxLen("transactionId", e.TransactionID, MaxIDLen)
	c.maxLen("loyaltyId", e.LoyaltyID, MaxIDLen)
	c.maxLen("partnerMemberId", e.PartnerMemberID, MaxIDLen)
	return c.err()
}

// Validate checks the event.
func (e *MemberUnlinkRequested) Validate() error {
	c := checker{t: e.Type()}
	c.required("transactionId", e.TransactionID)
	c.required("loyaltyId", e.LoyaltyID)
	c.required("partnerMemberId", e.PartnerMemberID)
	c.maxLen("transactionId", e.TransactionID, MaxIDLen)
	c.maxLen("loyaltyId", e.LoyaltyID, MaxIDLen)
	c.maxLen("partnerMemberId", e.PartnerMemberID, MaxIDLen)
	return c.err()
}
