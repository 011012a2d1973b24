package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// Profiles.

type memberProfile struct {
	LoyaltyID   string `json:"loyaltyId"`
	DateOfBirth string `json:"dateOfBirth"`
	DateOfJoin  string `json:"dateOfJoin"`
	Email       string `json:"email"`
	FirstName   string `json:"firstName"`
	LastName    string `json:"lastName"`
	FullName    string `json:"fullName"`
	EKYCStatus  string `json:"eKycStatus"`
	Status      string `json:"status"`
	Phone       string `json:"phone"`
}

type extendedProfile struct {
	EnrollingSponsor string `json:"enrollingSponsor"`
	PassportNumber   string `json:"passportNumber"`
	NationalID       string `json:"nationalId"`
	TierClass        string `json:"tierClass"`
	LoyaltyID        string `json:"loyaltyId"`
}

// memberNotFound answers a call naming an unknown loyaltyId with the
// profile's first member-not-found code.
func (s *Server) memberNotFound() reply {
	return badRequest(s.opts.Profile.MemberNotFoundCodes[0], "Member not found")
}

func (s *Server) handleCustomerInfo(c *call) reply {
	id := c.r.PathValue("loyaltyId")
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	m := s.st.get(id)
	if m == nil {
		return s.memberNotFound()
	}
	return ok(memberProfile{LoyaltyID: m.id, DateOfBirth: m.birth.Format(profileDate), DateOfJoin: m.joined.Format(profileDate),
		Email: m.email, FirstName: m.first, LastName: m.last, FullName: m.fullName, EKYCStatus: m.ekyc, Status: m.status, Phone: m.phone})
}

func (s *Server) handleCustomerProfile(c *call) reply {
	id := c.r.PathValue("loyaltyId")
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	m := s.st.get(id)
	if m == nil {
		return s.memberNotFound()
	}
	return ok(extendedProfile{EnrollingSponsor: m.sponsor, PassportNumber: m.passport, NationalID: m.nationalID,
		TierClass: m.tier, LoyaltyID: m.id})
}

// Onboarding.

// OnboardingResultURL is the partner-application address put in
// data.resultUrl of an onboarding failure, with errorCode (and field) query
// parameters appended.
const OnboardingResultURL = "https://partner.example/onboarding/result"

// Onboarding failure reasons (the errorCode of data.resultUrl): ours, the
// spec shows only the envelope.
const (
	ReasonInvalidRequest     = partnerprofile.DefaultInvalidRequestCode // body not a JSON object, or a field of the wrong JSON type
	ReasonMissingField       = partnerprofile.DefaultMissingFieldCode
	ReasonMissingIDDocument  = "MISSING_ID_DOCUMENT" // neither idNumber nor passportNumber
	ReasonInvalidGender      = "INVALID_GENDER"
	ReasonInvalidDate        = "INVALID_DATE" // not a real YYYY-MM-DD date, birthday in the future, expireDate before issueDate
	ReasonInvalidNationality = "INVALID_NATIONALITY"
	ReasonInvalidPhone       = "INVALID_PHONE"
	ReasonInvalidEmail       = "INVALID_EMAIL"
	ReasonDuplicateExternal  = "DUPLICATE_EXTERNAL_ID"
)

type onboardFailureData struct {
	ResultURL string `json:"resultUrl"`
}

// onboardFail is the spec's onboarding error envelope. field names the
// offending field (never its value).
func onboardFail(reason, field string) reply {
	q := url.Values{"errorCode": {reason}}
	if field != "" {
		q.Set(partnerprofile.FieldParam, field)
	}
	return reply{status: http.StatusBadRequest, body: envelope{StatusCode: http.StatusBadRequest, Message: "Bad Request",
		Errors: &errorBody{Code: "0001", Message: "Bad Request", ErrorCode: "BAD_REQUEST"},
		Data:   onboardFailureData{ResultURL: OnboardingResultURL + "?" + q.Encode()}}}
}

type onboardRequest struct {
	Phone          string  `json:"phone"`
	FullName       string  `json:"fullName"`
	FirstName      string  `json:"firstName"`
	LastName       string  `json:"lastName"`
	Gender         string  `json:"gender"`
	Birthday       string  `json:"birthday"`
	Email          string  `json:"email"`
	IsKYC          *bool   `json:"isKYC"`
	IDNumber       *string `json:"idNumber"`
	PassportNumber *string `json:"passportNumber"`
	PlaceOfIssue   string  `json:"placeOfIssue"`
	PlaceOfBirth   string  `json:"placeOfBirth"`
	IssueDate      string  `json:"issueDate"`
	ExpireDate     string  `json:"expireDate"`
	Nationality    string  `json:"nationality"`
	Address        string  `json:"address"`
	ExternalID     string  `json:"externalId"`
	MemberCode     string  `json:"memberCode"` // in the spec's example only; ignored
}

type onboardedMember struct {
	Phone      string `json:"phone"`
	FullName   string `json:"fullName"`
	FirstName  string `json:"firstName"`
	LastName   string `json:"lastName"`
	MemberCode string `json:"memberCode"`
	CreatedAt  string `json:"createdAt"`
}

var (
	phoneRE = regexp.MustCompile(`^\+?[0-9]{8,15}$`)
	emailRE = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`)
)

// normalisePhone gives the international form with a leading "+": a
// Vietnamese national number 0xxxxxxxxx becomes +84xxxxxxxxx.
func normalisePhone(p string) string {
	switch {
	case strings.HasPrefix(p, "+"):
		return p
	case strings.HasPrefix(p, "0"):
		return "+84" + p[1:]
	}
	return "+" + p
}

func strOrEmpty(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// validate returns the first failure reason and field, in field order.
func (o *onboardRequest) validate(now time.Time) (reason, field string) {
	for _, f := range []struct{ name, v string }{
		{"phone", o.Phone}, {"fullName", o.FullName}, {"gender", o.Gender}, {"birthday", o.Birthday},
		{"placeOfIssue", o.PlaceOfIssue}, {"placeOfBirth", o.PlaceOfBirth}, {"issueDate", o.IssueDate},
		{"expireDate", o.ExpireDate}, {"nationality", o.Nationality}, {"address", o.Address}, {"externalId", o.ExternalID},
	} {
		if strings.TrimSpace(f.v) == "" {
			return ReasonMissingField, f.name
		}
	}
	if o.IsKYC == nil {
		return ReasonMissingField, "isKYC"
	}
	if strOrEmpty(o.IDNumber) == "" && strOrEmpty(o.PassportNumber) == "" {
		return ReasonMissingIDDocument, "idNumber"
	}
	if !phoneRE.MatchString(o.Phone) {
		return ReasonInvalidPhone, "phone"
	}
	if o.Email != "" && !emailRE.MatchString(o.Email) {
		return ReasonInvalidEmail, "email"
	}
	switch o.Gender {
	case "male", "female", "other":
	default:
		return ReasonInvalidGender, "gender"
	}
	dates := map[string]time.Time{}
	for _, f := range []struct{ name, v string }{{"birthday", o.Birthday}, {"issueDate", o.IssueDate}, {"expireDate", o.ExpireDate}} {
		t, err := time.ParseInLocation(isoDate, f.v, ict)
		if err != nil {
			return ReasonInvalidDate, f.name
		}
		dates[f.name] = t
	}
	if dates["birthday"].After(now) {
		return ReasonInvalidDate, "birthday"
	}
	if dates["expireDate"].Before(dates["issueDate"]) {
		return ReasonInvalidDate, "expireDate"
	}
	if !alpha3[o.Nationality] {
		return ReasonInvalidNationality, "nationality"
	}
	return "", ""
}

func (s *Server) handleOnboard(c *call) reply {
	b, rep := jsonBody(c)
	if rep != nil {
		return *rep
	}
	var o onboardRequest
	if err := json.Unmarshal(b, &o); err != nil {
		return onboardFail(ReasonInvalidRequest, "")
	}
	if reason, field := s.checkKeyed(b); reason != "" {
		return onboardFail(reason, field)
	}
	now := s.now()
	if reason, field := o.validate(now); reason != "" {
		return onboardFail(reason, field)
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	if _, dup := s.st.externalIDs[o.ExternalID]; dup {
		return onboardFail(ReasonDuplicateExternal, "externalId")
	}
	id := MemberID(s.st.nextMember)
	s.st.nextMember++
	birth, _ := time.ParseInLocation(isoDate, o.Birthday, ict)
	m := &member{
		id: id, phone: normalisePhone(o.Phone), fullName: o.FullName, first: o.FirstName, last: o.LastName, email: o.Email,
		birth: birth, joined: now.In(ict), ekyc: "PENDING", status: "ACTIVE", tier: tiers[0], sponsor: SponsorName,
		nationalID: strOrEmpty(o.IDNumber), passport: strOrEmpty(o.PassportNumber), externalID: o.ExternalID,
	}
	if *o.IsKYC {
		m.ekyc = "VERIFIED"
	}
	s.st.members[id] = m
	s.st.externalIDs[o.ExternalID] = id
	s.log.Info("member onboarded", zap.String("loyaltyId", id))
	return ok(onboardedMember{Phone: m.phone, FullName: m.fullName, FirstName: m.first, LastName: m.last,
		MemberCode: id, CreatedAt: now.UTC().Format(isoMillisUTC)})
}

// checkKeyed refuses, under StrictWire, an unset idNumber or
// passportNumber not sent as the profile says: a missing key when it says
// null, a null when it says absent.
func (s *Server) checkKeyed(body []byte) (reason, field string) {
	if !s.opts.StrictWire {
		return "", ""
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(body, &keys) != nil {
		return "", "" // reported by the decoding of the request
	}
	for _, f := range []string{"idNumber", "passportNumber"} {
		raw, keyed := keys[f]
		switch null := keyed && string(bytes.TrimSpace(raw)) == "null"; {
		case s.opts.Profile.Keyed() == partnerprofile.KeyedNull && !keyed:
			return ReasonMissingField, f
		case s.opts.Profile.Keyed() == partnerprofile.KeyedAbsent && null:
			return ReasonInvalidRequest, f
		}
	}
	return "", ""
}

// Link state machine.

type linkRequest struct {
	LoyaltyID       string `json:"loyaltyId"`
	PartnerMemberID string `json:"partnerMemberId"`
}

type linkResult struct {
	Phone     string `json:"phone"`
	LoyaltyID string `json:"loyaltyId"`
}

// linkError is the spec's link/unlink error: errors.name instead of
// errors.errorCode.
func linkError(code, msg, name string) reply {
	return reply{status: http.StatusBadRequest, body: envelope{StatusCode: http.StatusBadRequest, Message: "Bad Request",
		Errors: &errorBody{Code: code, Message: msg, Name: name}}}
}

func memberIsLinked() reply {
	return linkError(CodeMemberIsLinked, "The account has been linked", "MemberIsLinkedException")
}

func memberIsNotLinked() reply {
	return linkError(CodeMemberIsNotLinkedYet, "The account is not linked yet", "MemberIsNotLinkedException")
}

func parseLink(c *call) (linkRequest, *reply) {
	b, rep := jsonBody(c)
	if rep != nil {
		return linkRequest{}, rep
	}
	var l linkRequest
	if err := json.Unmarshal(b, &l); err != nil {
		r := badRequest(CodeInvalidRequest, decodeProblem(err))
		return l, &r
	}
	var missing []string
	if l.LoyaltyID == "" {
		missing = append(missing, "loyaltyId")
	}
	if l.PartnerMemberID == "" {
		missing = append(missing, "partnerMemberId")
	}
	if missing != nil {
		r := badRequest(CodeInvalidRequest, fmt.Sprintf("required: %s", strings.Join(missing, ", ")))
		return l, &r
	}
	return l, nil
}

func (s *Server) handleLink(c *call) reply {
	l, rep := parseLink(c)
	if rep != nil {
		return *rep
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	m := s.st.get(l.LoyaltyID)
	switch {
	case m == nil:
		return s.memberNotFound()
	case m.linked:
		return memberIsLinked()
	}
	if other, inUse := s.st.partnerIDs[l.PartnerMemberID]; inUse && other != m.id {
		return badRequest(CodePartnerMemberInUse, "partnerMemberId is linked to another member")
	}
	m.linked, m.partnerMemberID = true, l.PartnerMemberID
	s.st.partnerIDs[l.PartnerMemberID] = m.id
	s.log.Info("member linked", zap.String("loyaltyId", m.id))
	return ok(linkResult{Phone: m.phone, LoyaltyID: m.id})
}

func (s *Server) handleUnlink(c *call) reply {
	l, rep := parseLink(c)
	if rep != nil {
		return *rep
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	m := s.st.get(l.LoyaltyID)
	switch {
	case m == nil:
		return s.memberNotFound()
	case !m.linked || m.partnerMemberID != l.PartnerMemberID:
		// Linked to another partnerMemberId counts as not linked to this one.
		return memberIsNotLinked()
	}
	m.linked, m.partnerMemberID = false, ""
	delete(s.st.partnerIDs, l.PartnerMemberID)
	s.log.Info("member unlinked", zap.String("loyaltyId", m.id))
	return ok(true)
}
