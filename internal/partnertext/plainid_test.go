package partnertext

import (
	"strings"
	"testing"
)

// FuzzPlainID holds ID's fast path to the full scrub: an ID plainID
// passes through must be one scrub returns unchanged.
func FuzzPlainID(f *testing.F) {
	for _, s := range []string{"", "BIT-20261128-0001", "9f0c4b1e-2a7d-4c1b-9e55-0d1c2b3a4f5e", "2026-11-28T10:15:00.123+07:00",
		"eyJhbGciOiJub25lIn0", "xeyJ123456", "token", "sign-abc", "API_KEY", strings.Repeat("a", MaxID), strings.Repeat("1", MaxID+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if plainID(s) {
			if got := (Scrubber{}).scrub(s, MaxID); got != s {
				t.Fatalf("plainID(%q) but scrub makes it %q", s, got)
			}
		}
	})
}

func TestPlainID(t *testing.T) {
	for _, tc := range []struct {
		s     string
		plain bool
	}{
		{"BIT-20261128-0001", true},
		{"9f0c4b1e-2a7d-4c1b-9e55-0d1c2b3a4f5e", true},
		{"2026-11-28T10:15:00.123+07:00", true},
		{"2026-11-28 10:15:00", false},        // a space: could start a credential
		{"xeyJhbGciOiJub25lIn0abc", false},    // a JWT's start inside a word
		{"sign:abc", false},                   // a key and a separator
		{"user@example.com", false},           // neither a word nor a clock
		{strings.Repeat("a", MaxID+1), false}, // cut by scrub
		{"Bearer", true},                      // a keyword alone, no credential after it
	} {
		if got := plainID(tc.s); got != tc.plain {
			t.Errorf("plainID(%q) = %v, want %v", tc.s, got, tc.plain)
		}
		if got := (Scrubber{}).ID(tc.s); tc.plain && got != tc.s {
			t.Errorf("ID(%q) = %q, a plain id changed", tc.s, got)
		}
	}
}

// TestPlainIDOnlyWhereScrubKeeps tries every byte between each secret
// shape's keyword and its value: wherever scrub changes the text, plainID
// must not have passed it.
func TestPlainIDOnlyWhereScrubKeeps(t *testing.T) {
	shapes := []struct{ before, after string }{
		{"sign", "0123456789abcdef"}, {"token", "abcdef"}, {"api_key", "abcdef"}, {"password", "hunter2"},
		{"Bearer", "abcdefgh"}, {"Basic", "dXNlcjpwYXNz"}, {"https:", "/user:pass@host"}, {"eyJ", "hbGciOiJ"},
		{"2026-11-28T10:15:00", "sign=abc"},
	}
	for _, sh := range shapes {
		for c := 0; c < 256; c++ {
			for _, s := range []string{sh.before + string(rune(c)) + sh.after, sh.before + string([]byte{byte(c)}) + sh.after} {
				if plainID(s) && (Scrubber{}).scrub(s, MaxID) != s {
					t.Errorf("plainID(%q) but scrub changes it to %q", s, (Scrubber{}).scrub(s, MaxID))
				}
			}
		}
	}
}
