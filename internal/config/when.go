package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseWhen reads a TIME of the operator commands (replay --since and
// --until, offsets reset --to-time): RFC 3339 (2026-11-23T10:00:00Z) or a
// positive duration ago (90m) counted from now. "" is the zero time.
func ParseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q: want RFC 3339 (2026-11-23T10:00:00Z) or a duration ago (90m)", s)
}

// ParseRate reads a RATE of the operator commands (replay and reconcile
// --rate): "N" or "N/s" per second, "N/m" per minute, as a number per
// second. "" is 0: no bound.
func ParseRate(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	n, per := s, 1.0
	if i := strings.IndexByte(s, '/'); i >= 0 {
		switch s[i+1:] {
		case "s":
		case "m":
			per = 60
		default:
			return 0, fmt.Errorf("%q: want N, N/s or N/m", s)
		}
		n = s[:i]
	}
	v, err := strconv.ParseFloat(n, 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q: want a positive number, N, N/s or N/m", s)
	}
	return v / per, nil
}
