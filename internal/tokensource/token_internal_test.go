package tokensource

import (
	"net/http"
	"testing"
)

// TestSetAuthHeaderSealed: the header value made once when a token is
// granted is the one a Token built field by field gets.
func TestSetAuthHeaderSealed(t *testing.T) {
	for _, tc := range []struct{ typ, want string }{
		{"", "Bearer tok"},
		{"bearer", "Bearer tok"},
		{"Bearer", "Bearer tok"},
		{"MAC", "MAC tok"},
	} {
		tok := Token{AccessToken: "tok", TokenType: tc.typ}
		for name, tk := range map[string]Token{"built": tok, "sealed": tok.sealed()} {
			r, err := http.NewRequest(http.MethodGet, "http://partner.invalid/", nil)
			if err != nil {
				t.Fatal(err)
			}
			tk.SetAuthHeader(r)
			if got := r.Header.Get("Authorization"); got != tc.want {
				t.Errorf("type %q, %s: Authorization %q, want %q", tc.typ, name, got, tc.want)
			}
		}
	}
}
