package sim

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"go.uber.org/zap"
)

// Token types, in the `typ` claim as Keycloak writes them.
const (
	typAccess  = "Bearer"
	typRefresh = "Refresh"
	scope      = "openid profile email"
)

// tokenStore remembers every live token it issued. A token is valid when
// it is in the store (so it was issued here and not revoked) and its exp is
// ahead of the clock: the JWT signature need not be re-verified per call.
type tokenStore struct {
	mu         sync.Mutex
	live       map[string]tokenInfo // keyed by the whole JWT
	accessTTL  time.Duration
	refreshTTL time.Duration
	sweepAt    int // sweep expired entries when live grows past this
}

type tokenInfo struct {
	typ     string
	exp     time.Time
	session string
	subject string
}

func (ts *tokenStore) init(access, refresh time.Duration) {
	ts.live = map[string]tokenInfo{}
	ts.accessTTL, ts.refreshTTL = access, refresh
	ts.sweepAt = 1024
}

func (ts *tokenStore) lookup(token string) (tokenInfo, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ti, ok := ts.live[token]
	return ti, ok
}

// SetTokenTTLs changes the lifetimes of tokens issued from now on; a value
// ≤ 0 leaves that lifetime unchanged. Tokens already issued keep theirs.
func (s *Server) SetTokenTTLs(access, refresh time.Duration) {
	s.tokens.mu.Lock()
	if access > 0 {
		s.tokens.accessTTL = access
	}
	if refresh > 0 {
		s.tokens.refreshTTL = refresh
	}
	a, r := s.tokens.accessTTL, s.tokens.refreshTTL
	s.tokens.mu.Unlock()
	s.log.Info("token lifetimes set", zap.Duration("access", a), zap.Duration("refresh", r))
}

// TokenTTLs returns the lifetimes of newly issued access and refresh
// tokens.
func (s *Server) TokenTTLs() (access, refresh time.Duration) {
	s.tokens.mu.Lock()
	defer s.tokens.mu.Unlock()
	return s.tokens.accessTTL, s.tokens.refreshTTL
}

// RevokeTokens invalidates every access and refresh token issued so far:
// business calls with them answer 401, refresh grants invalid_grant.
func (s *Server) RevokeTokens() {
	n := s.tokens.revokeAll()
	s.log.Info("tokens revoked", zap.Int("count", n))
}

// revokeAll forgets every token and says how many there were.
func (ts *tokenStore) revokeAll() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := len(ts.live)
	clear(ts.live)
	return n
}

// CredentialRotation is a change of the partner's secrets at run time
// (RotateCredentials, POST /__sim/credentials). An empty field leaves that
// secret as it is.
type CredentialRotation struct {
	// ClientSecret is the new client_secret.
	ClientSecret string `json:"clientSecret,omitempty"`
	// Password is the new password of the password-grant user.
	Password string `json:"password,omitempty"`
	// RevokeTokens also forgets every token issued so far, as RevokeTokens
	// does. Without it they stay valid until they expire, as at a real
	// identity provider after a rotation; refresh grants then need the
	// current client secret.
	RevokeTokens bool `json:"revokeTokens,omitempty"`
}

// RotateCredentials replaces the client secret and/or password (the
// client_id and username stay). Once it returns, a token request with a
// replaced secret is refused as Keycloak refuses it: 401 invalid_client for
// the client secret, 401 invalid_grant for the password. A grant running
// meanwhile is checked against either the old or the new secrets, and
// with RevokeTokens no token issued for the old ones stays valid.
func (s *Server) RotateCredentials(r CredentialRotation) {
	s.credMu.Lock()
	if r.ClientSecret != "" {
		s.clientSecret = r.ClientSecret
	}
	if r.Password != "" {
		s.password = r.Password
	}
	revoked := 0
	if r.RevokeTokens {
		revoked = s.tokens.revokeAll()
	}
	s.credMu.Unlock()
	s.log.Info("credentials rotated", zap.Bool("clientSecretChanged", r.ClientSecret != ""),
		zap.Bool("passwordChanged", r.Password != ""), zap.Bool("tokensRevoked", r.RevokeTokens), zap.Int("revokedCount", revoked))
}

type simClaims struct {
	jwt.RegisteredClaims
	Typ          string `json:"typ"`
	Azp          string `json:"azp"`
	SessionState string `json:"session_state"`
	Scope        string `json:"scope"`
}

// tokenPair is both tokens of a grant.
type tokenPair struct {
	access, refresh         string
	accessTTL, refreshTTL   time.Duration
	session                 string
	accessInfo, refreshInfo tokenInfo
}

// issue mints and stores an access and a refresh token for subject in
// session (a new session when empty).
func (s *Server) issue(r *http.Request, subject, session string) (tokenPair, error) {
	if session == "" {
		session = uuid.NewString()
	}
	accessTTL, refreshTTL := s.TokenTTLs()
	now := s.now()
	iss := "http://" + r.Host + "/realms/loyalty-partner"
	if r.TLS != nil {
		iss = "https://" + r.Host + "/realms/loyalty-partner"
	}
	mint := func(typ string, ttl time.Duration) (string, error) {
		c := simClaims{
			RegisteredClaims: jwt.RegisteredClaims{
				Issuer: iss, Subject: subject, ID: uuid.NewString(),
				IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
			},
			Typ: typ, Azp: s.opts.ClientID, SessionState: session, Scope: scope,
		}
		t := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
		t.Header["kid"] = s.kid
		return t.SignedString(s.signKey)
	}
	p := tokenPair{accessTTL: accessTTL, refreshTTL: refreshTTL, session: session}
	var err error
	if p.access, err = mint(typAccess, accessTTL); err != nil {
		return p, err
	}
	if p.refresh, err = mint(typRefresh, refreshTTL); err != nil {
		return p, err
	}
	// exp is stored as the JWT carries it (whole seconds), so the store and
	// a client decoding the token agree on the instant.
	p.accessInfo = tokenInfo{typ: typAccess, exp: jwt.NewNumericDate(now.Add(accessTTL)).Time, session: session, subject: subject}
	p.refreshInfo = tokenInfo{typ: typRefresh, exp: jwt.NewNumericDate(now.Add(refreshTTL)).Time, session: session, subject: subject}

	ts := &s.tokens
	ts.mu.Lock()
	if len(ts.live) >= ts.sweepAt {
		for k, ti := range ts.live {
			if !ti.exp.After(now) {
				delete(ts.live, k)
			}
		}
		ts.sweepAt = max(1024, 2*len(ts.live))
	}
	ts.live[p.access] = p.accessInfo
	ts.live[p.refresh] = p.refreshInfo
	ts.mu.Unlock()

	s.countMu.Lock()
	s.issued++
	s.countMu.Unlock()
	return p, nil
}

// authorize checks the bearer token of a business call; the zero reply
// means authorised.
func (s *Server) authorize(r *http.Request) reply {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return unauthorized("missing bearer token")
	}
	ti, ok := s.tokens.lookup(strings.TrimSpace(h[len(prefix):]))
	switch {
	case !ok:
		return unauthorized("invalid or revoked token")
	case ti.typ != typAccess:
		return unauthorized("not an access token")
	case !ti.exp.After(s.now()):
		return unauthorized("token expired")
	}
	return reply{}
}

func unauthorized(msg string) reply {
	return bizError(http.StatusUnauthorized, CodeUnauthorized, msg)
}

// Identity provider (Keycloak-compatible token endpoint).

type oauthError struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

func oauthFail(status int, code, desc string) reply {
	return reply{status: status, body: oauthError{code, desc}}
}

type tokenResponse struct {
	AccessToken      string `json:"access_token"`
	ExpiresIn        int64  `json:"expires_in"`
	RefreshExpiresIn int64  `json:"refresh_expires_in"`
	RefreshToken     string `json:"refresh_token"`
	TokenType        string `json:"token_type"`
	SessionState     string `json:"session_state"`
	Scope            string `json:"scope"`
}

func equalSecret(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func (s *Server) handleToken(c *call) reply {
	mt, _, err := mime.ParseMediaType(c.r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return oauthFail(http.StatusBadRequest, "invalid_request", "Content-Type must be application/x-www-form-urlencoded")
	}
	c.r.Body = http.MaxBytesReader(c.w, c.r.Body, MaxBodyBytes)
	if err := c.r.ParseForm(); err != nil {
		return oauthFail(http.StatusBadRequest, "invalid_request", "malformed form body")
	}
	f := c.r.PostForm
	grant := f.Get("grant_type")
	if grant == "" {
		return oauthFail(http.StatusBadRequest, "invalid_request", "Missing form parameter: grant_type")
	}
	s.credMu.RLock()
	defer s.credMu.RUnlock()
	if f.Get("client_id") != s.opts.ClientID || !equalSecret(f.Get("client_secret"), s.clientSecret) {
		return oauthFail(http.StatusUnauthorized, "invalid_client", "Invalid client or Invalid client credentials")
	}
	var p tokenPair
	switch grant {
	case "password":
		if f.Get("username") != s.opts.Username || !equalSecret(f.Get("password"), s.password) {
			return oauthFail(http.StatusUnauthorized, "invalid_grant", "Invalid user credentials")
		}
		if p, err = s.issue(c.r, s.opts.Username, ""); err != nil {
			return oauthFail(http.StatusInternalServerError, "server_error", "could not sign the token")
		}
	case "refresh_token":
		rt := f.Get("refresh_token")
		if rt == "" {
			return oauthFail(http.StatusBadRequest, "invalid_request", "Missing parameter: refresh_token")
		}
		ti, ok := s.tokens.lookup(rt)
		switch {
		case !ok:
			return oauthFail(http.StatusBadRequest, "invalid_grant", "Invalid refresh token")
		case ti.typ != typRefresh:
			return oauthFail(http.StatusBadRequest, "invalid_grant", "Invalid refresh token")
		case !ti.exp.After(s.now()):
			return oauthFail(http.StatusBadRequest, "invalid_grant", "Token is not active")
		}
		if p, err = s.issue(c.r, ti.subject, ti.session); err != nil {
			return oauthFail(http.StatusInternalServerError, "server_error", "could not sign the token")
		}
	default:
		return oauthFail(http.StatusBadRequest, "unsupported_grant_type", "Unsupported grant_type")
	}
	s.log.Debug("token issued", zap.String("grant", grant))
	return reply{status: http.StatusOK, body: tokenResponse{
		AccessToken: p.access, ExpiresIn: s.lifetime(p.accessTTL), RefreshExpiresIn: s.lifetime(p.refreshTTL),
		RefreshToken: p.refresh, TokenType: "Bearer", SessionState: p.session, Scope: scope,
	}}
}

// lifetime is a token's expires_in or refresh_expires_in, in the unit
// of the profile (partnerprofile.Profile.TokenLifetimeUnit).
func (s *Server) lifetime(d time.Duration) int64 {
	return int64(d / s.opts.Profile.TokenLifetimeUnit.Duration())
}

// Exchange token.

type exchangeResponse struct {
	AccessToken      string `json:"access_token"`
	RefreshToken     string `json:"refresh_token"`
	ExpiresIn        int64  `json:"expires_in"`
	RefreshExpiresIn int64  `json:"refresh_expires_in"`
	TokenType        string `json:"token_type"`
}

func (s *Server) handleExchange(c *call) reply {
	mt, _, err := mime.ParseMediaType(c.r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return unauthorized("Content-Type must be application/json")
	}
	b, err := readBody(c)
	if err != nil {
		return unauthorized("could not read the request body")
	}
	var body struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(b, &body); err != nil || body.Token == "" {
		return unauthorized("body must be {\"token\": <partner JWT>}")
	}
	var claims partnerClaims
	if msg := s.verifyPartnerJWT(body.Token, &s.exchangeJWT, &claims, &claims); msg != "" {
		return unauthorized(msg)
	}
	if claims.ExpiresAt.After(s.now().Add(MaxPartnerTokenAhead + s.opts.ClockSkew)) {
		return unauthorized(fmt.Sprintf("partner token exp is more than %s ahead (with the %s clock skew allowed)",
			MaxPartnerTokenAhead, s.opts.ClockSkew))
	}
	if msg := s.useJTI(&s.exchangeJWT, &claims); msg != "" {
		return unauthorized(msg)
	}
	p, err := s.issue(c.r, claims.Issuer, "")
	if err != nil {
		return plainError(http.StatusInternalServerError)
	}
	s.log.Debug("token issued", zap.String("grant", "exchange"))
	return reply{status: http.StatusOK, body: exchangeResponse{
		AccessToken: p.access, RefreshToken: p.refresh, ExpiresIn: s.lifetime(p.accessTTL),
		RefreshExpiresIn: s.lifetime(p.refreshTTL), TokenType: "Bearer",
	}}
}

// partnerKeyFunc picks the registered keys a JWT may be verified with:
// those of its alg's type, and of its kid when the header has one (keys
// registered without a KID are tried when no key has that kid).
func (s *Server) partnerKeyFunc(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	s.keysMu.RLock()
	defer s.keysMu.RUnlock()
	var named, anon []jwt.VerificationKey
	for _, k := range s.partnerKeys {
		switch k.Key.(type) {
		case *rsa.PublicKey:
			if alg := t.Method.Alg(); alg != "RS256" && alg != "PS256" {
				continue
			}
		case *ecdsa.PublicKey:
			if t.Method.Alg() != "ES256" {
				continue
			}
		}
		switch {
		case kid == "" || k.KID == kid:
			named = append(named, k.Key)
		case k.KID == "":
			anon = append(anon, k.Key)
		}
	}
	if len(named) == 0 {
		named = anon
	}
	if len(named) == 0 {
		return nil, errors.New("no registered partner key for this JWT")
	}
	return jwt.VerificationKeySet{Keys: named}, nil
}

// JWKS.

type jwk struct {
	Kty string `json:"kty"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	N   string `json:"n"`
	E   string `json:"e"`
}

// jwksFor returns the key id (RFC 7638 thumbprint) and the JWKS document.
func jwksFor(pub *rsa.PublicKey) (string, []byte) {
	b64 := base64.RawURLEncoding.EncodeToString
	n, e := b64(pub.N.Bytes()), b64(big.NewInt(int64(pub.E)).Bytes())
	sum := sha256.Sum256([]byte(`{"e":"` + e + `","kty":"RSA","n":"` + n + `"}`))
	kid := b64(sum[:])
	doc, _ := json.Marshal(struct {
		Keys []jwk `json:"keys"`
	}{[]jwk{{Kty: "RSA", Use: "sig", Alg: "RS256", Kid: kid, N: n, E: e}}})
	return kid, doc
}

func (s *Server) handleCerts(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		rep := plainError(http.StatusMethodNotAllowed)
		rep.header = map[string]string{"Allow": http.MethodGet}
		writeReply(w, rep)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.jwks)
}
