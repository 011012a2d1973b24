package replay

import (
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

func TestErrorFilter(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	transient := &events.LoyaltyError{Category: events.CategoryTransientExhausted, Retryable: true, ProcessedAt: now}
	validation := &events.LoyaltyError{Category: events.CategoryValidation, ProcessedAt: now}
	for _, tc := range []struct {
		name string
		f    ErrorFilter
		e    *events.LoyaltyError
		want bool
	}{
		{"default takes retryable", ErrorFilter{}, transient, true},
		{"default skips permanent", ErrorFilter{}, validation, false},
		{"category chosen", ErrorFilter{Categories: []events.Category{events.CategoryValidation}}, validation, true},
		{"category not chosen", ErrorFilter{Categories: []events.Category{events.CategoryValidation}}, transient, false},
		{"before since", ErrorFilter{Since: now.Add(time.Minute)}, transient, false},
		{"after since", ErrorFilter{Since: now.Add(-time.Minute)}, transient, true},
	} {
		if got := tc.f.match(tc.e); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSummary(t *testing.T) {
	s := &Summary{Records: 3, Outcomes: map[string]int{"APPLIED": 2, "ALREADY_APPLIED": 1}}
	if !s.OK() {
		t.Fatal("clean summary not OK")
	}
	tab := s.Table()
	if !strings.Contains(tab, "ALREADY_APPLIED") || !strings.Contains(tab, "total") {
		t.Fatalf("table:\n%s", tab)
	}
	s.NotReplayable = append(s.NotReplayable, "t/0/1 (gone)")
	if s.OK() || !strings.Contains(s.Table(), "not replayable: t/0/1") {
		t.Fatal("a record that could not be replayed is not reported")
	}
}

func TestCallsNamesEveryType(t *testing.T) {
	for _, typ := range events.EventTypes() {
		if strings.Contains(calls(typ), "unknown") {
			t.Errorf("%s has no calls", typ)
		}
	}
}
