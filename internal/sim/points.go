package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// maxAmount bounds transactionAmount and usedPoint so that points stay far
// from int64 overflow.
const maxAmount = 1e15

type accrualRequest struct {
	LoyaltyID           string          `json:"loyaltyId"`
	TransactionID       string          `json:"transactionId"`
	ItemID              string          `json:"itemId"`
	TransactionDes      json.RawMessage `json:"transactionDes"`
	TransactionDate     json.RawMessage `json:"transactionDate"`
	TransactionAmount   *float64        `json:"transactionAmount"`
	TransactionCurrency string          `json:"transactionCurrency"`
	ExtraData           json.RawMessage `json:"extraData"`
}

type accrualResult struct {
	SponsorID     int64  `json:"sponsorId"`
	TransactionID string `json:"transactionId"`
	BitReference  string `json:"bitReference"`
	LoyaltyID     string `json:"loyaltyId"`
	Timestamp     string `json:"timestamp"`
	RequestID     string `json:"requestId"`
}

type redemptionRequest struct {
	TransactionID  string `json:"transactionId"`
	TransactionDes string `json:"transactionDes"`
	// TransactionDate is kept raw: a string by the spec's table, a number
	// for a partner whose profile says so.
	TransactionDate   json.RawMessage `json:"transactionDate"`
	TransactionAmount *float64        `json:"transactionAmount"`
	LoyaltyID         string          `json:"loyaltyId"`
	// UsedPoint is kept as its text: the spec says only "positive number",
	// and a fraction is read exactly (parseMilli).
	UsedPoint json.RawMessage `json:"usedPoint"`
	Sign      string          `json:"sign"`
}

type redemptionResult struct {
	RequestID     string      `json:"requestId"`
	TransactionID string      `json:"transactionId"`
	BitReference  string      `json:"bitReference"`
	UsedPoint     json.Number `json:"usedPoint"`
	Timestamp     string      `json:"timestamp"`
}

type lookupRequest struct {
	LoyaltyID     string `json:"loyaltyId"`
	BitReference  string `json:"bitReference"`
	TransactionID string `json:"transactionId"`
}

type transactionRecord struct {
	TransactionPoint  json.Number `json:"transactionPoint"`
	TransactionAmount float64     `json:"transactionAmount"`
	TransactionSource string      `json:"transactionSource"`
	TransactionType   string      `json:"transactionType"`
	TransactionID     string      `json:"transactionId"`
	BitReference      string      `json:"bitReference"`
	Sponsor           string      `json:"sponsor"`
	Status            string      `json:"status"`
	TransactionTime   string      `json:"transactionTime"`
	RequestID         string      `json:"requestId"`
	Timestamp         string      `json:"timestamp"`
}

// signClaims are a redemption sign's claims: the registered ones, and
// every claim raw, to compare the body fields the profile says it covers.
type signClaims struct {
	partnerClaims
	all map[string]json.RawMessage
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *signClaims) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &c.partnerClaims); err != nil {
		return err
	}
	return json.Unmarshal(b, &c.all)
}

func invalid(format string, args ...any) reply {
	return badRequest(CodeInvalidRequest, fmt.Sprintf(format, args...))
}

// isObject reports whether raw is absent, null or a JSON object.
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null" || raw[0] == '{'
}

// parseTxDate reads a transactionDate: a JSON number or digit string of
// epoch milliseconds, or an ISO 8601 string (RFC 3339, or a date
// YYYY-MM-DD taken at midnight +07:00).
func parseTxDate(raw json.RawMessage) (time.Time, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, false
	}
	s := string(raw)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return time.Time{}, false
		}
	}
	return parseDateText(s)
}

func parseDateText(s string) (time.Time, bool) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), ms >= 0
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	if t, err := time.ParseInLocation(isoDate, s, ict); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// isNull reports whether raw is absent or null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

func missingFields(pairs ...any) []string {
	var out []string
	for i := 0; i+1 < len(pairs); i += 2 {
		if missing, _ := pairs[i+1].(bool); missing {
			out = append(out, pairs[i].(string))
		}
	}
	return out
}

func (s *Server) handleAccrual(c *call) reply {
	b, rep := jsonBody(c)
	if rep != nil {
		return *rep
	}
	var a accrualRequest
	if err := json.Unmarshal(b, &a); err != nil {
		return invalid("%s", decodeProblem(err))
	}
	if m := missingFields("loyaltyId", a.LoyaltyID == "", "transactionId", a.TransactionID == "",
		"transactionDate", len(bytes.TrimSpace(a.TransactionDate)) == 0 || string(bytes.TrimSpace(a.TransactionDate)) == "null",
		"transactionAmount", a.TransactionAmount == nil); m != nil {
		return invalid("required: %s", strings.Join(m, ", "))
	}
	// The profile's encoding first: epoch seconds read as milliseconds
	// would be a date in 1970.
	txTime, strictErr := s.opts.Profile.AccrualDate().Read(a.TransactionDate)
	okDate := strictErr == nil
	if !okDate && !s.opts.StrictWire {
		txTime, okDate = parseTxDate(a.TransactionDate)
	}
	switch {
	case strictErr != nil && s.opts.StrictWire:
		return invalid("transactionDate: %v", strictErr)
	case !okDate && !s.opts.StrictWire:
		return invalid("transactionDate: want epoch milliseconds (number or digit string) or an ISO 8601 string")
	case *a.TransactionAmount < 0 || *a.TransactionAmount > maxAmount:
		return invalid("transactionAmount must be a non-negative number (at most %g)", maxAmount)
	case !isObject(a.TransactionDes):
		return invalid("transactionDes must be a JSON object")
	case !isObject(a.ExtraData):
		return invalid("extraData must be a JSON object")
	}
	if a.TransactionCurrency == "" {
		a.TransactionCurrency = "VND"
	}
	points := wholePoints(int64(math.Floor(*a.TransactionAmount * s.opts.EarnRate)))
	if c.later != nil {
		if !s.memberKnown(a.LoyaltyID) {
			return s.memberNotFound()
		}
		c.later(func() reply { return s.applyAccrual(a, points, txTime) })
		return plainError(http.StatusGatewayTimeout)
	}
	return s.applyAccrual(a, points, txTime)
}

// applyAccrual applies a checked accrual under the duplicate policy.
func (s *Server) applyAccrual(a accrualRequest, points milli, txTime time.Time) reply {
	now := s.now()
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	m := s.st.get(a.LoyaltyID)
	if m == nil {
		return s.memberNotFound()
	}
	prev, dup := s.st.accruals[a.TransactionID]
	switch {
	case dup && s.opts.DuplicatePolicy == DuplicateReturnOriginal:
		return ok(prev.result)
	case dup && s.opts.DuplicatePolicy == DuplicateReject:
		return badRequest(s.opts.Profile.DuplicateCodes[0], "transactionId already accrued")
	}
	// Not a duplicate, or DuplicateApply: applied (again).
	if s.opts.StampProcessingTime {
		txTime = now
	}
	t := &txn{kind: s.opts.Profile.AccrualType, loyaltyID: m.id, transactionID: a.TransactionID, bitReference: s.st.bitRef(),
		requestID: uuid.NewString(), points: points, amount: *a.TransactionAmount, at: now, txTime: txTime}
	t.result = accrualResult{SponsorID: SponsorID, TransactionID: t.transactionID, BitReference: t.bitReference,
		LoyaltyID: m.id, Timestamp: now.UTC().Format(isoMillisUTC), RequestID: t.requestID}
	m.balance += points
	if !dup {
		s.st.accruals[t.transactionID] = t
	}
	s.st.byBitRef[t.bitReference] = t
	s.st.ledger[t.transactionID]++
	return ok(t.result)
}

func (s *Server) handleRedemption(c *call) reply {
	b, rep := jsonBody(c)
	if rep != nil {
		return *rep
	}
	var rq redemptionRequest
	if err := json.Unmarshal(b, &rq); err != nil {
		return invalid("%s", decodeProblem(err))
	}
	var body map[string]json.RawMessage
	_ = json.Unmarshal(b, &body) // an object: it decoded into rq
	if m := missingFields("transactionId", rq.TransactionID == "", "transactionDate", isNull(rq.TransactionDate) || string(rq.TransactionDate) == `""`,
		"transactionAmount", rq.TransactionAmount == nil, "loyaltyId", rq.LoyaltyID == "",
		"usedPoint", isNull(rq.UsedPoint), "sign", rq.Sign == ""); m != nil {
		return invalid("required: %s", strings.Join(m, ", "))
	}
	if *rq.TransactionAmount < 0 || *rq.TransactionAmount > maxAmount {
		return invalid("transactionAmount must be a non-negative number (at most %g)", maxAmount)
	}
	if bytes.TrimSpace(rq.UsedPoint)[0] == '"' {
		return invalid("usedPoint: wrong JSON type (want number)")
	}
	usedText := json.Number(bytes.TrimSpace(rq.UsedPoint))
	usedPoint, msg := parseMilli("usedPoint", usedText)
	if msg != "" {
		return invalid("%s", msg)
	}
	// Member first (as a real service resolves it before anything else),
	// then the sign, then duplicates and balance under the lock.
	if !s.memberKnown(rq.LoyaltyID) {
		return s.memberNotFound()
	}
	txTime, dateErr := s.redemptionDate(rq.TransactionDate)
	if dateErr != "" {
		return invalid("transactionDate: %s", dateErr)
	}
	// The sign is checked, and its jti used up, when the request arrives,
	// also for a write applied late: a sign expired or replayed by the
	// time a late write lands must not refuse it then.
	if msg := s.verifySign(&rq, body); msg != "" {
		return badRequest(s.opts.Profile.SignRefusedCodes[0], msg)
	}
	if c.later != nil {
		c.later(func() reply { return s.applyRedemption(rq, usedPoint, txTime) })
		return plainError(http.StatusGatewayTimeout)
	}
	return s.applyRedemption(rq, usedPoint, txTime)
}

// applyRedemption applies a checked redemption under the duplicate policy,
// if the balance allows.
func (s *Server) applyRedemption(rq redemptionRequest, usedPoint milli, txTime time.Time) reply {
	now := s.now()
	if txTime.IsZero() || s.opts.StampProcessingTime {
		txTime = now
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	m := s.st.get(rq.LoyaltyID)
	prev, dup := s.st.redemptions[rq.TransactionID]
	switch {
	case dup && s.opts.DuplicatePolicy == DuplicateReturnOriginal:
		return ok(prev.result)
	case dup && s.opts.DuplicatePolicy == DuplicateReject:
		return badRequest(s.opts.Profile.DuplicateCodes[0], "transactionId already redeemed")
	}
	if m.balance < usedPoint {
		return badRequest(CodeInsufficientPoint, "Insufficient point balance")
	}
	t := &txn{kind: s.opts.Profile.RedemptionType, loyaltyID: m.id, transactionID: rq.TransactionID, bitReference: s.st.bitRef(),
		requestID: uuid.NewString(), points: usedPoint, amount: *rq.TransactionAmount, at: now, txTime: txTime}
	t.result = redemptionResult{RequestID: t.requestID, TransactionID: t.transactionID, BitReference: t.bitReference,
		UsedPoint: usedPoint.number(), Timestamp: now.UTC().Format(isoMillisUTC)}
	m.balance -= usedPoint
	if !dup {
		s.st.redemptions[t.transactionID] = t
	}
	s.st.byBitRef[t.bitReference] = t
	s.st.ledger[t.transactionID]++
	return ok(t.result)
}

// redemptionDate reads a redemption's transactionDate: under StrictWire
// only in the profile's encoding, otherwise in it or as any string (the
// zero time when the Server cannot read it: the processing time is used).
// It returns a message when refused.
func (s *Server) redemptionDate(raw json.RawMessage) (time.Time, string) {
	t, err := s.opts.Profile.RedemptionDateEncoding().Read(raw)
	switch {
	case err == nil:
		return t, ""
	case s.opts.StrictWire:
		return time.Time{}, err.Error()
	}
	raw = bytes.TrimSpace(raw)
	if raw[0] != '"' {
		// The spec's type, unless the profile's encoding (read above) is
		// a number.
		return time.Time{}, "wrong JSON type (want string)"
	}
	var text string
	_ = json.Unmarshal(raw, &text)
	t, _ = parseDateText(text)
	return t, ""
}

// verifySign checks the redemption's sign against the body (raw, by
// field): the claims of the Server's profile; "" when valid.
func (s *Server) verifySign(rq *redemptionRequest, body map[string]json.RawMessage) string {
	var c signClaims
	if msg := s.verifyPartnerJWT(rq.Sign, &s.signJWT, &c, &c.partnerClaims); msg != "" {
		return msg
	}
	if life := c.ExpiresAt.Sub(c.IssuedAt.Time); life > s.opts.MaxSignLifetime {
		return fmt.Sprintf("sign lifetime (exp - iat) %s is over the %s allowed", life, s.opts.MaxSignLifetime)
	}
	if s.signJWT.jti == partnerprofile.JTITransactionID && c.ID != rq.TransactionID {
		return "sign jti is not the transactionId"
	}
	var differ []string
	for _, f := range s.opts.Profile.JWT.SignClaims {
		if !claimMatches(c.all[f.Claim], body[f.Field], f.Encoding) {
			differ = append(differ, f.Claim)
		}
	}
	if differ != nil {
		return "sign claims missing or differing from the body: " + strings.Join(differ, ", ")
	}
	return s.useJTI(&s.signJWT, &c.partnerClaims)
}

// claimMatches reports whether a sign claim carries the body field's value
// in encoding enc: the same JSON value (numbers compared exactly, so 3
// and 3.0 agree), or, as a string, the field's text. An absent body field
// matches only an empty string or an absent or null claim.
func claimMatches(claim, field json.RawMessage, enc partnerprofile.ClaimEncoding) bool {
	cv, cok := jsonValue(claim)
	fv, fok := jsonValue(field)
	if !fok {
		return !cok || cv == nil || cv == ""
	}
	if !cok {
		return false
	}
	if enc == partnerprofile.ClaimAsString {
		text, isString := cv.(string)
		if !isString {
			return false
		}
		if n, isNumber := fv.(json.Number); isNumber {
			cv = json.Number(text)
			fv = n
		} else {
			cv = text
		}
	}
	cn, cNum := cv.(json.Number)
	fn, fNum := fv.(json.Number)
	if cNum || fNum {
		if !cNum || !fNum {
			return false
		}
		a, aok := exactNumber(cn)
		b, bok := exactNumber(fn)
		return aok && bok && a.Cmp(b) == 0
	}
	return cv == fv
}

// jsonValue decodes raw (numbers as json.Number); ok is false when raw is
// absent.
func jsonValue(raw json.RawMessage) (v any, ok bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

func (s *Server) handleLookup(c *call) reply {
	b, rep := jsonBody(c)
	if rep != nil {
		return *rep
	}
	var l lookupRequest
	if err := json.Unmarshal(b, &l); err != nil {
		return invalid("%s", decodeProblem(err))
	}
	switch {
	case l.LoyaltyID == "":
		return invalid("required: loyaltyId")
	case l.BitReference == "" && l.TransactionID == "":
		return invalid("required: bitReference or transactionId")
	}
	s.faultsMu.Lock()
	lag, shared := s.faults.LookupLag, s.faults.SharedIDLookup
	s.faultsMu.Unlock()
	now := s.now()
	// visible: what a lagging replica (Faults.LookupLag) has seen.
	visible := func(t *txn) *txn {
		if t == nil || t.loyaltyID != l.LoyaltyID || now.Sub(t.at) < lag {
			return nil
		}
		return t
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	if s.st.get(l.LoyaltyID) == nil {
		return s.memberNotFound()
	}
	var t *txn
	switch {
	case l.BitReference != "":
		t = visible(s.st.byBitRef[l.BitReference])
		if t != nil && l.TransactionID != "" && t.transactionID != l.TransactionID {
			t = nil
		}
	default:
		// A transactionId used for both kinds finds one of them
		// (Faults.SharedIDLookup); its bitReference reaches the other.
		t = sharedID(visible(s.st.accruals[l.TransactionID]), visible(s.st.redemptions[l.TransactionID]), shared)
	}
	if t == nil {
		return badRequest(s.opts.Profile.NotFoundCodes[0], "Transaction not found")
	}
	return ok(transactionRecord{
		TransactionPoint: t.points.number(), TransactionAmount: t.amount, TransactionSource: TransactionSource,
		TransactionType: t.kind, TransactionID: t.transactionID, BitReference: t.bitReference, Sponsor: SponsorName,
		Status: s.opts.Profile.AppliedStatuses[0], TransactionTime: t.txTime.In(ict).Format(isoMillisZoned), RequestID: t.requestID,
		Timestamp: t.at.UTC().Format(isoMillisUTC),
	})
}

// sharedID picks the record a lookup by transactionId answers when it may
// find an accrual a and a redemption r (either may be nil).
func sharedID(a, r *txn, choice string) *txn {
	switch {
	case a == nil:
		return r
	case r == nil:
		return a
	case choice == SharedIDRedemption:
		return r
	case choice == SharedIDLatest && r.bitReference > a.bitReference:
		// bitRef numbers references in order of application, zero-padded.
		return r
	}
	return a
}

// memberKnown reports whether loyaltyID names a member.
func (s *Server) memberKnown(loyaltyID string) bool {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.st.get(loyaltyID) != nil
}
