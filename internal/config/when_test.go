package config

import "testing"

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"", 0, true}, {"50", 50, true}, {"50/s", 50, true}, {"120/m", 2, true}, {"0.5", 0.5, true},
		{"0", 0, false}, {"-1", 0, false}, {"5/h", 0, false}, {"NaN", 0, false}, {"Inf", 0, false}, {"x/s", 0, false},
	} {
		got, err := ParseRate(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseRate(%q) = %v, %v", tc.in, got, err)
		}
	}
}
