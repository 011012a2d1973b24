package tokensource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Token is one access token and what came with it. Times are on the local
// clock: Expiry is the start of the grant request plus expires_in, so it
// errs early by the request's latency, never late.
type Token struct {
	AccessToken   string
	TokenType     string // "Bearer"
	IssuedAt      time.Time
	Expiry        time.Time
	RefreshToken  string    // "" when the grant gave none
	RefreshExpiry time.Time // zero when unknown
	Scope         string
	SessionState  string

	// authorization is the Authorization header's value, made once when
	// the token is granted (sealed) rather than on every request: a
	// partner's token is long, and building the value per call was 5% of
	// the bytes the bridge allocated per record (loyalty-bench, 2026-11-28).
	// Empty for a Token built field by field; SetAuthHeader then builds it.
	authorization string
}

// Valid reports whether the token has a value and has not expired at now.
func (t Token) Valid(now time.Time) bool {
	return t.AccessToken != "" && now.Before(t.Expiry)
}

// Lifetime is Expiry − IssuedAt.
func (t Token) Lifetime() time.Duration { return t.Expiry.Sub(t.IssuedAt) }

// SetAuthHeader sets `Authorization: Bearer <token>` on r.
func (t Token) SetAuthHeader(r *http.Request) {
	v := t.authorization
	if v == "" {
		v = t.header()
	}
	r.Header.Set("Authorization", v)
}

// header is the Authorization header's value.
func (t Token) header() string {
	typ := t.TokenType
	if typ == "" || typ == "bearer" {
		typ = "Bearer"
	}
	return typ + " " + t.AccessToken
}

// sealed is t with its Authorization header's value made: call it once
// its fields are final.
func (t Token) sealed() Token {
	t.authorization = t.header()
	return t
}

// String describes the token without its value.
func (t Token) String() string {
	if t.AccessToken == "" {
		return "token(none)"
	}
	return fmt.Sprintf("token(%s, expires %s)", t.TokenType, t.Expiry.UTC().Format(time.RFC3339))
}

// Format makes every fmt verb (%v, %+v, %#v, %s, %q) print String, so a
// Token passed to a formatter or logger by mistake leaks nothing.
func (t Token) Format(f fmt.State, _ rune) { _, _ = fmt.Fprint(f, t.String()) }

// Source hands out access tokens.
type Source interface {
	// Token returns a token valid now. It may block for a grant call; it
	// returns early with ctx's error when ctx ends.
	Token(ctx context.Context) (Token, error)
	// Invalidate tells the source that the service rejected stale (HTTP
	// 401). Sources that cache drop it if it is still their current token.
	Invalidate(stale Token)
}

// Error is a failed grant. It never carries a credential or token.
type Error struct {
	Grant       string // "password", "refresh_token" or "exchange"
	Status      int    // HTTP status; 0 when no answer came
	Code        string // OAuth2 "error" (e.g. invalid_grant) or the API's error code
	Description string // the identity provider's error_description, if any
	Err         error  // cause: transport error or decode error
}

func (e *Error) Error() string {
	msg := "tokensource: " + e.Grant + " grant failed"
	if e.Status != 0 {
		msg += fmt.Sprintf(": HTTP %d", e.Status)
	}
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.Description != "" {
		msg += " (" + e.Description + ")"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Transient reports whether trying again later may succeed: no answer,
// timeouts, 408, 429 and 5xx. A 400/401 (bad credentials, unknown client,
// expired refresh token) is not transient.
func (e *Error) Transient() bool {
	switch {
	case e.Status == 0:
		return !errors.Is(e.Err, errDecode) && !errors.Is(e.Err, errSecrets) && !errors.Is(e.Err, context.Canceled)
	case e.Status == http.StatusRequestTimeout, e.Status == http.StatusTooManyRequests, e.Status >= 500:
		return true
	}
	return false
}

// IsTransient reports whether err is a transient grant failure (see
// Error.Transient).
func IsTransient(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Transient()
}

var errDecode = errors.New("malformed token response")

// errSecrets marks a failure of PasswordOptions.Secrets: not transient, an
// operator must fix the secret.
var errSecrets = errors.New("reading the credentials")

// cleanTransportErr strips the *url.Error wrapper, whose text repeats the
// request URL, keeping the cause.
func cleanTransportErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
