package partnertext_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnertext"
)

// fuzzToken is the secret FuzzScrub plants: whatever surrounds it, in a
// secret's position, it never comes out.
const fuzzToken = "Zq8xTokenValue7"

// FuzzScrub: no input makes a Scrubber panic; Text, Code and URL are never
// longer than their caps, valid UTF-8, and free of control characters; and
// the planted token, put after each secret prefix the package knows, never
// survives. The seed corpus is in testdata/fuzz/FuzzScrub.
func FuzzScrub(f *testing.F) {
	for _, s := range []string{"", "Bad Request", "Bearer x", "a\x00b\nc", strings.Repeat("ễ", 100), "https://u:p@h/p?q=1#f"} {
		f.Add(s, s)
	}
	prefixes := []string{"Bearer ", "bearer\t", "Authorization: Bearer ", "access_token=", "?refresh_token=", `"id_token":"`,
		`\"client_secret\":\"`, "password: ", "sign=", "&sign=", "eyJhbGciOiJub25lIn0.", "https://user:", "ftp://"}
	c := partnertext.Scrubber{KeepParams: []string{"errorCode"}}
	f.Fuzz(func(t *testing.T, before, after string) {
		for _, fn := range []struct {
			name string
			f    func(string) string
			max  int
		}{{"Text", c.Text, partnertext.MaxText}, {"Code", c.Code, partnertext.MaxCode}, {"URL", c.URL, partnertext.MaxText}} {
			got := fn.f(before + after)
			if len(got) > fn.max || !utf8.ValidString(got) || strings.ContainsFunc(got, unicode.IsControl) {
				t.Fatalf("%s(%q) = %q: %d bytes (cap %d), or not clean", fn.name, before+after, got, len(got), fn.max)
			}
		}
		// The token is planted whole, after a separator: the text around
		// it may not glue itself to the token and change its shape.
		for _, p := range prefixes {
			in := before + " " + p + fuzzToken + "@host/ " + after
			if strings.Contains(before+after, fuzzToken) {
				return
			}
			for _, fn := range []func(string) string{c.Text, c.Detail} {
				if got := fn(in); strings.Contains(got, fuzzToken) {
					t.Fatalf("%q kept the token: %q", in, got)
				}
			}
		}
	})
}
