package sim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// Set to require a profile's wire choices, the simulator takes them and
// refuses the others, naming the field; without StrictWire it reads either.
func TestStrictWire(t *testing.T) {
	strs := partnerprofile.Profile{AccrualDateType: partnerprofile.DateString, RedemptionDateFormat: partnerprofile.DateEpochMillis,
		UnsetKeyed: partnerprofile.KeyedNull}
	withDoc := func(f func(map[string]any)) map[string]any { b := onboardBody("P-x"); f(b); return b }
	for _, tc := range []struct {
		name     string
		prof     partnerprofile.Profile
		strict   bool
		path     string
		body     func(e *env) map[string]any
		code     string // "" success; a reason for onboarding
		onboards bool
	}{
		{"default: accrual date a number", partnerprofile.Profile{}, true, sim.PathAccrual,
			func(*env) map[string]any { return accrual(1, "T-1", 5000, 1763787600000) }, "", false},
		{"default: accrual date a string refused", partnerprofile.Profile{}, true, sim.PathAccrual,
			func(*env) map[string]any { return accrual(1, "T-1", 5000, "1763787600000") }, sim.CodeInvalidRequest, false},
		{"not strict: either", partnerprofile.Profile{}, false, sim.PathAccrual,
			func(*env) map[string]any { return accrual(1, "T-1", 5000, "1763787600000") }, "", false},
		{"strings: accrual date a string", strs, true, sim.PathAccrual,
			func(*env) map[string]any { return accrual(1, "T-1", 5000, "1763787600000") }, "", false},
		{"strings: accrual date a number refused", strs, true, sim.PathAccrual,
			func(*env) map[string]any { return accrual(1, "T-1", 5000, 1763787600000) }, sim.CodeInvalidRequest, false},
		{"strings: redemption date in epoch millis", strs, true, sim.PathRedemption,
			func(e *env) map[string]any { return e.redemption(1, "R-1", 1, 1, "1763787600000", nil) }, "", false},
		{"strings: redemption date in ISO refused", strs, true, sim.PathRedemption,
			func(e *env) map[string]any { return e.redemption(1, "R-1", 1, 1, "2026-11-22T10:00:00.000Z", nil) }, sim.CodeInvalidRequest, false},
		{"seconds: accrual date in seconds", partnerprofile.Profile{AccrualDateFormat: partnerprofile.DateEpochSeconds}, true, sim.PathAccrual,
			func(*env) map[string]any { return accrual(1, "T-1", 5000, 1763787600) }, "", false},
		{"nulls: unset passport null", strs, true, sim.PathOnboard,
			func(*env) map[string]any { return onboardBody("P-1") }, "", true},
		{"nulls: unset passport absent refused", strs, true, sim.PathOnboard,
			func(*env) map[string]any { return withDoc(func(b map[string]any) { delete(b, "passportNumber") }) }, sim.ReasonMissingField, true},
		{"absent: unset passport null refused", partnerprofile.Profile{}, true, sim.PathOnboard,
			func(*env) map[string]any { return onboardBody("P-1") }, sim.ReasonInvalidRequest, true},
		{"absent: unset passport absent", partnerprofile.Profile{}, true, sim.PathOnboard,
			func(*env) map[string]any { return withDoc(func(b map[string]any) { delete(b, "passportNumber") }) }, "", true},
		{"not strict: unset passport null", partnerprofile.Profile{}, false, sim.PathOnboard,
			func(*env) map[string]any { return onboardBody("P-1") }, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(o *sim.Options) { o.Profile, o.StrictWire = tc.prof, tc.strict })
			r := e.post(tc.path, tc.body(e))
			switch {
			case tc.code == "":
				successData(t, r, "object")
			case tc.onboards:
				if r.status != 400 || !containsQuery(r, "errorCode="+tc.code) {
					t.Fatalf("want onboarding refused with %s: %d %s", tc.code, r.status, r.raw)
				}
			default:
				wantError(t, r, 400, tc.code)
			}
		})
	}
}

func containsQuery(r resp, q string) bool {
	data, _ := r.body["data"].(map[string]any)
	u, _ := data["resultUrl"].(string)
	return strings.Contains(u, q)
}

// Another partner's sign: the simulator set to its profile takes a sign
// made as the profile says and refuses one made otherwise, naming the
// claim.
func TestSignByProfile(t *testing.T) {
	prof := partnerprofile.Profile{JWT: partnerprofile.JWT{Issuer: "shop-1",
		Sign: partnerprofile.Claims{Audience: "loyalty", Type: partnerprofile.None, JTI: partnerprofile.JTITransactionID},
		SignClaims: []partnerprofile.SignClaim{{Field: "transactionId", Claim: "txn"}, {Field: "usedPoint", Encoding: partnerprofile.ClaimAsString},
			{Field: "loyaltyId"}}}}
	e := newEnv(t, func(o *sim.Options) { o.Profile = prof })
	good := func(tx string) claims {
		now := e.clk.Now()
		return claims{"iss": "shop-1", "aud": "loyalty", "iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": tx,
			"txn": tx, "usedPoint": "3", "loyaltyId": sim.MemberID(2)}
	}
	body := func(tx string, c claims) map[string]any {
		return map[string]any{"transactionId": tx, "transactionDate": "2026-11-22T10:00:00.000Z", "transactionAmount": 10,
			"loyaltyId": sim.MemberID(2), "usedPoint": 3, "sign": signJWT(t, rsaPartner(), "rsa-1", c)}
	}
	successData(t, e.post(sim.PathRedemption, body("R-1", good("R-1"))), "object")
	for _, tc := range []struct {
		name string
		mod  func(c claims)
		want string
	}{
		{"the default aud", func(c claims) { c["aud"] = sim.PathRedemption }, "sign aud is not loyalty"},
		{"the client_id as iss", func(c claims) { c["iss"] = sim.DefaultClientID }, "sign iss is not shop-1"},
		{"a random jti", func(c claims) { c["jti"] = "random" }, "sign jti is not the transactionId"},
		{"usedPoint a number", func(c claims) { c["usedPoint"] = 3 }, "differing from the body: usedPoint"},
		{"transactionId under its own name", func(c claims) { delete(c, "txn"); c["transactionId"] = "R-2" }, "differing from the body: txn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good("R-2")
			tc.mod(c)
			r := e.post(sim.PathRedemption, body("R-2", c))
			wantError(t, r, 400, sim.CodeInvalidSign)
			if msg := r.body["errors"].(map[string]any)["message"].(string); !strings.Contains(msg, tc.want) {
				t.Fatalf("message %q, want %q", msg, tc.want)
			}
		})
	}
}
