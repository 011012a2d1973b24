package tokensource

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/apiendpoint"
	"github.com/loyalty-bridge/loyalty-bridge/internal/noredirect"
)

// DefaultRealm is the identity-provider realm of the partner API.
const DefaultRealm = "loyalty-partner"

// ExchangePath is the exchange-token address under {base_url}.
const ExchangePath = "/api-identity/public/v1/exchange-token"

// TokenURL is the token endpoint of realm under authURL.
func TokenURL(authURL, realm string) string {
	if realm == "" {
		realm = DefaultRealm
	}
	return strings.TrimRight(authURL, "/") + "/realms/" + url.PathEscape(realm) + "/protocol/openid-connect/token"
}

// Endpoint names of the grants' requests, told to the transport in their
// context (internal/apiendpoint) and used as metric labels.
const (
	EndpointToken    = "token"          // password and refresh_token grants
	EndpointExchange = "exchange-token" // the exchange grant
)

// MaxResponseBytes bounds how much of a token answer is read. A
// Keycloak answer with two JWTs is a few KB; a larger body is a malformed
// answer, read no further (its connection is dropped), so an identity
// provider or gateway answering megabytes costs each grant this much at
// most.
const MaxResponseBytes = 64 << 10

// maxCode bounds the OAuth2 error code kept from an answer (Error.Code).
// The codes are short words (invalid_grant); the field is the server's
// text and travels into logs and error events.
const maxCode = 64

// tokenResponse is the identity provider's answer (both token calls and
// exchange-token share the fields).
type tokenResponse struct {
	AccessToken      string  `json:"access_token"`
	ExpiresIn        float64 `json:"expires_in"`
	RefreshExpiresIn float64 `json:"refresh_expires_in"`
	RefreshToken     string  `json:"refresh_token"`
	TokenType        string  `json:"token_type"`
	SessionState     string  `json:"session_state"`
	Scope            string  `json:"scope"`
}

// errorResponse covers the identity provider's OAuth2 error body and the
// API's error envelope (exchange-token).
type errorResponse struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
	Errors           *struct {
		Code      string `json:"code"`
		ErrorCode string `json:"errorCode"`
		Message   string `json:"message"`
	} `json:"errors"`
}

type poster struct {
	client   *http.Client
	now      func() time.Time
	endpoint string        // EndpointToken or EndpointExchange
	unit     time.Duration // of expires_in; 0: a second
}

// post sends one grant request and turns the answer into a Token.
func (p poster) post(ctx context.Context, grant, target, contentType string, body []byte) (Token, error) {
	req, err := http.NewRequestWithContext(apiendpoint.With(ctx, p.endpoint), http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return Token{}, &Error{Grant: grant, Err: errors.New("bad token endpoint address")}
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	start := p.now()
	resp, err := p.client.Do(req)
	if err != nil {
		return Token{}, &Error{Grant: grant, Err: cleanTransportErr(err)}
	}
	// Closing a body not read to its end drops the connection, unread.
	defer resp.Body.Close()
	tooLarge := &Error{Grant: grant, Status: resp.StatusCode, Err: fmt.Errorf("%w: body over %d bytes", errDecode, MaxResponseBytes)}
	if resp.ContentLength > MaxResponseBytes {
		return Token{}, tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return Token{}, &Error{Grant: grant, Status: resp.StatusCode, Err: cleanTransportErr(err)}
	}
	if len(data) > MaxResponseBytes {
		return Token{}, tooLarge
	}
	if noredirect.IsRedirect(resp.StatusCode) {
		return Token{}, &Error{Grant: grant, Status: resp.StatusCode, Err: noredirect.Error(resp.StatusCode, resp.Header.Get("Location"))}
	}
	if resp.StatusCode != http.StatusOK {
		e := &Error{Grant: grant, Status: resp.StatusCode}
		var er errorResponse
		if json.Unmarshal(data, &er) == nil {
			e.Code, e.Description = sanitizeCode(er.Error), sanitizeDescription(er.ErrorDescription)
			if e.Code == "" && er.Errors != nil {
				e.Code = sanitizeCode(er.Errors.Code)
				if e.Code == "" {
					e.Code = sanitizeCode(er.Errors.ErrorCode)
				}
				// exchange-token's reason, such as which claim of the
				// partner token was refused: what an operator must fix.
				e.Description = sanitizeDescription(er.Errors.Message)
			}
		}
		return Token{}, e
	}
	var tr tokenResponse
	if err := json.Unmarshal(data, &tr); err != nil || tr.AccessToken == "" || lifetime(tr.ExpiresIn, p.unit) <= 0 {
		return Token{}, &Error{Grant: grant, Status: resp.StatusCode, Err: errDecode}
	}
	t := Token{
		AccessToken:  tr.AccessToken,
		TokenType:    tr.TokenType,
		IssuedAt:     start,
		Expiry:       start.Add(lifetime(tr.ExpiresIn, p.unit)),
		RefreshToken: tr.RefreshToken,
		Scope:        tr.Scope,
		SessionState: tr.SessionState,
	}
	if t.TokenType == "" {
		t.TokenType = "Bearer"
	}
	if tr.RefreshToken != "" && lifetime(tr.RefreshExpiresIn, p.unit) > 0 {
		t.RefreshExpiry = start.Add(lifetime(tr.RefreshExpiresIn, p.unit))
	}
	return t.sealed(), nil
}

// MaxLifetime bounds a token's lifetime as the bridge counts it. The spec
// shows neither the unit nor a range of expires_in: a number past this
// (or past what a time.Duration holds, where the conversion overflowed to
// an expiry 292 years in the past and every call asked for a new token) is
// read as this, so the token is refreshed at least that often; the
// partner's 401 refreshes it sooner if it ends first.
const MaxLifetime = 30 * 24 * time.Hour

// lifetime is expires_in, a number of units (0: seconds), as a duration,
// at most MaxLifetime; 0 for a number that is not positive or rounds to
// nothing.
func lifetime(n float64, unit time.Duration) time.Duration {
	if unit <= 0 {
		unit = time.Second
	}
	if n >= float64(MaxLifetime/unit) {
		return MaxLifetime
	}
	if !(n > 0) {
		return 0
	}
	return time.Duration(n * float64(unit))
}

// sanitizeCode keeps an error code that looks like one: at most maxCode
// letters, digits and _ . : -, not token-shaped. Anything else is the
// server's free text, and is replaced by a marker.
func sanitizeCode(s string) string {
	if s == "" {
		return ""
	}
	if len(s) > maxCode || strings.Contains(s, "eyJ") {
		return unreadableCode
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.:-", r)) {
			return unreadableCode
		}
	}
	return s
}

// unreadableCode replaces an error code that sanitizeCode refuses.
const unreadableCode = "(unreadable error code)"

// sanitizeDescription keeps the identity provider's description short and
// free of anything token-shaped.
func sanitizeDescription(s string) string {
	if strings.Contains(s, "eyJ") {
		return ""
	}
	if len(s) > 160 {
		s = s[:160]
	}
	return s
}

// PasswordOptions configures NewPassword. ClientID, Username, one of
// AuthURL or TokenURL, and either Secrets or both ClientSecret and Password
// are required.
type PasswordOptions struct {
	AuthURL string // {auth_url}; the token endpoint is derived with Realm
	Realm   string // default DefaultRealm
	// TokenURL overrides the derived token endpoint.
	TokenURL     string
	ClientID     string
	ClientSecret string
	Username     string
	Password     string
	// Secrets, when set, is called before every grant call for the current
	// client secret and password, which then replace ClientSecret and
	// Password: a secret read from a file that an operator rotates (a
	// Kubernetes Secret) takes effect at the next login, without a restart.
	// Its error fails that grant (not transient, so the token cache backs
	// off); it must not carry a secret.
	Secrets func() (clientSecret, password string, err error)
	// RefreshMargin: a refresh token with less than this left is not used
	// (default 5 s).
	RefreshMargin time.Duration
	// LifetimeUnit is the unit of the answers' expires_in and
	// refresh_expires_in (default a second; the spec does not say).
	LifetimeUnit time.Duration
	HTTPClient   *http.Client     // default http.DefaultClient
	Now          func() time.Time // default time.Now
	Logger       *zap.Logger      // default no-op
}

// Password is the password grant, with the refresh_token grant while the
// last refresh token is valid. It does not cache access tokens: wrap it in
// a Cache. Safe for concurrent use, though a Cache serialises its calls.
type Password struct {
	opts     PasswordOptions
	tokenURL string
	p        poster
	log      *zap.Logger

	mu      sync.Mutex
	refresh Token // last token with a refresh token
}

// NewPassword validates opts (every problem reported together) and returns
// the grant.
func NewPassword(opts PasswordOptions) (*Password, error) {
	var errs []error
	target := opts.TokenURL
	if target == "" && opts.AuthURL != "" {
		target = TokenURL(opts.AuthURL, opts.Realm)
	}
	if target == "" {
		errs = append(errs, errors.New("tokensource: auth URL is required"))
	} else if u, err := url.Parse(target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, errors.New("tokensource: auth URL must be an absolute http(s) URL"))
	}
	required := []struct{ v, name string }{{opts.ClientID, "client id"}, {opts.Username, "username"}}
	if opts.Secrets == nil {
		required = append(required, struct{ v, name string }{opts.ClientSecret, "client secret"},
			struct{ v, name string }{opts.Password, "password"})
	}
	for _, f := range required {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("tokensource: %s is required", f.name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.RefreshMargin == 0 {
		opts.RefreshMargin = 5 * time.Second
	}
	client, now, log := defaults(opts.HTTPClient, opts.Now, opts.Logger)
	opts.Now = now
	return &Password{opts: opts, tokenURL: target, p: poster{client: client, now: now, endpoint: EndpointToken, unit: opts.LifetimeUnit}, log: log}, nil
}

func defaults(c *http.Client, now func() time.Time, log *zap.Logger) (*http.Client, func() time.Time, *zap.Logger) {
	// Never follow a redirect: it would re-send the client secret and the
	// password to the host it names.
	c = noredirect.Client(c)
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = zap.NewNop()
	}
	return c, now, log
}

// Token refreshes with the last refresh token when it is still valid, and
// logs in otherwise or when the refresh is rejected.
func (p *Password) Token(ctx context.Context) (Token, error) {
	p.mu.Lock()
	last := p.refresh
	p.mu.Unlock()
	if last.RefreshToken != "" && (last.RefreshExpiry.IsZero() || p.opts.Now().Add(p.opts.RefreshMargin).Before(last.RefreshExpiry)) {
		t, err := p.Refresh(ctx, last.RefreshToken)
		if err == nil {
			return t, nil
		}
		if IsTransient(err) || ctx.Err() != nil {
			return Token{}, err
		}
		p.log.Info("refresh token rejected; logging in again", zap.Error(err))
	}
	return p.Login(ctx)
}

// secrets are the client secret and password for the next grant call.
func (p *Password) secrets(grant string) (clientSecret, password string, err error) {
	if p.opts.Secrets == nil {
		return p.opts.ClientSecret, p.opts.Password, nil
	}
	clientSecret, password, err = p.opts.Secrets()
	if err == nil && (clientSecret == "" || password == "") {
		err = errors.New("client secret or password is empty")
	}
	if err != nil {
		return "", "", &Error{Grant: grant, Err: fmt.Errorf("%w: %w", errSecrets, err)}
	}
	return clientSecret, password, nil
}

// Login is the Retrieve Access Token call (grant_type=password).
func (p *Password) Login(ctx context.Context) (Token, error) {
	secret, password, err := p.secrets("password")
	if err != nil {
		return Token{}, err
	}
	form := url.Values{
		"grant_type":    {"password"},
		"client_id":     {p.opts.ClientID},
		"client_secret": {secret},
		"username":      {p.opts.Username},
		"password":      {password},
	}
	return p.remember(p.p.post(ctx, "password", p.tokenURL, "application/x-www-form-urlencoded", []byte(form.Encode())))
}

// Refresh is the Refresh Token call (grant_type=refresh_token).
func (p *Password) Refresh(ctx context.Context, refreshToken string) (Token, error) {
	secret, _, err := p.secrets("refresh_token")
	if err != nil {
		return Token{}, err
	}
	form := url.Values{
		"grant_type":    {"refresh_token"},
		"client_id":     {p.opts.ClientID},
		"client_secret": {secret},
		"refresh_token": {refreshToken},
	}
	t, err := p.p.post(ctx, "refresh_token", p.tokenURL, "application/x-www-form-urlencoded", []byte(form.Encode()))
	if err != nil {
		var e *Error
		if errors.As(err, &e) && !e.Transient() {
			p.mu.Lock()
			if p.refresh.RefreshToken == refreshToken {
				p.refresh = Token{}
			}
			p.mu.Unlock()
		}
		return Token{}, err
	}
	return p.remember(t, nil)
}

func (p *Password) remember(t Token, err error) (Token, error) {
	if err == nil && t.RefreshToken != "" {
		p.mu.Lock()
		p.refresh = t
		p.mu.Unlock()
	}
	return t, err
}

// Invalidate is a no-op: the refresh token stays usable after an access
// token is rejected; if the session was revoked the refresh fails and
// Token logs in again.
func (p *Password) Invalidate(Token) {}

// PartnerTokenSigner mints partner JWTs (a *signing.Signer does).
type PartnerTokenSigner interface {
	PartnerToken() (string, error)
}

// ExchangeOptions configures NewExchange. BaseURL and Signer are required.
type ExchangeOptions struct {
	BaseURL    string // {base_url}
	Signer     PartnerTokenSigner
	HTTPClient *http.Client
	Now        func() time.Time
	// LifetimeUnit is the unit of the answer's expires_in (default a
	// second; the spec does not say).
	LifetimeUnit time.Duration
}

// Exchange is the exchange-token grant. It does not cache: wrap it in a
// Cache.
type Exchange struct {
	target string
	signer PartnerTokenSigner
	p      poster
}

// NewExchange validates opts and returns the grant.
func NewExchange(opts ExchangeOptions) (*Exchange, error) {
	var errs []error
	if u, err := url.Parse(opts.BaseURL); opts.BaseURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, errors.New("tokensource: base URL must be an absolute http(s) URL"))
	}
	if opts.Signer == nil {
		errs = append(errs, errors.New("tokensource: exchange grant needs a partner key signer"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	client, now, _ := defaults(opts.HTTPClient, opts.Now, nil)
	return &Exchange{target: strings.TrimRight(opts.BaseURL, "/") + ExchangePath, signer: opts.Signer,
		p: poster{client: client, now: now, endpoint: EndpointExchange, unit: opts.LifetimeUnit}}, nil
}

// Token mints a partner token and exchanges it.
func (x *Exchange) Token(ctx context.Context) (Token, error) {
	pt, err := x.signer.PartnerToken()
	if err != nil {
		return Token{}, &Error{Grant: "exchange", Err: err}
	}
	return x.Exchange(ctx, pt)
}

// Exchange is the Exchange Token call with a given partner token.
func (x *Exchange) Exchange(ctx context.Context, partnerToken string) (Token, error) {
	body, _ := json.Marshal(struct {
		Token string `json:"token"`
	}{partnerToken})
	return x.p.post(ctx, "exchange", x.target, "application/json", body)
}

// Invalidate is a no-op: every exchange is fresh.
func (x *Exchange) Invalidate(Token) {}
