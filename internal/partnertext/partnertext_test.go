package partnertext_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnertext"
)

const (
	jwt    = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJicmlkZ2UifQ.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"
	secret = "s3cr3t-V4lue"
)

func TestText(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", "Bad Request", "Bad Request"},
		{"diacritics kept", "Tài khoản đã được liên kết", "Tài khoản đã được liên kết"},
		{"bearer jwt", "invalid header Authorization: Bearer " + jwt + " for call", "invalid header Authorization: [redacted] for call"},
		{"bearer alone", "echo: Bearer " + jwt, "echo: Bearer [redacted]"},
		{"bearer opaque", "got bearer abc.DEF-123~x now", "got Bearer [redacted] now"},
		{"bare jwt", "token " + jwt + " expired", "token [redacted] expired"},
		{"jwt header only", "kid from eyJhbGciOiJFUzI1NiJ9 unknown", "kid from [redacted] unknown"},
		{"basic credential", "Basic dXNlcjpwYXNzd29yZA== refused", "Basic [redacted] refused"},
		{"basic prose", "Basic information missing", "Basic information missing"},
		{"query access_token", "see https://p.example/r?a=1&access_token=" + secret + "&b=2", "see https://p.example/r?a=1&access_token=[redacted]&b=2"},
		{"refresh_token kv", "refresh_token=" + secret + ", id_token=" + secret, "refresh_token=[redacted], id_token=[redacted]"},
		{"json", `{"client_secret":"` + secret + `","password": "two words","sign":"` + secret + `"}`,
			`{"client_secret":[redacted],"password": [redacted],"sign":[redacted]}`},
		{"escaped json", `body "{\"password\":\"` + secret + `\"}"`, `body "{\"password\":[redacted]}"`},
		{"bearer twice", "BeArer Bearer " + secret + " end", "Bearer [redacted] end"},
		{"basic twice", "Basic basic dXNlcjpwYXNzd29yZA== refused", "Basic [redacted] refused"},
		{"key, bearer twice", "token=bearer Bearer " + secret + " end", "token=[redacted] end"},
		{"bearer before userinfo", "BeArer https://user:" + secret + "@host/ end", "Bearer [redacted]://[redacted]@host/ end"},
		{"value is a key", `token= "id_token":"` + secret + `" end`, `token= [redacted] end`},
		{"chain of keys", `sign=x&password='token':` + secret + ` end`, `sign=[redacted]&password=[redacted] end`},
		{"colon form", "password: " + secret + " rejected", "password: [redacted] rejected"},
		{"design is not sign", "design=blue", "design=blue"},
		{"userinfo", "at https://bridge:" + secret + "@p.example/x", "at https://[redacted]@p.example/x"},
		{"controls", "line1\nINFO forged\x1b[31m\u202eevil\x00", "line1 INFO forged[31mevil"},
		{"control inside keyword", "Bear\x00er " + secret, "Bearer [redacted]"},
		{"invalid utf-8", "ok\xff\xfe", "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (partnertext.Scrubber{}).Text(tc.in); got != tc.want {
				t.Errorf("Text(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestCaps(t *testing.T) {
	long := strings.Repeat("ễ", 200) // 3 bytes a rune
	for _, tc := range []struct {
		name string
		fn   func(string) string
		max  int
	}{
		{"Text", partnertext.Scrubber{}.Text, partnertext.MaxText},
		{"Code", partnertext.Scrubber{}.Code, partnertext.MaxCode},
		{"ID", partnertext.Scrubber{}.ID, partnertext.MaxID},
		{"URL", partnertext.Scrubber{}.URL, partnertext.MaxText},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, in := range []string{long, "https://p.example/" + long, strings.Repeat("x", 1000)} {
				got := tc.fn(in)
				if len(got) > tc.max || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
					t.Errorf("%d bytes, valid %t: %q", len(got), utf8.ValidString(got), got)
				}
			}
			if got := tc.fn("MEMBER_IS_LINKED"); got != "MEMBER_IS_LINKED" && tc.name != "URL" {
				t.Errorf("short text changed: %q", got)
			}
		})
	}
	// Detail is the bridge's own text: scrubbed, not capped.
	d := strings.Repeat("y", 1000) + " Bearer " + jwt
	if got := (partnertext.Scrubber{}).Detail(d); got != strings.Repeat("y", 1000)+" Bearer [redacted]" {
		t.Errorf("Detail: %q", got)
	}
}

func TestURL(t *testing.T) {
	base := "https://partner.example/onboarding/result"
	for _, tc := range []struct {
		name string
		keep []string
		in   string
		want string
	}{
		{"query dropped by default", nil, base + "?errorCode=INVALID_PHONE&access_token=" + secret, base},
		{"kept parameter", []string{"errorCode"}, base + "?errorCode=INVALID_PHONE&access_token=" + secret + "&field=phone", base + "?errorCode=INVALID_PHONE"},
		{"kept parameter's value scrubbed", []string{"errorCode"}, base + "?errorCode=Bearer%20" + secret, base + "?errorCode=Bearer [redacted]"},
		{"userinfo and fragment", nil, "https://u:" + secret + "@partner.example/r#access_token=" + secret, "https://partner.example/r"},
		{"token in path", nil, base + "/" + jwt, base + "/[redacted]"},
		{"not a URL", nil, "/relative/path?access_token=" + secret, "/relative/path"},
		{"unparsable", nil, "http://[::1%zz]/x?sign=" + secret, "http://[::1%zz]/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (partnertext.Scrubber{KeepParams: tc.keep}).URL(tc.in); got != tc.want {
				t.Errorf("URL(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

// Personal runs before the cap: a phone at the end of a long text is
// replaced, not cut in half.
func TestPersonalBeforeCap(t *testing.T) {
	c := partnertext.Scrubber{Personal: func(s string) string { return strings.ReplaceAll(s, "0912345678", "[redacted]") }}
	in := strings.Repeat("a", partnertext.MaxText-8) + "0912345678"
	if got := c.Text(in); strings.Contains(got, "09123") {
		t.Errorf("got %q", got)
	}
	if got := c.ID("0912345678"); got != "0912345678" {
		t.Errorf("ID ran the personal pass: %q", got)
	}
}
