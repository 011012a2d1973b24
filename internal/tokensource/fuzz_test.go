package tokensource

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// answerTransport answers every request with one status and body: the
// identity provider's side of a grant, as bytes the fuzzer chooses.
type answerTransport struct {
	status int
	body   []byte
}

func (a answerTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: a.status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(a.body)), ContentLength: int64(len(a.body))}, nil
}

// FuzzTokenAnswer feeds the grant's answer reader whatever an identity
// provider (or a gateway in front of it) might send. Whatever comes, a
// grant either fails with a typed Error whose text holds no token-shaped
// or oversized server text, or returns a token that is usable: a non-empty
// access token that expires after it was issued, never in the past and
// never by an overflowed duration.
func FuzzTokenAnswer(f *testing.F) {
	for _, s := range []struct {
		status int
		body   string
	}{
		{200, `{"access_token":"eyJhbGciOi.x.y","expires_in":300,"refresh_expires_in":1800,"refresh_token":"r","token_type":"Bearer"}`},
		{200, `{"access_token":"a","expires_in":1e300}`},
		{200, `{"access_token":"a","expires_in":9.3e9,"refresh_token":"r","refresh_expires_in":1e19}`},
		{200, `{"access_token":"a","expires_in":0.0000000001}`},
		{200, `{"access_token":"","expires_in":300}`},
		{200, `{"access_token":"a","expires_in":-1}`},
		{200, `[]`},
		{401, `{"error":"invalid_grant","error_description":"Invalid user credentials"}`},
		{400, `{"errors":{"code":"INVALID_CLAIM","message":"eyJhbGciOi.secret"}}`},
		{500, `<html>oops</html>`},
		{302, ``},
	} {
		f.Add(s.status, []byte(s.body))
	}
	issued := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 999 {
			t.Skip() // not an HTTP status: the transport refuses it first
		}
		p := poster{client: &http.Client{Transport: answerTransport{status, body}}, now: func() time.Time { return issued },
			endpoint: EndpointToken}
		tok, err := p.post(context.Background(), "password", "http://idp.test/token", "application/x-www-form-urlencoded", nil)
		if err != nil {
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("error %T, want *Error: %v", err, err)
			}
			msg := err.Error()
			if strings.Contains(msg, "eyJ") {
				t.Fatalf("error text carries a token-shaped value: %q", msg)
			}
			if len(ge.Code) > maxCode && ge.Code != unreadableCode {
				t.Fatalf("error code of %d bytes kept", len(ge.Code))
			}
			if len(ge.Description) > 160 {
				t.Fatalf("description of %d bytes kept", len(ge.Description))
			}
			return
		}
		if status != http.StatusOK {
			t.Fatalf("HTTP %d answered with a token", status)
		}
		if tok.AccessToken == "" {
			t.Fatal("empty access token accepted")
		}
		if !tok.IssuedAt.Equal(issued) || !tok.Expiry.After(issued) {
			t.Fatalf("token issued %s expires %s: not after its issue", tok.IssuedAt, tok.Expiry)
		}
		if tok.Lifetime() > MaxLifetime {
			t.Fatalf("lifetime %s over MaxLifetime", tok.Lifetime())
		}
		if !tok.RefreshExpiry.IsZero() && (!tok.RefreshExpiry.After(issued) || tok.RefreshExpiry.Sub(issued) > MaxLifetime) {
			t.Fatalf("refresh token expires %s (issued %s)", tok.RefreshExpiry, issued)
		}
	})
}
