package sim_test

import (
	"crypto/rsa"
	"encoding/base64"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

var tokenShape = map[string]string{"access_token": "string", "expires_in": "number", "refresh_expires_in": "number",
	"refresh_token": "string", "token_type": "string", "session_state": "string", "scope": "string"}

// jwksKey fetches the simulator's JWKS and returns its one RSA key.
func (e *env) jwksKey() (string, *rsa.PublicKey) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+sim.PathCerts, nil)
	r := e.send(req)
	if r.status != 200 {
		e.t.Fatalf("certs: %d", r.status)
	}
	keys := r.body["keys"].([]any)
	if len(keys) != 1 {
		e.t.Fatalf("%d keys", len(keys))
	}
	k := shape(e.t, "jwk", keys[0], map[string]string{"kty": "string", "use": "string", "alg": "string", "kid": "string", "n": "string", "e": "string"})
	n, err1 := base64.RawURLEncoding.DecodeString(k["n"].(string))
	ex, err2 := base64.RawURLEncoding.DecodeString(k["e"].(string))
	if err1 != nil || err2 != nil || k["kty"] != "RSA" || k["alg"] != "RS256" {
		e.t.Fatalf("jwk %v", k)
	}
	return k["kid"].(string), &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(ex).Int64())}
}

func TestPasswordGrant(t *testing.T) {
	e := newEnv(t, nil)
	r := e.login()
	m := shape(t, "token response", r.body, tokenShape)
	if m["expires_in"] != 300.0 || m["refresh_expires_in"] != 1800.0 || m["token_type"] != "Bearer" ||
		m["scope"] != "openid profile email" || !uuidRE.MatchString(m["session_state"].(string)) {
		t.Fatalf("token response %v", m)
	}
	kid, pub := e.jwksKey()
	for _, tc := range []struct{ field, typ string }{{"access_token", "Bearer"}, {"refresh_token", "Refresh"}} {
		c := jwt.MapClaims{}
		tok, err := jwt.ParseWithClaims(m[tc.field].(string), c, func(*jwt.Token) (any, error) { return pub, nil },
			jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(e.clk.Now))
		if err != nil || tok.Header["kid"] != kid {
			t.Fatalf("%s does not verify with the JWKS: %v", tc.field, err)
		}
		for _, claim := range []string{"exp", "iat", "jti", "sub", "azp", "typ", "session_state"} {
			if c[claim] == nil {
				t.Fatalf("%s lacks %s", tc.field, claim)
			}
		}
		if c["typ"] != tc.typ || c["azp"] != sim.DefaultClientID || c["session_state"] != m["session_state"] {
			t.Fatalf("%s claims %v", tc.field, c)
		}
	}
	if e.sim.TokensIssued() != 1 || e.sim.Calls(sim.EndpointToken, 200) != 1 {
		t.Fatalf("issued %d", e.sim.TokensIssued())
	}
	// The access token opens business endpoints.
	successData(t, e.call(http.MethodGet, sim.PathCustomerInfo+sim.MemberID(1), nil, m["access_token"].(string)), "object")
}

func TestTokenEndpointErrors(t *testing.T) {
	e := newEnv(t, nil)
	login := e.login()
	access, refresh := login.body["access_token"].(string), login.body["refresh_token"].(string)
	with := func(mod func(url.Values)) url.Values {
		v := passwordForm()
		mod(v)
		return v
	}
	refreshForm := func(rt string) url.Values {
		return url.Values{"grant_type": {"refresh_token"}, "client_id": {sim.DefaultClientID},
			"client_secret": {sim.DefaultClientSecret}, "refresh_token": {rt}}
	}
	cases := []struct {
		name   string
		form   url.Values
		status int
		code   string
	}{
		{"wrong client secret", with(func(v url.Values) { v.Set("client_secret", "nope") }), 401, "invalid_client"},
		{"unknown client", with(func(v url.Values) { v.Set("client_id", "stranger") }), 401, "invalid_client"},
		{"missing client secret", with(func(v url.Values) { v.Del("client_secret") }), 401, "invalid_client"},
		{"wrong password", with(func(v url.Values) { v.Set("password", "nope") }), 401, "invalid_grant"},
		{"unknown user", with(func(v url.Values) { v.Set("username", "nobody") }), 401, "invalid_grant"},
		{"missing grant_type", with(func(v url.Values) { v.Del("grant_type") }), 400, "invalid_request"},
		{"unsupported grant", with(func(v url.Values) { v.Set("grant_type", "client_credentials") }), 400, "unsupported_grant_type"},
		{"refresh without token", refreshForm(""), 400, "invalid_request"},
		{"refresh unknown", refreshForm("not-a-jwt"), 400, "invalid_grant"},
		{"refresh with an access token", refreshForm(access), 400, "invalid_grant"},
		{"refresh with wrong client secret", func() url.Values { v := refreshForm(refresh); v.Set("client_secret", "x"); return v }(), 401, "invalid_client"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.form(sim.PathToken, tc.form)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.raw)
			}
			m := shape(t, "oauth error", r.body, map[string]string{"error": "string", "error_description": "string"})
			if m["error"] != tc.code {
				t.Fatalf("error %v, want %s", m["error"], tc.code)
			}
		})
	}
	t.Run("form content type required", func(t *testing.T) {
		r := e.call(http.MethodPost, sim.PathToken, `{"grant_type":"password"}`, "-")
		if r.status != 400 || r.body["error"] != "invalid_request" {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	})
	t.Run("GET", func(t *testing.T) {
		r := e.call(http.MethodGet, sim.PathToken, nil, "-")
		if r.status != 405 || r.header.Get("Allow") != http.MethodPost {
			t.Fatalf("%d %v", r.status, r.header)
		}
	})
	if got := e.sim.TokensIssued(); got != 1 {
		t.Fatalf("failed grants counted: %d", got)
	}
}

func TestTokenExpiryAndRefresh(t *testing.T) {
	e := newEnv(t, func(o *sim.Options) { o.AccessTokenTTL, o.RefreshTokenTTL = time.Minute, 10*time.Minute })
	first := e.login()
	access, refresh := first.body["access_token"].(string), first.body["refresh_token"].(string)
	info := func(tok string) resp { return e.call(http.MethodGet, sim.PathCustomerInfo+sim.MemberID(1), nil, tok) }

	successData(t, info(access), "object")
	e.clk.Advance(59 * time.Second)
	successData(t, info(access), "object")
	e.clk.Advance(time.Second) // exp reached
	wantError(t, info(access), 401, "UNAUTHORIZED")

	rf := url.Values{"grant_type": {"refresh_token"}, "client_id": {sim.DefaultClientID},
		"client_secret": {sim.DefaultClientSecret}, "refresh_token": {refresh}}
	r := e.form(sim.PathToken, rf)
	m := shape(t, "refresh response", r.body, tokenShape)
	if r.status != 200 || m["access_token"] == access || m["refresh_token"] == refresh || m["session_state"] != first.body["session_state"] {
		t.Fatalf("refresh: %d %v", r.status, m)
	}
	successData(t, info(m["access_token"].(string)), "object")

	e.clk.Advance(10 * time.Minute) // every refresh token so far expired
	r = e.form(sim.PathToken, rf)
	if r.status != 400 || r.body["error"] != "invalid_grant" {
		t.Fatalf("expired refresh: %d %s", r.status, r.raw)
	}
	if e.sim.TokensIssued() != 2 {
		t.Fatalf("issued %d", e.sim.TokensIssued())
	}
}

func TestRevokeAndTTLs(t *testing.T) {
	e := newEnv(t, nil)
	first := e.login()
	access, refresh := first.body["access_token"].(string), first.body["refresh_token"].(string)
	e.sim.RevokeTokens()
	wantError(t, e.call(http.MethodGet, sim.PathCustomerInfo+sim.MemberID(1), nil, access), 401, "UNAUTHORIZED")
	r := e.form(sim.PathToken, url.Values{"grant_type": {"refresh_token"}, "client_id": {sim.DefaultClientID},
		"client_secret": {sim.DefaultClientSecret}, "refresh_token": {refresh}})
	if r.status != 400 || r.body["error"] != "invalid_grant" {
		t.Fatalf("revoked refresh: %d %s", r.status, r.raw)
	}
	e.sim.SetTokenTTLs(90*time.Second, 0)
	if a, rf := e.sim.TokenTTLs(); a != 90*time.Second || rf != sim.DefaultRefreshTokenTTL {
		t.Fatalf("ttls %s %s", a, rf)
	}
	m := e.login().body
	if m["expires_in"] != 90.0 || m["refresh_expires_in"] != 1800.0 {
		t.Fatalf("%v", m)
	}
}

func TestBusinessAuth(t *testing.T) {
	e := newEnv(t, nil)
	refresh := e.login().body["refresh_token"].(string)
	path := sim.PathCustomerInfo + sim.MemberID(1)
	for name, hdr := range map[string]string{
		"none": "", "basic scheme": "Basic " + base64.StdEncoding.EncodeToString([]byte("a:b")), "garbage": "Bearer x.y.z",
		"refresh token": "Bearer " + refresh, "empty bearer": "Bearer ",
	} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
			if hdr != "" {
				req.Header.Set("Authorization", hdr)
			}
			wantError(t, e.send(req), 401, "UNAUTHORIZED")
		})
	}
	// The scheme is case-insensitive.
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	req.Header.Set("Authorization", "bearer "+e.bearer())
	req.Header.Set("Content-Type", "application/json")
	successData(t, e.send(req), "object")
	if n := e.sim.Calls(sim.EndpointCustomerInfo, 401); n != 5 {
		t.Fatalf("401s counted %d", n)
	}
}

func TestExchangeToken(t *testing.T) {
	e := newEnv(t, nil)
	c := e.partnerClaims
	mod := func(f func(claims)) claims { cl := c(); f(cl); return cl }
	rsaKey, ecKeyP := rsaPartner(), ecPartner()
	stranger := ecKey(t)
	cases := []struct {
		name  string
		token string
		ok    bool
	}{
		{"RS256 with kid", signJWT(t, rsaKey, "rsa-1", c()), true},
		{"RS256 without kid", signJWT(t, rsaKey, "", c()), true},
		{"ES256 without kid", signJWT(t, ecKeyP, "", c()), true},
		{"ES256 with a kid no key has (keys without kid tried)", signJWT(t, ecKeyP, "other", c()), true},
		{"exp exactly 5 minutes ahead", signJWT(t, ecKeyP, "", mod(func(cl claims) { cl["exp"] = e.clk.Now().Add(5 * time.Minute).Unix() })), true},
		{"unknown key", signJWT(t, stranger, "", c()), false},
		{"RS256 with the EC key's kid slot", signJWT(t, rsaKey, "nope", c()), false},
		{"expired", signJWT(t, ecKeyP, "", mod(func(cl claims) { cl["exp"] = e.clk.Now().Add(-time.Second).Unix() })), false},
		{"exp too far ahead", signJWT(t, ecKeyP, "", mod(func(cl claims) { cl["exp"] = e.clk.Now().Add(6 * time.Minute).Unix() })), false},
		{"missing exp", signJWT(t, ecKeyP, "", mod(func(cl claims) { delete(cl, "exp") })), false},
		{"missing iss", signJWT(t, ecKeyP, "", mod(func(cl claims) { delete(cl, "iss") })), false},
		{"wrong iss", signJWT(t, ecKeyP, "", mod(func(cl claims) { cl["iss"] = "someone-else" })), false},
		{"missing iat", signJWT(t, ecKeyP, "", mod(func(cl claims) { delete(cl, "iat") })), false},
		{"iat in the future", signJWT(t, ecKeyP, "", mod(func(cl claims) { cl["iat"] = e.clk.Now().Add(time.Minute).Unix() })), false},
		{"missing jti", signJWT(t, ecKeyP, "", mod(func(cl claims) { delete(cl, "jti") })), false},
		{"HS256", func() string {
			s, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, c()).SignedString([]byte("secret"))
			return s
		}(), false},
		{"not a JWT", "hello", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.call(http.MethodPost, sim.PathExchangeToken, map[string]string{"token": tc.token}, "-")
			if !tc.ok {
				wantError(t, r, 401, "UNAUTHORIZED")
				return
			}
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			m := shape(t, "exchange response", r.body, map[string]string{"access_token": "string", "refresh_token": "string",
				"expires_in": "number", "refresh_expires_in": "number", "token_type": "string"})
			if m["token_type"] != "Bearer" || m["expires_in"] != 300.0 {
				t.Fatalf("%v", m)
			}
			successData(t, e.call(http.MethodGet, sim.PathCustomerProfile+sim.MemberID(2), nil, m["access_token"].(string)), "object")
		})
	}
	for name, body := range map[string]string{"empty token": `{"token":""}`, "malformed JSON": `{"token":`, "no token": `{}`} {
		t.Run(name, func(t *testing.T) {
			wantError(t, e.call(http.MethodPost, sim.PathExchangeToken, body, "-"), 401, "UNAUTHORIZED")
		})
	}
	if got := e.sim.Calls(sim.EndpointExchangeToken, 200); got != 5 || e.sim.TokensIssued() != 5 {
		t.Fatalf("exchanges %d, issued %d", got, e.sim.TokensIssued())
	}
	// A key added at run time is trusted from then on.
	tok := signJWT(t, stranger, "late", c())
	wantError(t, e.call(http.MethodPost, sim.PathExchangeToken, map[string]string{"token": tok}, "-"), 401, "UNAUTHORIZED")
	e.sim.AddPartnerKey(sim.PartnerKey{KID: "late", Key: &stranger.PublicKey})
	if r := e.call(http.MethodPost, sim.PathExchangeToken, map[string]string{"token": tok}, "-"); r.status != 200 {
		t.Fatalf("added key: %d %s", r.status, r.raw)
	}
}
