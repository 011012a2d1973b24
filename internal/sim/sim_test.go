package sim_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newClock is a settable clock for token lifetimes.
func newClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC))
}

var (
	rsaPartner = sync.OnceValue(func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		return k
	})
	ecPartner = sync.OnceValue(func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
)

func ecKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// env is a simulator behind httptest with a fake clock and two registered
// partner keys: "rsa-1" (RS256) and the EC key without a kid.
type env struct {
	t      testing.TB
	sim    *sim.Server
	srv    *httptest.Server
	clk    *testkit.Clock
	client *http.Client
	access string
}

func newEnv(t testing.TB, mod func(*sim.Options)) *env {
	t.Helper()
	return newEnvHooked(t, mod, nil)
}

// newEnvHooked is newEnv with a handling hook (sim.SetHandling) in place
// before the Server serves.
func newEnvHooked(t testing.TB, mod func(*sim.Options), hook func(endpoint string)) *env {
	t.Helper()
	clk := newClock()
	o := sim.Options{Members: 20, InitialBalance: 10_000, Now: clk.Now, AdminToken: "admin-secret",
		PartnerKeys: []sim.PartnerKey{{KID: "rsa-1", Key: &rsaPartner().PublicKey}, {Key: &ecPartner().PublicKey}}}
	if mod != nil {
		mod(&o)
	}
	s, err := sim.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if hook != nil {
		sim.SetHandling(s, hook)
	}
	e := &env{t: t, sim: s, srv: httptest.NewServer(s), clk: clk,
		client: &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}}
	t.Cleanup(func() {
		// Bounded: a Close that never returns (late writes never counted
		// as landed) fails the test instead of hanging the run.
		if !finishes(5*time.Second, s.Close) {
			t.Error("Server.Close did not return within 5s")
			return
		}
		e.srv.Close()
		e.client.CloseIdleConnections()
	})
	return e
}

// finishes runs f and reports whether it returned within d. When it did
// not, f's goroutine is left behind: the test has failed anyway.
func finishes(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// flushLate is FlushLateApplies, failing the test if it does not return
// within 5s.
func (e *env) flushLate() {
	e.t.Helper()
	if !finishes(5*time.Second, e.sim.FlushLateApplies) {
		e.t.Fatal("FlushLateApplies did not return within 5s")
	}
}

// resp is a decoded answer.
type resp struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (e *env) send(req *http.Request) resp {
	e.t.Helper()
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := resp{status: res.StatusCode, header: res.Header, raw: string(b)}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &r.body); err != nil {
			e.t.Fatalf("%s %s: answer is not a JSON object: %q", req.Method, req.URL.Path, b)
		}
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			e.t.Fatalf("Content-Type %q", ct)
		}
	}
	return r
}

func (e *env) form(path string, v url.Values) resp {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return e.send(req)
}

func passwordForm() url.Values {
	return url.Values{"grant_type": {"password"}, "client_id": {sim.DefaultClientID}, "client_secret": {sim.DefaultClientSecret},
		"username": {sim.DefaultUsername}, "password": {sim.DefaultPassword}}
}

// login returns a fresh password-grant answer.
func (e *env) login() resp {
	e.t.Helper()
	r := e.form(sim.PathToken, passwordForm())
	if r.status != 200 {
		e.t.Fatalf("login: %d %s", r.status, r.raw)
	}
	return r
}

// bearer returns an access token, logging in once.
func (e *env) bearer() string {
	if e.access == "" {
		e.access = e.login().body["access_token"].(string)
	}
	return e.access
}

// call sends body (a value, or a string sent verbatim) with the env's
// access token; token "" means the env's, "-" none.
func (e *env) call(method, path string, body any, token string) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	// As the spec lists it: on every business call, GETs included.
	req.Header.Set("Content-Type", "application/json")
	switch token {
	case "":
		req.Header.Set("Authorization", "Bearer "+e.bearer())
	case "-":
	default:
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return e.send(req)
}

func (e *env) post(path string, body any) resp {
	e.t.Helper()
	return e.call(http.MethodPost, path, body, "")
}
func (e *env) get(path string) resp { e.t.Helper(); return e.call(http.MethodGet, path, nil, "") }

// Shape assertions.

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

// shape asserts that obj has exactly the fields of want, each of the JSON
// type named.
func shape(t testing.TB, what string, obj any, want map[string]string) map[string]any {
	t.Helper()
	m, ok := obj.(map[string]any)
	if !ok {
		t.Fatalf("%s: %s, want an object", what, jsonType(obj))
	}
	got := slices.Sorted(maps.Keys(m))
	if exp := slices.Sorted(maps.Keys(want)); !slices.Equal(got, exp) {
		t.Fatalf("%s: fields %v, want %v", what, got, exp)
	}
	for k, typ := range want {
		if jt := jsonType(m[k]); jt != typ {
			t.Fatalf("%s: %s is %s, want %s", what, k, jt, typ)
		}
	}
	return m
}

// successData asserts the success envelope and returns data.
func successData(t testing.TB, r resp, dataType string) any {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	m := shape(t, "envelope", r.body, map[string]string{"statusCode": "number", "message": "string", "data": dataType})
	if m["statusCode"] != 200.0 || m["message"] != "SUCCESS" {
		t.Fatalf("envelope %s", r.raw)
	}
	return m["data"]
}

// wantError asserts our error envelope: statusCode = status, errors.code =
// errors.errorCode = code.
func wantError(t testing.TB, r resp, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	m := shape(t, "error envelope", r.body, map[string]string{"statusCode": "number", "message": "string", "errors": "object"})
	if m["statusCode"] != float64(status) || m["message"] != http.StatusText(status) {
		t.Fatalf("envelope %s", r.raw)
	}
	errs := shape(t, "errors", m["errors"], map[string]string{"code": "string", "message": "string", "errorCode": "string"})
	if errs["code"] != code || errs["errorCode"] != code || errs["message"] == "" {
		t.Fatalf("errors %v, want code %s", errs, code)
	}
}

// JWTs signed by test partner keys.

type claims = jwt.MapClaims

func signJWT(t testing.TB, key crypto.Signer, kid string, c claims) string {
	t.Helper()
	method := jwt.SigningMethod(jwt.SigningMethodRS256)
	if _, ok := key.(*ecdsa.PrivateKey); ok {
		method = jwt.SigningMethodES256
	}
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// partnerClaims are valid claims of an exchange-token partner token, with
// a new jti each call.
func (e *env) partnerClaims() claims {
	now := e.clk.Now()
	return claims{"iss": sim.DefaultClientID, "aud": signing.PartnerTokenAudience, "typ": signing.PartnerTokenType,
		"iat": now.Unix(), "exp": now.Add(2 * time.Minute).Unix(), "jti": rand.Text()}
}

// signClaims are valid claims of a redemption sign over nothing yet (the
// body's claims are added by redemption), with a new jti each call.
func (e *env) signClaims() claims {
	c := e.partnerClaims()
	c["aud"], c["typ"] = signing.RedemptionSignAudience, signing.RedemptionSignType
	return c
}
