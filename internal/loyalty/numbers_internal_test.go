package loyalty

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// The number readers alone, on values the JSON decoder would not hand
// them (NaN, Inf) as well as on those it would: each reader's bounds hold
// whatever its caller checked before.
func TestNumberReaders(t *testing.T) {
	refuse := partnerprofile.FractionsRefuse
	long := "7." + strings.Repeat("0", maxDigits)
	for _, tc := range []struct {
		reader string // points, whole or amount
		in     string
		want   float64
		err    string // "" for none
	}{
		{"amount", "1500.25", 1500.25, ""},
		{"amount", "-0.5", -0.5, ""},
		{"amount", "NaN", 0, "not a number in range"},
		{"amount", "Inf", 0, "not a number in range"},
		{"amount", "+Inf", 0, "not a number in range"},
		{"amount", "-infinity", 0, "not a number in range"},
		{"amount", "1e400", 0, "not a number in range"},
		{"amount", "", 0, "absent or null"},
		{"points", "7", 7, ""},
		{"points", "7.0", 7, ""},
		{"points", long[:maxDigits], 7, ""}, // exactly maxDigits: read
		{"points", long, 0, "out of range"}, // one more: refused unread
		{"points", "9223372036854775807", 9223372036854775807, ""},
		{"points", "9.223372036854775808e18", 0, "out of range"},
		{"points", "1e41", 0, "out of range"},
		{"points", "1e40", 0, "out of range"},
		{"points", "NaN", 0, "not a number"},
		// Exponents up to maxExponent either way are read.
		{"points", "0." + strings.Repeat("0", 34) + "1e40", 100000, ""},
		{"points", "1e-40", 0, "is fractional"},
		{"points", "1e-41", 0, "out of range"},
		{"whole", "1001", 1001, ""},
		{"whole", "", 0, ""},
		{"whole", long, 0, "out of range"},
		{"whole", "-9223372036854775808", -9223372036854775808, ""},
		{"whole", "9223372036854775808", 0, "out of range"},
		{"whole", "-9223372036854775809", 0, "out of range"},
		{"whole", "1e30", 0, "out of range"},
		{"whole", "1.5", 0, "not a whole number"},
	} {
		t.Run(tc.reader+" "+tc.in, func(t *testing.T) {
			var (
				got float64
				err error
			)
			n := json.Number(tc.in)
			switch tc.reader {
			case "points":
				var v int64
				v, err = points("f", n, refuse)
				got = float64(v)
			case "whole":
				var v int64
				v, err = whole("f", n)
				got = float64(v)
			case "amount":
				got, err = amount("f", n)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("%v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("%v (value %v), want an error with %q", err, got, tc.err)
			case tc.err == "" && got != tc.want:
				t.Fatalf("%v, want %v", got, tc.want)
			}
		})
	}
}

// A partner's value quoted in an error is cut on a character boundary,
// and a value of nothing but continuation bytes (no boundary at all) is
// cut to the ellipsis, never read before its start.
func TestShortWithoutABoundary(t *testing.T) {
	if got := short(strings.Repeat("\x80", 40)); got != "…" {
		t.Errorf("%q, want the ellipsis alone", got)
	}
	if got := short(strings.Repeat("é", 20)); got != strings.Repeat("é", 16)+"…" {
		t.Errorf("%q", got)
	}
}
