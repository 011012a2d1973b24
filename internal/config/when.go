package config

import (
	"fmt"
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
