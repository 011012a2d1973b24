// The api command against the simulator over HTTP.

package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

type apiStack struct {
	sim     *sim.Server
	url     string
	keyFile string
	envs    map[string]string
}

func newAPIStack(t *testing.T) *apiStack {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalECPrivateKey(key)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "partner.pem")
	secretFile := filepath.Join(dir, "client-secret")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, []byte(sim.DefaultClientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := testkit.StartSim(t, testkit.SimOptions{Options: sim.Options{Members: 5, InitialBalance: 1000,
		PartnerKeys: []sim.PartnerKey{{KID: "cli", Key: key.Public()}}}})
	return &apiStack{sim: s.Server, url: s.URL, keyFile: keyFile, envs: map[string]string{
		"LOYALTY_BRIDGE_API_BASE_URL":           s.URL,
		"LOYALTY_BRIDGE_API_CLIENT_ID":          sim.DefaultClientID,
		"LOYALTY_BRIDGE_API_CLIENT_SECRET_FILE": secretFile,
		"LOYALTY_BRIDGE_API_USERNAME":           sim.DefaultUsername,
		"LOYALTY_BRIDGE_API_PASSWORD":           sim.DefaultPassword,
		"LOYALTY_BRIDGE_API_PARTNER_KEY":        keyFile,
		"LOYALTY_BRIDGE_API_PARTNER_KEY_ID":     "cli",
		"LOYALTY_BRIDGE_API_MAX_ATTEMPTS":       "2",
	}}
}

func (s *apiStack) api(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := s.envs[k]; return v, ok }
	code := run(ctx, env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, lookup: lookup}, append([]string{"api"}, args...))
	return code, out.String(), errb.String()
}

func TestAPICommandAgainstSimulator(t *testing.T) {
	noLeaks(t)
	s := newAPIStack(t)
	member := sim.MemberID(1)

	code, out, errs := s.api(t, "", "token")
	if code != 0 || !strings.Contains(out, `"token_type": "Bearer"`) || !strings.Contains(out, `"expires_at"`) {
		t.Fatalf("token: %d %s %s", code, out, errs)
	}
	if strings.Contains(out+errs, "eyJ") || strings.Contains(out+errs, sim.DefaultClientSecret) {
		t.Fatalf("token output leaks: %s %s", out, errs)
	}

	code, out, errs = s.api(t, "", "profile", member)
	if code != 0 || !strings.Contains(out, `"loyaltyId": "`+member+`"`) {
		t.Fatalf("profile: %d %s %s", code, out, errs)
	}
	code, out, _ = s.api(t, "", "profile-ext", "--loyalty-id", member)
	if code != 0 || !strings.Contains(out, `"tierClass"`) {
		t.Fatalf("profile-ext: %d %s", code, out)
	}

	code, out, errs = s.api(t, "", "accrue", "--loyalty-id", member, "--transaction-id", "cli-acc-1", "--amount", "150000")
	var acc struct{ BitReference string }
	if code != 0 || json.Unmarshal([]byte(out), &acc) != nil || acc.BitReference == "" {
		t.Fatalf("accrue: %d %s %s", code, out, errs)
	}
	code, out, _ = s.api(t, `{"loyaltyId":"`+member+`","bitReference":"`+acc.BitReference+`"}`, "lookup", "-")
	if code != 0 || !strings.Contains(out, `"transactionId": "cli-acc-1"`) {
		t.Fatalf("lookup: %d %s", code, out)
	}

	code, out, errs = s.api(t, "", "redeem", "--loyalty-id", member, "--transaction-id", "cli-red-1", "--amount", "5000", "--points", "10")
	if code != 0 || !strings.Contains(out, `"usedPoint": 10`) {
		t.Fatalf("redeem: %d %s %s", code, out, errs)
	}

	code, _, errs = s.api(t, "", "link", "--loyalty-id", member, "--partner-member-id", "P-1")
	if code != 0 {
		t.Fatalf("link: %d %s", code, errs)
	}
	code, out, errs = s.api(t, "", "link", "--loyalty-id", member, "--partner-member-id", "P-1")
	if code != apiExitBusiness || !strings.Contains(out, "MEMBER_IS_LINKED") || !strings.Contains(errs, "MEMBER_IS_LINKED") {
		t.Fatalf("link again: %d %s %s", code, out, errs)
	}
	code, out, _ = s.api(t, "", "unlink", "--loyalty-id", member, "--partner-member-id", "P-1")
	if code != 0 || strings.TrimSpace(out) != "true" {
		t.Fatalf("unlink: %d %s", code, out)
	}

	onboard := `{"phone":"+84901111222","fullName":"Nguyen Van A","gender":"male","birthday":"1990-01-02","isKYC":true,
		"idNumber":"012345678901","placeOfIssue":"Ha Noi","placeOfBirth":"Ha Noi","issueDate":"2015-01-01",
		"expireDate":"2035-01-01","nationality":"VNM","address":"1 Trang Tien","externalId":"ext-cli-1"}`
	code, out, errs = s.api(t, onboard, "onboard", "-")
	if code != 0 || !strings.Contains(out, `"memberCode"`) {
		t.Fatalf("onboard: %d %s %s", code, out, errs)
	}
	code, out, errs = s.api(t, strings.Replace(onboard, `"male"`, `"robot"`, 1), "onboard", "-")
	if code != apiExitBusiness || !strings.Contains(out, "resultUrl") || !strings.Contains(errs, "BAD_REQUEST") {
		t.Fatalf("bad onboard: %d %s %s", code, out, errs)
	}
	if strings.Contains(errs, "+84901111222") {
		t.Fatalf("error output carries the phone number: %s", errs)
	}
}

func TestAPICommandFailures(t *testing.T) {
	noLeaks(t)
	s := newAPIStack(t)
	if code, _, _ := s.api(t, ""); code != 2 {
		t.Fatalf("no call: exit %d", code)
	}
	if code, _, _ := s.api(t, "", "teleport"); code != 2 {
		t.Fatalf("unknown call: exit %d", code)
	}
	if code, _, errs := s.api(t, "", "lookup", "--loyalty-id", "LB1"); code != 2 || !strings.Contains(errs, "bitReference or transactionId") {
		t.Fatalf("invalid request: exit %d %s", code, errs)
	}
	code, out, errs := s.api(t, "", "profile", "LB99999999")
	if code != apiExitBusiness || !strings.Contains(errs, "MEMBER_NOT_FOUND") || !strings.Contains(out, `"statusCode": 400`) {
		t.Fatalf("unknown member: %d %s %s", code, out, errs)
	}
	s.envs["LOYALTY_BRIDGE_API_PASSWORD"] = "wrong-password"
	code, out, errs = s.api(t, "", "token")
	if code != apiExitAuth || strings.Contains(out+errs, "wrong-password") || strings.Contains(out+errs, sim.DefaultClientSecret) {
		t.Fatalf("bad password: %d %s %s", code, out, errs)
	}
	s.envs["LOYALTY_BRIDGE_API_PASSWORD"] = sim.DefaultPassword
	s.sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{500: 1}, Endpoints: []string{"point-accrual"}})
	code, _, errs = s.api(t, "", "accrue", "--loyalty-id", sim.MemberID(2), "--transaction-id", "cli-500", "--amount", "1")
	if code != apiExitTransient || !strings.Contains(errs, "look the transaction up") {
		t.Fatalf("ambiguous: %d %s", code, errs)
	}
	// exchange grant with the partner key
	s.sim.SetFaults(sim.Faults{})
	code, out, errs = s.api(t, "", "token", "--grant", "exchange")
	if code != 0 || !strings.Contains(out, `"grant": "exchange"`) {
		t.Fatalf("exchange: %d %s %s", code, out, errs)
	}
}

// noLeaks checks for leaked goroutines after every cleanup registered later
// (the simulator's server among them) has run.
func noLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// api sign --explain prints the claims the profile makes, and never a JWT
// or the key; a profile the partner does not share is refused by it at
// the first call that carries the JWT, naming the claim.
func TestAPISignExplain(t *testing.T) {
	noLeaks(t)
	s := newAPIStack(t)
	req := []string{"--loyalty-id", sim.MemberID(1), "--transaction-id", "R-1", "--amount", "10", "--points", "4"}
	for _, tc := range []struct {
		name    string
		profile []string
		aud     any
		covers  []any
		used    any
	}{
		{"default", nil, []any{"/api-point/partner/v1/point-redemption-with-token"},
			[]any{"loyaltyId", "transactionId", "usedPoint", "transactionAmount", "transactionDate"}, 4.0},
		{"another partner", []string{"--partner-sign-audience", "loyalty", "--partner-sign-claims", "transactionId=txn,usedPoint:string"},
			[]any{"loyalty"}, []any{"transactionId=txn", "usedPoint:string"}, "4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := s.api(t, "", append(append([]string{"sign", "--explain"}, req...), tc.profile...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var x struct {
				Sign         struct{ Header, Claims map[string]any }
				Covers       []any
				Body         map[string]any
				PartnerToken struct{ Claims map[string]any }
			}
			if err := json.Unmarshal([]byte(out), &x); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if strings.Contains(out, "eyJ") || strings.Contains(out, "PRIVATE KEY") || x.Body["sign"] != "***" {
				t.Fatalf("a credential in the explanation: %s", out)
			}
			c := x.Sign.Claims
			if fmt.Sprint(c["aud"]) != fmt.Sprint(tc.aud) || fmt.Sprint(x.Covers) != fmt.Sprint(tc.covers) ||
				x.Sign.Header["alg"] != "ES256" || x.Sign.Header["kid"] != "cli" || c["iss"] != sim.DefaultClientID {
				t.Fatalf("explanation %s", out)
			}
			if used := c["usedPoint"]; used != tc.used {
				t.Fatalf("usedPoint claim %#v, want %#v", used, tc.used)
			}
			if x.PartnerToken.Claims["typ"] != "partner-token" || x.Body["usedPoint"] != 4.0 {
				t.Fatalf("explanation %s", out)
			}
		})
	}
	if code, _, stderr := s.api(t, "", append([]string{"sign"}, req...)...); code != 2 || !strings.Contains(stderr, "never printed") {
		t.Fatalf("sign without --explain: exit %d %s", code, stderr)
	}
	// Against the simulator's default profile, the first call carrying a
	// JWT made otherwise names the claim refused.
	code, out, stderr := s.api(t, "", append(append([]string{"redeem"}, req...), "--partner-sign-audience", "loyalty")...)
	if code != apiExitBusiness || !strings.Contains(out, "sign aud is not /api-point/partner/v1/point-redemption-with-token") {
		t.Fatalf("redeem with another sign aud: exit %d\n%s\n%s", code, out, stderr)
	}
	code, _, stderr = s.api(t, "", "token", "--grant", "exchange", "--partner-token-type", "pt")
	if code != apiExitAuth || !strings.Contains(stderr, "partner token typ is not partner-token") {
		t.Fatalf("token with another partner token typ: exit %d %s", code, stderr)
	}
}
