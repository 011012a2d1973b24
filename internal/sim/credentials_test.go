package sim_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

func grantForm(secret, password string) url.Values {
	return url.Values{"grant_type": {"password"}, "client_id": {sim.DefaultClientID}, "client_secret": {secret},
		"username": {sim.DefaultUsername}, "password": {password}}
}

func refreshForm(secret, refresh string) url.Values {
	return url.Values{"grant_type": {"refresh_token"}, "client_id": {sim.DefaultClientID}, "client_secret": {secret},
		"refresh_token": {refresh}}
}

func wantOAuthError(t *testing.T, r resp, status int, code string) {
	t.Helper()
	if r.status != status || r.body["error"] != code {
		t.Fatalf("%d %s, want %d %s", r.status, r.raw, status, code)
	}
}

// POST /__sim/credentials: the replaced secrets are refused by the token
// endpoint at once, the new ones accepted; tokens issued before stay valid
// unless revokeTokens asks otherwise.
func TestAdminRotateCredentials(t *testing.T) {
	e := newEnv(t, nil)
	const tok = "admin-secret"
	before := e.login().body
	access, refresh := before["access_token"].(string), before["refresh_token"].(string)

	r := e.admin(http.MethodPost, "credentials", tok, `{"clientSecret":"secret-2","password":"password-2"}`)
	if r.status != 200 || r.body["clientSecretRotated"] != true || r.body["passwordRotated"] != true || r.body["tokensRevoked"] != false {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	if strings.Contains(r.raw, "secret-2") || strings.Contains(r.raw, "password-2") {
		t.Fatalf("answer echoes a secret: %s", r.raw)
	}
	wantOAuthError(t, e.form(sim.PathToken, passwordForm()), 401, "invalid_client")
	wantOAuthError(t, e.form(sim.PathToken, grantForm("secret-2", sim.DefaultPassword)), 401, "invalid_grant")
	wantOAuthError(t, e.form(sim.PathToken, refreshForm(sim.DefaultClientSecret, refresh)), 401, "invalid_client")
	if r := e.form(sim.PathToken, grantForm("secret-2", "password-2")); r.status != 200 {
		t.Fatalf("new credentials: %d %s", r.status, r.raw)
	}
	// Issued before: still valid.
	successData(t, e.call(http.MethodGet, sim.PathCustomerInfo+sim.MemberID(1), nil, access), "object")
	if r := e.form(sim.PathToken, refreshForm("secret-2", refresh)); r.status != 200 {
		t.Fatalf("refresh with the new secret: %d %s", r.status, r.raw)
	}

	// Only the password, and revoke: a fresh token is refused at once.
	fresh := e.form(sim.PathToken, grantForm("secret-2", "password-2")).body
	r = e.admin(http.MethodPost, "credentials", tok, `{"password":"password-3","revokeTokens":true}`)
	if r.status != 200 || r.body["clientSecretRotated"] != false || r.body["passwordRotated"] != true || r.body["tokensRevoked"] != true {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	for _, a := range []string{access, fresh["access_token"].(string)} {
		wantError(t, e.call(http.MethodGet, sim.PathCustomerInfo+sim.MemberID(1), nil, a), 401, sim.CodeUnauthorized)
	}
	wantOAuthError(t, e.form(sim.PathToken, refreshForm("secret-2", fresh["refresh_token"].(string))), 400, "invalid_grant")
	wantOAuthError(t, e.form(sim.PathToken, grantForm("secret-2", "password-2")), 401, "invalid_grant")
	now := e.form(sim.PathToken, grantForm("secret-2", "password-3"))
	if now.status != 200 {
		t.Fatalf("%d %s", now.status, now.raw)
	}
	successData(t, e.call(http.MethodGet, sim.PathCustomerInfo+sim.MemberID(1), nil, now.body["access_token"].(string)), "object")

	for _, bad := range []string{`{}`, `{"clientSecret":1}`, `{"secret":"x"}`, `[`, ``} {
		wantError(t, e.admin(http.MethodPost, "credentials", tok, bad), 400, sim.CodeInvalidRequest)
	}
	if r := e.admin(http.MethodGet, "credentials", tok, ""); r.status != 405 {
		t.Fatalf("GET: %d", r.status)
	}
}

// Without the admin secret nothing changes.
func TestAdminRotateCredentialsRefused(t *testing.T) {
	e := newEnv(t, nil)
	access := e.bearer()
	for _, tok := range []string{"", "wrong", "admin"} {
		wantError(t, e.admin(http.MethodPost, "credentials", tok, `{"password":"p2","revokeTokens":true}`), 401, sim.CodeUnauthorized)
	}
	off := newEnv(t, func(o *sim.Options) { o.AdminToken = "" })
	if r := off.admin(http.MethodPost, "credentials", "anything", `{"password":"p2"}`); r.status != 404 {
		t.Fatalf("admin off: %d", r.status)
	}
	e.login()
	off.login()
	successData(t, e.call(http.MethodGet, sim.PathCustomerInfo+sim.MemberID(1), nil, access), "object")
}

// RotateCredentials with RevokeTokens is atomic with the grants running
// meanwhile: every token a grant got with the old password is refused
// afterwards, wherever the grant was when the rotation happened.
func TestRotateCredentialsDuringGrants(t *testing.T) {
	e := newEnv(t, nil)
	var (
		mu     sync.Mutex
		tokens []string
		errs   []error
		wg     sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			c := &http.Client{Transport: &http.Transport{}}
			defer c.CloseIdleConnections()
			for {
				res, err := c.PostForm(e.srv.URL+sim.PathToken, passwordForm())
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				var body struct {
					AccessToken string `json:"access_token"`
				}
				err = json.NewDecoder(res.Body).Decode(&body)
				res.Body.Close()
				if res.StatusCode != 200 || err != nil {
					return // refused: the rotation happened
				}
				mu.Lock()
				tokens = append(tokens, body.AccessToken)
				mu.Unlock()
			}
		})
	}
	waitFor(t, func() bool { return e.sim.TokensIssued() >= 8 })
	e.sim.RotateCredentials(sim.CredentialRotation{Password: "password-2", RevokeTokens: true})
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, a := range tokens {
		wantError(t, e.call(http.MethodGet, sim.PathCustomerInfo+sim.MemberID(1), nil, a), 401, sim.CodeUnauthorized)
	}
	wantOAuthError(t, e.form(sim.PathToken, passwordForm()), 401, "invalid_grant")
	if r := e.form(sim.PathToken, grantForm(sim.DefaultClientSecret, "password-2")); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	// A rotation of nothing changes nothing.
	e.sim.RotateCredentials(sim.CredentialRotation{})
	if r := e.form(sim.PathToken, grantForm(sim.DefaultClientSecret, "password-2")); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
}
