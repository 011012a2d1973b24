package sim_test

import (
	"crypto"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

var (
	ddmmyyyy = regexp.MustCompile(`^\d{2}-\d{2}-\d{4}$`)
	isoUTC   = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)
	isoICT   = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}\+07:00$`)
)

func TestProfiles(t *testing.T) {
	e := newEnv(t, nil)
	p := shape(t, "profile", successData(t, e.get(sim.PathCustomerInfo+sim.MemberID(7)), "object"), map[string]string{
		"loyaltyId": "string", "dateOfBirth": "string", "dateOfJoin": "string", "email": "string", "firstName": "string",
		"lastName": "string", "fullName": "string", "eKycStatus": "string", "status": "string", "phone": "string"})
	if p["loyaltyId"] != sim.MemberID(7) || !ddmmyyyy.MatchString(p["dateOfBirth"].(string)) ||
		!ddmmyyyy.MatchString(p["dateOfJoin"].(string)) || !strings.HasPrefix(p["phone"].(string), "+84") {
		t.Fatalf("profile %v", p)
	}
	x := shape(t, "extended profile", successData(t, e.get(sim.PathCustomerProfile+sim.MemberID(7)), "object"), map[string]string{
		"enrollingSponsor": "string", "passportNumber": "string", "nationalId": "string", "tierClass": "string", "loyaltyId": "string"})
	if x["loyaltyId"] != sim.MemberID(7) || x["tierClass"] == "" {
		t.Fatalf("extended %v", x)
	}
	for _, id := range []string{"LB99999999", sim.MemberID(21), "nobody"} {
		wantError(t, e.get(sim.PathCustomerInfo+id), 400, sim.CodeMemberNotFound)
		wantError(t, e.get(sim.PathCustomerProfile+id), 400, sim.CodeMemberNotFound)
	}
	r := e.call(http.MethodPost, sim.PathCustomerInfo+sim.MemberID(1), "{}", "")
	if r.status != 405 {
		t.Fatalf("POST profile: %d", r.status)
	}
	if r := e.get("/api-user/partner/v1/nothing"); r.status != 404 || r.body["statusCode"] != 404.0 {
		t.Fatalf("unknown path: %d %s", r.status, r.raw)
	}
}

func onboardBody(ext string) map[string]any {
	return map[string]any{"phone": "0901234567", "fullName": "Nguyen Van An", "firstName": "An", "lastName": "Nguyen",
		"gender": "male", "birthday": "1990-01-31", "email": "an@example.com", "isKYC": true, "idNumber": "079201001234",
		"passportNumber": nil, "placeOfIssue": "Ha Noi", "placeOfBirth": "Hai Phong", "issueDate": "2020-01-15",
		"expireDate": "2035-01-15", "nationality": "VNM", "address": "12 Ly Thuong Kiet", "externalId": ext, "memberCode": ""}
}

func TestOnboard(t *testing.T) {
	e := newEnv(t, nil)
	d := shape(t, "onboarded", successData(t, e.post(sim.PathOnboard, onboardBody("P-1")), "object"), map[string]string{
		"phone": "string", "fullName": "string", "firstName": "string", "lastName": "string", "memberCode": "string", "createdAt": "string"})
	if d["memberCode"] != sim.MemberID(21) || d["phone"] != "+84901234567" || !isoUTC.MatchString(d["createdAt"].(string)) {
		t.Fatalf("onboarded %v", d)
	}
	p := successData(t, e.get(sim.PathCustomerInfo+sim.MemberID(21)), "object").(map[string]any)
	if p["dateOfBirth"] != "31-01-1990" || p["eKycStatus"] != "VERIFIED" || p["fullName"] != "Nguyen Van An" {
		t.Fatalf("profile of onboarded %v", p)
	}
	if m, _ := e.sim.Member(sim.MemberID(21)); m.Linked || m.Balance != 0 || m.ExternalID != "P-1" {
		t.Fatalf("state %+v", m)
	}

	with := func(f func(map[string]any)) map[string]any { b := onboardBody("P-new"); f(b); return b }
	cases := []struct {
		name   string
		body   any
		reason string
	}{
		{"duplicate externalId", onboardBody("P-1"), "DUPLICATE_EXTERNAL_ID"},
		{"missing phone", with(func(b map[string]any) { delete(b, "phone") }), "MISSING_FIELD"},
		{"missing externalId", with(func(b map[string]any) { b["externalId"] = "" }), "MISSING_FIELD"},
		{"missing isKYC", with(func(b map[string]any) { delete(b, "isKYC") }), "MISSING_FIELD"},
		{"no id document", with(func(b map[string]any) { delete(b, "idNumber") }), "MISSING_ID_DOCUMENT"},
		{"bad gender", with(func(b map[string]any) { b["gender"] = "robot" }), "INVALID_GENDER"},
		{"bad birthday", with(func(b map[string]any) { b["birthday"] = "1990-02-30" }), "INVALID_DATE"},
		{"DD-MM-YYYY issueDate", with(func(b map[string]any) { b["issueDate"] = "15-01-2020" }), "INVALID_DATE"},
		{"expires before issue", with(func(b map[string]any) { b["expireDate"] = "2019-01-01" }), "INVALID_DATE"},
		{"alpha-2 nationality", with(func(b map[string]any) { b["nationality"] = "VN" }), "INVALID_NATIONALITY"},
		{"unassigned nationality", with(func(b map[string]any) { b["nationality"] = "XKX" }), "INVALID_NATIONALITY"},
		{"bad phone", with(func(b map[string]any) { b["phone"] = "call me" }), "INVALID_PHONE"},
		{"bad email", with(func(b map[string]any) { b["email"] = "nope" }), "INVALID_EMAIL"},
		{"isKYC a string", with(func(b map[string]any) { b["isKYC"] = "yes" }), "INVALID_REQUEST"},
		{"malformed JSON", `{"phone":`, "INVALID_REQUEST"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(sim.PathOnboard, tc.body)
			if r.status != 400 {
				t.Fatalf("status %d: %s", r.status, r.raw)
			}
			m := shape(t, "onboarding error", r.body, map[string]string{"statusCode": "number", "message": "string", "errors": "object", "data": "object"})
			errs := shape(t, "errors", m["errors"], map[string]string{"code": "string", "message": "string", "errorCode": "string"})
			data := shape(t, "data", m["data"], map[string]string{"resultUrl": "string"})
			if m["statusCode"] != 400.0 || m["message"] != "Bad Request" || errs["code"] != "0001" || errs["message"] != "Bad Request" ||
				errs["errorCode"] != "BAD_REQUEST" || !strings.HasPrefix(data["resultUrl"].(string), sim.OnboardingResultURL+"?errorCode="+tc.reason) {
				t.Fatalf("onboarding error %s", r.raw)
			}
		})
	}
	// Passport alone is an identity document too.
	successData(t, e.post(sim.PathOnboard, with(func(b map[string]any) {
		delete(b, "idNumber")
		b["passportNumber"] = "C1234567"
		b["externalId"] = "P-2"
	})), "object")
}

func linkErr(t *testing.T, r resp, code, msg, name string) {
	t.Helper()
	if r.status != 400 {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	m := shape(t, "link error", r.body, map[string]string{"statusCode": "number", "message": "string", "errors": "object"})
	errs := shape(t, "errors", m["errors"], map[string]string{"code": "string", "message": "string", "name": "string"})
	if m["statusCode"] != 400.0 || m["message"] != "Bad Request" || errs["code"] != code || errs["message"] != msg || errs["name"] != name {
		t.Fatalf("link error %s", r.raw)
	}
}

func TestLinkTransitions(t *testing.T) {
	e := newEnv(t, nil)
	id := sim.MemberID(3)
	link := func(pm string) resp {
		return e.post(sim.PathLink, map[string]string{"loyaltyId": id, "partnerMemberId": pm})
	}
	unlink := func(pm string) resp {
		return e.post(sim.PathUnlink, map[string]string{"loyaltyId": id, "partnerMemberId": pm})
	}
	isLinked := func(t *testing.T, r resp) {
		linkErr(t, r, "MEMBER_IS_LINKED", "The account has been linked", "MemberIsLinkedException")
	}
	notLinked := func(t *testing.T, r resp) {
		linkErr(t, r, "MEMBER_IS_NOT_LINKED_YET", "The account is not linked yet", "MemberIsNotLinkedException")
	}
	state := func(want bool) {
		t.Helper()
		if m, _ := e.sim.Member(id); m.Linked != want {
			t.Fatalf("linked %v, want %v", m.Linked, want)
		}
	}

	// not linked --unlink--> not linked, error
	notLinked(t, unlink("P-3"))
	state(false)
	// not linked --link--> linked
	d := shape(t, "link result", successData(t, link("P-3"), "object"), map[string]string{"phone": "string", "loyaltyId": "string"})
	if d["loyaltyId"] != id || !strings.HasPrefix(d["phone"].(string), "+") {
		t.Fatalf("%v", d)
	}
	state(true)
	// linked --link--> linked, error (with the same or another partnerMemberId)
	isLinked(t, link("P-3"))
	isLinked(t, link("P-other"))
	// unlink with another partnerMemberId: not linked to that one
	notLinked(t, unlink("P-other"))
	state(true)
	// linked --unlink--> not linked, data true
	if d := successData(t, unlink("P-3"), "boolean"); d != true {
		t.Fatalf("unlink data %v", d)
	}
	state(false)

	// A partnerMemberId linked to one member cannot be linked to another.
	successData(t, link("P-3"), "object")
	wantError(t, e.post(sim.PathLink, map[string]string{"loyaltyId": sim.MemberID(4), "partnerMemberId": "P-3"}), 400, sim.CodePartnerMemberInUse)

	for name, body := range map[string]any{
		"missing partnerMemberId": map[string]string{"loyaltyId": id},
		"missing loyaltyId":       map[string]string{"partnerMemberId": "P"},
		"wrong type":              map[string]any{"loyaltyId": 3, "partnerMemberId": "P"},
		"malformed":               `{"loyaltyId"`,
		"array":                   `[]`,
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, e.post(sim.PathLink, body), 400, sim.CodeInvalidRequest)
			wantError(t, e.post(sim.PathUnlink, body), 400, sim.CodeInvalidRequest)
		})
	}
	wantError(t, e.post(sim.PathLink, map[string]string{"loyaltyId": "LB77777777", "partnerMemberId": "P"}), 400, sim.CodeMemberNotFound)
	wantError(t, e.post(sim.PathUnlink, map[string]string{"loyaltyId": "LB77777777", "partnerMemberId": "P"}), 400, sim.CodeMemberNotFound)
}

func accrual(member int, tx string, amount any, date any) map[string]any {
	return map[string]any{"loyaltyId": sim.MemberID(member), "transactionId": tx, "itemId": "SKU-1",
		"transactionDes": map[string]any{"sku": "SKU-1", "qty": 1}, "transactionDate": date, "transactionAmount": amount,
		"transactionCurrency": "VND", "extraData": map[string]any{"store": "HN-01"}}
}

var accrualShape = map[string]string{"sponsorId": "number", "transactionId": "string", "bitReference": "string",
	"loyaltyId": "string", "timestamp": "string", "requestId": "string"}

var recordShape = map[string]string{"transactionPoint": "number", "transactionAmount": "number", "transactionSource": "string",
	"transactionType": "string", "transactionId": "string", "bitReference": "string", "sponsor": "string", "status": "string",
	"transactionTime": "string", "requestId": "string", "timestamp": "string"}

func TestAccrual(t *testing.T) {
	e := newEnv(t, nil)
	const txDate = 1763787600000 // 2025-11-22T05:00:00Z
	d := shape(t, "accrual", successData(t, e.post(sim.PathAccrual, accrual(1, "T-1", 150999, txDate)), "object"), accrualShape)
	if d["transactionId"] != "T-1" || d["loyaltyId"] != sim.MemberID(1) || d["bitReference"] == "" ||
		!uuidRE.MatchString(d["requestId"].(string)) || !isoUTC.MatchString(d["timestamp"].(string)) {
		t.Fatalf("accrual %v", d)
	}
	if m, _ := e.sim.Member(sim.MemberID(1)); m.Balance != 10_000+150 {
		t.Fatalf("balance %v, want floor(150999 × 0.001) more", m.Balance)
	}
	rec := shape(t, "record", successData(t, e.post(sim.PathLookup, map[string]string{"loyaltyId": sim.MemberID(1), "transactionId": "T-1"}), "object"), recordShape)
	if rec["transactionPoint"] != 150.0 || rec["transactionAmount"] != 150999.0 || rec["transactionType"] != "ACCRUAL" ||
		rec["transactionSource"] != "PARTNER" || rec["status"] != "SUCCESS" || rec["transactionTime"] != "2025-11-22T12:00:00.000+07:00" ||
		rec["bitReference"] != d["bitReference"] || rec["requestId"] != d["requestId"] || !isoUTC.MatchString(rec["timestamp"].(string)) {
		t.Fatalf("record %v", rec)
	}

	// Every transactionDate form, and a missing currency (VND).
	for i, date := range []any{txDate, "1763787600000", "2025-11-22T12:00:00+07:00", "2025-11-22T05:00:00.123Z", "2025-11-22"} {
		b := accrual(2, fmt.Sprintf("T-date-%d", i), 1000, date)
		delete(b, "transactionCurrency")
		delete(b, "transactionDes")
		b["extraData"] = nil
		successData(t, e.post(sim.PathAccrual, b), "object")
	}
	// Zero amount: zero points, still a transaction.
	successData(t, e.post(sim.PathAccrual, accrual(2, "T-zero", 0, txDate)), "object")

	with := func(f func(map[string]any)) map[string]any { b := accrual(3, "T-bad", 1000, txDate); f(b); return b }
	cases := []struct {
		name string
		body any
		code string
	}{
		{"duplicate", accrual(1, "T-1", 1000, txDate), sim.CodeDuplicateTransaction},
		{"duplicate for another member", accrual(4, "T-1", 1000, txDate), sim.CodeDuplicateTransaction},
		{"unknown member", with(func(b map[string]any) { b["loyaltyId"] = "LB55555555" }), sim.CodeMemberNotFound},
		{"negative amount", with(func(b map[string]any) { b["transactionAmount"] = -1 }), sim.CodeInvalidRequest},
		{"amount a string", with(func(b map[string]any) { b["transactionAmount"] = "10" }), sim.CodeInvalidRequest},
		{"missing amount", with(func(b map[string]any) { delete(b, "transactionAmount") }), sim.CodeInvalidRequest},
		{"missing transactionId", with(func(b map[string]any) { delete(b, "transactionId") }), sim.CodeInvalidRequest},
		{"missing loyaltyId", with(func(b map[string]any) { delete(b, "loyaltyId") }), sim.CodeInvalidRequest},
		{"missing date", with(func(b map[string]any) { delete(b, "transactionDate") }), sim.CodeInvalidRequest},
		{"unreadable date", with(func(b map[string]any) { b["transactionDate"] = "22/11/2025" }), sim.CodeInvalidRequest},
		{"fractional millis", with(func(b map[string]any) { b["transactionDate"] = 1.5 }), sim.CodeInvalidRequest},
		{"transactionDes a string", with(func(b map[string]any) { b["transactionDes"] = "coffee" }), sim.CodeInvalidRequest},
		{"extraData an array", with(func(b map[string]any) { b["extraData"] = []int{1} }), sim.CodeInvalidRequest},
		{"malformed JSON", `{"loyaltyId":`, sim.CodeInvalidRequest},
		{"trailing garbage", `{"loyaltyId":"x"} {}`, sim.CodeInvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantError(t, e.post(sim.PathAccrual, tc.body), 400, tc.code) })
	}
	t.Run("wrong content type", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+sim.PathAccrual, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+e.bearer())
		req.Header.Set("Content-Type", "text/plain")
		wantError(t, e.send(req), 400, sim.CodeInvalidRequest)
	})
	t.Run("body over 1 MiB", func(t *testing.T) {
		big := `{"loyaltyId":"` + strings.Repeat("x", sim.MaxBodyBytes) + `"}`
		wantError(t, e.post(sim.PathAccrual, big), 413, sim.CodeInvalidRequest)
	})
	if e.sim.Effects("T-1") != 1 || e.sim.Effects("T-bad") != 0 || len(e.sim.Ledger()) != 7 {
		t.Fatalf("ledger %v", e.sim.Ledger())
	}
}

func TestDuplicateReturnOriginal(t *testing.T) {
	e := newEnv(t, func(o *sim.Options) { o.DuplicatePolicy = sim.DuplicateReturnOriginal })
	first := successData(t, e.post(sim.PathAccrual, accrual(1, "T-1", 5000, 1)), "object")
	again := successData(t, e.post(sim.PathAccrual, accrual(1, "T-1", 5000, 1)), "object")
	if fmt.Sprint(first) != fmt.Sprint(again) {
		t.Fatalf("first %v, again %v", first, again)
	}
	r1 := successData(t, e.post(sim.PathRedemption, e.redemption(1, "R-1", 7, 10, "2026-11-22", nil)), "object")
	r2 := successData(t, e.post(sim.PathRedemption, e.redemption(1, "R-1", 7, 10, "2026-11-22", nil)), "object")
	if fmt.Sprint(r1) != fmt.Sprint(r2) {
		t.Fatalf("first %v, again %v", r1, r2)
	}
	if m, _ := e.sim.Member(sim.MemberID(1)); m.Balance != 10_000+5-7 || e.sim.Effects("T-1") != 1 || e.sim.Effects("R-1") != 1 {
		t.Fatalf("balance %v, ledger %v", m.Balance, e.sim.Ledger())
	}
	if p, err := sim.ParseDuplicatePolicy("return-original"); err != nil || p != sim.DuplicateReturnOriginal || p.String() != "return-original" {
		t.Fatal(p, err)
	}
	if _, err := sim.ParseDuplicatePolicy("ignore"); err == nil {
		t.Fatal("bad policy accepted")
	}
}

// A partner without duplicate detection: a repeated transactionId is a
// new transaction each time (balance, bitReference, ledger), a lookup
// still finds the first, and the admin API lists the double effects.
func TestDuplicateApply(t *testing.T) {
	e := newEnv(t, func(o *sim.Options) { o.DuplicatePolicy = sim.DuplicateApply })
	first := successData(t, e.post(sim.PathAccrual, accrual(1, "T-1", 5000, 1)), "object").(map[string]any)
	again := successData(t, e.post(sim.PathAccrual, accrual(1, "T-1", 5000, 1)), "object").(map[string]any)
	if first["bitReference"] == again["bitReference"] {
		t.Fatalf("the repeat was not a new transaction: %v, %v", first, again)
	}
	successData(t, e.post(sim.PathAccrual, accrual(1, "T-2", 5000, 1)), "object")
	for range 3 {
		successData(t, e.post(sim.PathRedemption, e.redemption(1, "R-1", 7, 10, "2026-11-22", nil)), "object")
	}
	if m, _ := e.sim.Member(sim.MemberID(1)); m.Balance != 10_000+3*5-3*7 {
		t.Fatalf("balance %v, ledger %v", m.Balance, e.sim.Ledger())
	}
	if got := e.sim.EffectsOver(1); len(got) != 2 || got["T-1"] != 2 || got["R-1"] != 3 || e.sim.Effects("T-2") != 1 {
		t.Fatalf("effects over 1: %v", got)
	}
	l := successData(t, e.post(sim.PathLookup, map[string]string{"loyaltyId": sim.MemberID(1), "transactionId": "T-1"}), "object").(map[string]any)
	if l["bitReference"] != first["bitReference"] {
		t.Fatalf("lookup found %v, want the first (%v)", l["bitReference"], first["bitReference"])
	}
	const tok = "admin-secret"
	if r := e.admin(http.MethodGet, "ledger?over=1", tok, ""); r.status != 200 || len(r.body) != 2 || r.body["R-1"] != 3.0 {
		t.Fatalf("ledger?over=1: %s", r.raw)
	}
	if r := e.admin(http.MethodGet, "ledger?over=3", tok, ""); r.status != 200 || len(r.body) != 0 {
		t.Fatalf("ledger?over=3: %s", r.raw)
	}
	wantError(t, e.admin(http.MethodGet, "ledger?over=x", tok, ""), 400, sim.CodeInvalidRequest)
	if p, err := sim.ParseDuplicatePolicy("apply"); err != nil || p != sim.DuplicateApply || p.String() != "apply" {
		t.Fatal(p, err)
	}
	if _, err := sim.New(sim.Options{DuplicatePolicy: sim.DuplicatePolicy(9)}); err == nil {
		t.Fatal("unknown policy accepted")
	}
}

// redemption builds a redemption body signed by key (the RSA partner key
// with kid rsa-1 when nil) over the same values, after mod changes the
// sign's claims.
func (e *env) redemption(member int, tx string, used, amount any, date string, mod func(claims), key ...crypto.Signer) map[string]any {
	c := e.signClaims()
	for k, v := range map[string]any{"loyaltyId": sim.MemberID(member), "transactionId": tx, "usedPoint": used,
		"transactionAmount": amount, "transactionDate": date} {
		c[k] = v
	}
	if mod != nil {
		mod(c)
	}
	var sign string
	if len(key) == 0 {
		sign = signJWT(e.t, rsaPartner(), "rsa-1", c)
	} else {
		sign = signJWT(e.t, key[0], "", c)
	}
	return map[string]any{"transactionId": tx, "transactionDes": "voucher", "transactionDate": date,
		"transactionAmount": amount, "loyaltyId": sim.MemberID(member), "usedPoint": used, "sign": sign}
}

func TestRedemption(t *testing.T) {
	e := newEnv(t, nil)
	d := shape(t, "redemption", successData(t, e.post(sim.PathRedemption, e.redemption(5, "R-1", 40, 99000.5, "2026-11-22T10:00:00+07:00", nil)), "object"),
		map[string]string{"requestId": "string", "transactionId": "string", "bitReference": "string", "usedPoint": "number", "timestamp": "string"})
	if d["usedPoint"] != 40.0 || d["transactionId"] != "R-1" || !uuidRE.MatchString(d["requestId"].(string)) || !isoUTC.MatchString(d["timestamp"].(string)) {
		t.Fatalf("redemption %v", d)
	}
	rec := shape(t, "record", successData(t, e.post(sim.PathLookup, map[string]string{"loyaltyId": sim.MemberID(5), "bitReference": d["bitReference"].(string)}), "object"), recordShape)
	if rec["transactionType"] != "REDEMPTION" || rec["transactionPoint"] != 40.0 || rec["transactionAmount"] != 99000.5 ||
		rec["transactionTime"] != "2026-11-22T10:00:00.000+07:00" {
		t.Fatalf("record %v", rec)
	}
	// ES256 by the key registered without a kid; usedPoint sent as 3.0 is 3.
	successData(t, e.post(sim.PathRedemption, e.redemption(5, "R-ec", 3.0, 0, "d", nil, ecPartner())), "object")
	if m, _ := e.sim.Member(sim.MemberID(5)); m.Balance != 10_000-43 {
		t.Fatalf("balance %v", m.Balance)
	}

	stranger := ecKey(t)
	cases := []struct {
		name string
		body map[string]any
		code string
	}{
		{"insufficient", e.redemption(5, "R-big", 1_000_000, 1, "d", nil), sim.CodeInsufficientPoint},
		{"duplicate", e.redemption(5, "R-1", 1, 1, "d", nil), sim.CodeDuplicateTransaction},
		{"unknown member", e.redemption(99, "R-x", 1, 1, "d", nil), sim.CodeMemberNotFound},
		{"usedPoint 0", e.redemption(5, "R-x", 0, 1, "d", nil), sim.CodeInvalidRequest},
		{"usedPoint negative", e.redemption(5, "R-x", -5, 1, "d", nil), sim.CodeInvalidRequest},
		{"usedPoint past a thousandth", e.redemption(5, "R-x", 1.0005, 1, "d", nil), sim.CodeInvalidRequest},
		{"usedPoint a string", e.redemption(5, "R-x", "1", 1, "d", nil), sim.CodeInvalidRequest},
		{"usedPoint null", e.redemption(5, "R-x", nil, 1, "d", nil), sim.CodeInvalidRequest},
		{"negative amount", e.redemption(5, "R-x", 1, -1, "d", nil), sim.CodeInvalidRequest},
		{"sign: wrong key", e.redemption(5, "R-x", 1, 1, "d", nil, stranger), sim.CodeInvalidSign},
		{"sign: expired", e.redemption(5, "R-x", 1, 1, "d", func(c claims) { c["exp"] = e.clk.Now().Add(-time.Second).Unix() }), sim.CodeInvalidSign},
		{"sign: wrong iss", e.redemption(5, "R-x", 1, 1, "d", func(c claims) { c["iss"] = "other" }), sim.CodeInvalidSign},
		{"sign: jti missing", e.redemption(5, "R-x", 1, 1, "d", func(c claims) { delete(c, "jti") }), sim.CodeInvalidSign},
		{"sign: usedPoint differs", e.redemption(5, "R-x", 1, 1, "d", func(c claims) { c["usedPoint"] = 2 }), sim.CodeInvalidSign},
		{"sign: usedPoint a string", e.redemption(5, "R-x", 1, 1, "d", func(c claims) { c["usedPoint"] = "1" }), sim.CodeInvalidSign},
		{"sign: amount differs", e.redemption(5, "R-x", 1, 1, "d", func(c claims) { c["transactionAmount"] = 1.01 }), sim.CodeInvalidSign},
		{"sign: date differs", e.redemption(5, "R-x", 1, 1, "d", func(c claims) { c["transactionDate"] = "D" }), sim.CodeInvalidSign},
		{"sign: loyaltyId differs", e.redemption(5, "R-x", 1, 1, "d", func(c claims) { c["loyaltyId"] = sim.MemberID(6) }), sim.CodeInvalidSign},
		{"sign: transactionId missing", e.redemption(5, "R-x", 1, 1, "d", func(c claims) { delete(c, "transactionId") }), sim.CodeInvalidSign},
		{"sign: not a JWT", func() map[string]any { b := e.redemption(5, "R-x", 1, 1, "d", nil); b["sign"] = "x"; return b }(), sim.CodeInvalidSign},
		{"sign: missing", func() map[string]any { b := e.redemption(5, "R-x", 1, 1, "d", nil); delete(b, "sign"); return b }(), sim.CodeInvalidRequest},
		{"date a number", func() map[string]any { b := e.redemption(5, "R-x", 1, 1, "d", nil); b["transactionDate"] = 5; return b }(), sim.CodeInvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantError(t, e.post(sim.PathRedemption, tc.body), 400, tc.code) })
	}
	t.Run("sign: tampered body claim", func(t *testing.T) {
		b := e.redemption(5, "R-x", 1, 1, "d", nil)
		parts := strings.Split(b["sign"].(string), ".")
		parts[1] = parts[1][:len(parts[1])-2] + "xx"
		b["sign"] = strings.Join(parts, ".")
		wantError(t, e.post(sim.PathRedemption, b), 400, sim.CodeInvalidSign)
	})
	if e.sim.Effects("R-x") != 0 || e.sim.Effects("R-big") != 0 || e.sim.Effects("R-1") != 1 {
		t.Fatalf("ledger %v", e.sim.Ledger())
	}
	// A refused redemption was not recorded: the same id may succeed later.
	successData(t, e.post(sim.PathRedemption, e.redemption(5, "R-x", 1, 1, "d", nil)), "object")
}

func TestLookup(t *testing.T) {
	e := newEnv(t, nil)
	a := successData(t, e.post(sim.PathAccrual, accrual(1, "T-1", 2000, 0)), "object").(map[string]any)
	bit := a["bitReference"].(string)
	lookup := func(b map[string]string) resp { return e.post(sim.PathLookup, b) }
	for name, b := range map[string]map[string]string{
		"by transactionId": {"loyaltyId": sim.MemberID(1), "transactionId": "T-1"},
		"by bitReference":  {"loyaltyId": sim.MemberID(1), "bitReference": bit},
		"by both":          {"loyaltyId": sim.MemberID(1), "bitReference": bit, "transactionId": "T-1"},
	} {
		t.Run(name, func(t *testing.T) {
			rec := shape(t, "record", successData(t, lookup(b), "object"), recordShape)
			if rec["transactionId"] != "T-1" || rec["bitReference"] != bit || !isoICT.MatchString(rec["transactionTime"].(string)) {
				t.Fatalf("%v", rec)
			}
		})
	}
	for name, tc := range map[string]struct {
		body map[string]string
		code string
	}{
		"unknown transactionId":   {map[string]string{"loyaltyId": sim.MemberID(1), "transactionId": "nope"}, sim.CodeTransactionNotFound},
		"unknown bitReference":    {map[string]string{"loyaltyId": sim.MemberID(1), "bitReference": "BIT0"}, sim.CodeTransactionNotFound},
		"another member's":        {map[string]string{"loyaltyId": sim.MemberID(2), "transactionId": "T-1"}, sim.CodeTransactionNotFound},
		"another member's by bit": {map[string]string{"loyaltyId": sim.MemberID(2), "bitReference": bit}, sim.CodeTransactionNotFound},
		"both, not matching":      {map[string]string{"loyaltyId": sim.MemberID(1), "bitReference": bit, "transactionId": "T-2"}, sim.CodeTransactionNotFound},
		"neither reference":       {map[string]string{"loyaltyId": sim.MemberID(1)}, sim.CodeInvalidRequest},
		"no loyaltyId":            {map[string]string{"transactionId": "T-1"}, sim.CodeInvalidRequest},
		"unknown member":          {map[string]string{"loyaltyId": "LB12345678", "transactionId": "T-1"}, sim.CodeMemberNotFound},
	} {
		t.Run(name, func(t *testing.T) { wantError(t, lookup(tc.body), 400, tc.code) })
	}
}

// The spec lists Authorization and Content-Type as required on every
// business endpoint, the GETs included; a request without either is
// refused before it is handled, with the error envelope of the spec's
// error section (onboarding's own envelope for onboarding).
func TestRequiredHeaders(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		method, path string
		onboarding   bool
	}{
		{http.MethodGet, sim.PathCustomerInfo + sim.MemberID(1), false},
		{http.MethodGet, sim.PathCustomerProfile + sim.MemberID(1), false},
		{http.MethodPost, sim.PathOnboard, true},
		{http.MethodPost, sim.PathLink, false},
		{http.MethodPost, sim.PathUnlink, false},
		{http.MethodPost, sim.PathRedemption, false},
		{http.MethodPost, sim.PathAccrual, false},
		{http.MethodPost, sim.PathLookup, false},
	} {
		for _, ct := range []string{"", "text/plain"} {
			t.Run(tc.path+" Content-Type "+ct, func(t *testing.T) {
				var body io.Reader
				if tc.method == http.MethodPost {
					body = strings.NewReader(`{}`)
				}
				req, _ := http.NewRequest(tc.method, e.srv.URL+tc.path, body)
				req.Header.Set("Authorization", "Bearer "+e.bearer())
				if ct != "" {
					req.Header.Set("Content-Type", ct)
				}
				r := e.send(req)
				if !tc.onboarding {
					wantError(t, r, 400, sim.CodeInvalidRequest)
					return
				}
				errs, _ := r.body["errors"].(map[string]any)
				data, _ := r.body["data"].(map[string]any)
				if r.status != 400 || errs["code"] != "0001" || errs["errorCode"] != "BAD_REQUEST" ||
					!strings.HasPrefix(fmt.Sprint(data["resultUrl"]), sim.OnboardingResultURL+"?errorCode="+sim.ReasonInvalidRequest) {
					t.Fatalf("onboarding without Content-Type: %d %s", r.status, r.raw)
				}
			})
		}
		t.Run(tc.path+" without Authorization", func(t *testing.T) {
			wantError(t, e.call(tc.method, tc.path, nil, "-"), 401, sim.CodeUnauthorized)
		})
	}
	if e.sim.TotalCalls(sim.EndpointCustomerInfo) == 0 {
		t.Fatal("no request reached the simulator")
	}
	if m, _ := e.sim.Member(sim.MemberID(1)); m.Linked || m.Balance != 10_000 {
		t.Fatalf("a refused request changed the member: %+v", m)
	}
}

// The spec says only that usedPoint is "a positive number": a fractional
// one is redeemed exactly (to a thousandth), and answered as sent.
func TestFractionalUsedPoint(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		used any
		want float64
	}{{12.5, 12.5}, {0.125, 0.125}, {3.0, 3}} {
		tx := fmt.Sprintf("R-%v", tc.used)
		d := successData(t, e.post(sim.PathRedemption, e.redemption(7, tx, tc.used, 10, "2026-11-22", nil)), "object").(map[string]any)
		if d["usedPoint"] != tc.want {
			t.Fatalf("usedPoint %v answered %v", tc.used, d["usedPoint"])
		}
		rec := successData(t, e.post(sim.PathLookup, map[string]string{"loyaltyId": sim.MemberID(7), "transactionId": tx}), "object").(map[string]any)
		if rec["transactionPoint"] != tc.want {
			t.Fatalf("lookup of %v: transactionPoint %v", tc.used, rec["transactionPoint"])
		}
	}
	if m, _ := e.sim.Member(sim.MemberID(7)); float64(m.Balance) != 10_000-12.5-0.125-3 {
		t.Fatalf("balance %v", m.Balance)
	}
}
