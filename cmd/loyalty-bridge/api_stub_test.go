package main

// The api command against a stub partner API (the simulator-backed test is
// api_test.go): flag/env binding, output and exit codes.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

const (
	stubAPISecret   = "stub-secret-value"
	stubAPIPassword = "stub-password-value"
	stubAPIToken    = "eyJstubaccess.payload.sig"
)

func stubPartnerAPI(t *testing.T, bodies map[string]map[string]any) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/realms/loyalty-partner/protocol/openid-connect/token") {
			_ = r.ParseForm()
			if r.PostForm.Get("client_secret") != stubAPISecret || r.PostForm.Get("password") != stubAPIPassword {
				w.WriteHeader(401)
				fmt.Fprint(w, `{"error":"invalid_grant","error_description":"Invalid user credentials"}`)
				return
			}
			fmt.Fprintf(w, `{"access_token":%q,"expires_in":300,"refresh_expires_in":1800,"refresh_token":"eyJr.x.y","token_type":"Bearer","session_state":"s","scope":"profile"}`, stubAPIToken)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+stubAPIToken {
			w.WriteHeader(401)
			return
		}
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		bodies[r.URL.Path] = body
		switch {
		case strings.HasSuffix(r.URL.Path, "/user-profile/LB00000001"):
			fmt.Fprint(w, `{"statusCode":200,"message":"SUCCESS","data":{"loyaltyId":"LB00000001","status":"ACTIVE"}}`)
		case strings.HasSuffix(r.URL.Path, "/point-accrual"):
			if body["transactionId"] == "boom" {
				w.WriteHeader(500)
				fmt.Fprint(w, `{"statusCode":500,"message":"Internal Server Error"}`)
				return
			}
			fmt.Fprintf(w, `{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":1,"transactionId":%q,"bitReference":"BIT-1","loyaltyId":"LB00000001","timestamp":"2026-11-22T10:00:00.000Z","requestId":"r"}}`, body["transactionId"])
		case strings.HasSuffix(r.URL.Path, "/link-member"):
			w.WriteHeader(400)
			fmt.Fprint(w, `{"statusCode":400,"message":"Bad Request","errors":{"code":"MEMBER_IS_LINKED","message":"Account has been linked","name":"MemberIsLinkedException"}}`)
		default:
			w.WriteHeader(404)
		}
	}))
}

func stubCLI(t *testing.T, envs map[string]string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := envs[k]; return v, ok }
	code := run(ctx, env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, lookup: lookup}, append([]string{"api"}, args...))
	return code, out.String(), errb.String()
}

func TestAPICommandWithStub(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	bodies := map[string]map[string]any{}
	srv := stubPartnerAPI(t, bodies)
	defer srv.Close()
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(stubAPISecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	envs := map[string]string{
		"LOYALTY_BRIDGE_API_BASE_URL":           srv.URL,
		"LOYALTY_BRIDGE_API_CLIENT_ID":          "cid",
		"LOYALTY_BRIDGE_API_CLIENT_SECRET_FILE": secretFile,
		"LOYALTY_BRIDGE_API_USERNAME":           "user",
		"LOYALTY_BRIDGE_API_PASSWORD":           stubAPIPassword,
		"LOYALTY_BRIDGE_API_MAX_ATTEMPTS":       "1",
	}
	noLeak := func(s string) {
		t.Helper()
		for _, x := range []string{stubAPISecret, stubAPIPassword, "eyJ"} {
			if strings.Contains(s, x) {
				t.Fatalf("output leaks %s: %s", x, s)
			}
		}
	}

	code, out, errs := stubCLI(t, envs, "", "token")
	noLeak(out + errs)
	var tok map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &tok) != nil || tok["token_type"] != "Bearer" || tok["expires_in"] != float64(300) {
		t.Fatalf("token: %d %s %s", code, out, errs)
	}

	code, out, errs = stubCLI(t, envs, "", "profile", "LB00000001")
	if code != 0 || !strings.Contains(out, `"status": "ACTIVE"`) {
		t.Fatalf("profile: %d %s %s", code, out, errs)
	}

	code, out, errs = stubCLI(t, envs, `{"loyaltyId":"LB00000001","transactionId":"T-json","transactionAmount":10,"transactionDes":{"sku":"A"}}`,
		"accrue", "--transaction-id", "T-flag", "--date", "2026-11-22T10:00:00Z", "--transaction-date-format", "iso8601", "-")
	b := bodies["/api-point/partner/v1/point-accrual"]
	if code != 0 || !strings.Contains(out, `"bitReference": "BIT-1"`) || b["transactionId"] != "T-flag" ||
		b["transactionAmount"] != float64(10) || b["transactionDate"] != "2026-11-22T10:00:00.000Z" || b["transactionCurrency"] != "VND" {
		t.Fatalf("accrue: %d %s %s body %v", code, out, errs, b)
	}
	code, _, _ = stubCLI(t, envs, "", "accrue", "--loyalty-id", "LB00000001", "--transaction-id", "T-ms", "--amount", "5", "--date", "1763805600123")
	if b := bodies["/api-point/partner/v1/point-accrual"]; code != 0 || b["transactionDate"] != float64(1763805600123) {
		t.Fatalf("epoch-millis accrual: %d %v", code, b)
	}

	code, out, errs = stubCLI(t, envs, "", "link", "--loyalty-id", "LB00000001", "--partner-member-id", "P-1")
	if code != apiExitBusiness || !strings.Contains(out, `"name": "MemberIsLinkedException"`) || !strings.Contains(errs, "API error MEMBER_IS_LINKED") {
		t.Fatalf("link: %d %s %s", code, out, errs)
	}

	code, _, errs = stubCLI(t, envs, "", "accrue", "--loyalty-id", "LB00000001", "--transaction-id", "boom", "--amount", "1")
	if code != apiExitTransient || !strings.Contains(errs, "outcome unknown") || !strings.Contains(errs, "tx=boom") {
		t.Fatalf("ambiguous accrual: %d %s", code, errs)
	}

	code, _, errs = stubCLI(t, envs, "", "redeem", "--loyalty-id", "LB00000001", "--transaction-id", "R-1", "--points", "5")
	if code != 2 || !strings.Contains(errs, "sign is required") {
		t.Fatalf("redeem without key: %d %s", code, errs)
	}

	envs["LOYALTY_BRIDGE_API_PASSWORD"] = "wrong-" + stubAPIPassword
	code, out, errs = stubCLI(t, envs, "", "profile", "LB00000001")
	noLeak(out + errs)
	if code != apiExitAuth || !strings.Contains(errs, "invalid_grant") {
		t.Fatalf("bad password: %d %s", code, errs)
	}
	delete(envs, "LOYALTY_BRIDGE_API_PASSWORD")
	code, _, errs = stubCLI(t, envs, "", "token")
	if code != 2 || !strings.Contains(errs, "--password") {
		t.Fatalf("missing password: %d %s", code, errs)
	}
	code, _, errs = stubCLI(t, envs, "", "lookup", "-h")
	if code != 0 || !strings.Contains(errs, "LOYALTY_BRIDGE_API_CLIENT_SECRET_FILE") || !strings.Contains(errs, "LOYALTY_BRIDGE_API_BASE_URL") {
		t.Fatalf("help: %d %s", code, errs)
	}
}

// The partner profile's wire choices, set as flags or environment, reach
// the bodies the api command sends: dates in their format and JSON type,
// an unset passportNumber left out or null.
func TestAPIWireChoicesWithStub(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	bodies := map[string]map[string]any{}
	srv := stubPartnerAPI(t, bodies)
	defer srv.Close()
	envs := map[string]string{
		"LOYALTY_BRIDGE_API_BASE_URL":     srv.URL,
		"LOYALTY_BRIDGE_API_CLIENT_ID":    "cid",
		"LOYALTY_BRIDGE_API_USERNAME":     "user",
		"LOYALTY_BRIDGE_API_PASSWORD":     stubAPIPassword,
		"LOYALTY_BRIDGE_API_MAX_ATTEMPTS": "1",
	}
	envs["LOYALTY_BRIDGE_API_CLIENT_SECRET"] = stubAPISecret
	const onboard = `{"phone":"0901234567","fullName":"A B","gender":"male","birthday":"1990-01-31","isKYC":true,"idNumber":"079",` +
		`"placeOfIssue":"HN","placeOfBirth":"HP","issueDate":"2020-01-15","expireDate":"2035-01-15","nationality":"VNM","address":"x","externalId":"E1"}`
	for _, tc := range []struct {
		name     string
		flags    []string
		date     any  // the accrual transactionDate sent
		passport any  // the onboarding's passportNumber sent
		keyed    bool // passportNumber is a key of the body
	}{
		{"default", nil, 1763805600123.0, nil, false},
		{"epoch millis as a string", []string{"--partner-accrual-date-type", "string"}, "1763805600123", nil, false},
		{"null keys", []string{"--partner-unset-keyed-fields", "null"}, 1763805600123.0, nil, true},
		{"epoch seconds", []string{"--partner-accrual-date-format", "epoch-seconds"}, 1763805600.0, nil, false},
		{"a layout", []string{"--partner-accrual-date-format", "layout:2006-01-02 15:04:05"}, "2025-11-22 10:00:00", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clear(bodies)
			args := append([]string{"accrue", "--loyalty-id", "LB00000001", "--transaction-id", "T1", "--amount", "1", "--date", "1763805600123"}, tc.flags...)
			if code, _, stderr := stubCLI(t, envs, "", args...); code != 0 {
				t.Fatalf("accrue: exit %d %s", code, stderr)
			}
			if got := bodies["/api-point/partner/v1/point-accrual"]["transactionDate"]; got != tc.date {
				t.Errorf("transactionDate sent %#v, want %#v", got, tc.date)
			}
			_, _, _ = stubCLI(t, envs, onboard, append(append([]string{"onboard"}, tc.flags...), "-")...)
			body := bodies["/api-user/partner/v1/user/onboard"]
			if p, keyed := body["passportNumber"]; keyed != tc.keyed || p != tc.passport || body["idNumber"] != "079" {
				t.Errorf("onboarding sent %v", body)
			}
		})
	}
}
