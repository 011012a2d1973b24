package produce

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// FuzzParseLine feeds `produce` lines as an operator's file might hold
// them. Whatever a line holds, it becomes an event of one of the topic's
// types with a non-empty key, or an error that names fields and never
// quotes a value (values may be personal data: a name, a phone number).
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		`{"type":"PurchaseCompleted","transactionId":"T-1","loyaltyId":"L-1","amount":12.5,"currency":"EUR","occurredAt":"2026-11-20T10:30:00Z"}`,
		`{"type":"MemberOnboarded","externalId":"E-1","phone":"+441234567890","firstName":"Alexandrina"}`,
		`{"type":"PurchaseCompleted","transactionId":{"nested":"Alexandrina"},"loyaltyId":"L-1"}`,
		`{"type":"PurchaseCompleted","loyaltyId":"L-1","amount":"twelve-euros-fifty"}`,
		`{"type":"PurchaseCompleted","loyaltyId":"L-1","transactionDate":"yesterday-at-noon"}`,
		`{"type":"PurchaseRefunded","loyaltyId":"L-1","refundDate":"2026-13-45T99:00:00Z"}`,
		`{"type":"PurchaseCompleted","loyaltyId":"L-1","surprise":"Alexandrina"}`,
		`{"type":"MemberOnboardRequested","externalId":"E-1","phone":["+441234567890"]}`,
		`{"type":7}`, `[]`, `{`, `null`, `{"loyaltyId":12345678901}`,
	} {
		f.Add(s)
	}
	all := events.EventTypes()
	f.Fuzz(func(t *testing.T, line string) {
		ev, key, err := ParseLine([]byte(line), all, "", "", "")
		if err != nil {
			// The line again with every string value a canary: an error
			// that shows the canary quotes values.
			if canaried, ok := withCanaries(line); ok {
				if _, _, err := ParseLine(canaried, all, "", "", ""); err != nil && strings.Contains(err.Error(), canary) {
					t.Fatalf("line %s: error %q quotes a value", canaried, err)
				}
			}
			return
		}
		if ev == nil || len(key) == 0 {
			t.Fatalf("line %q: event %v, key %q", line, ev, key)
		}
		ok := false
		for _, x := range all {
			ok = ok || ev.Type() == x
		}
		if !ok {
			t.Fatalf("event of type %q", ev.Type())
		}
	})
}

const canary = "Alexandrina-canary-PII"

// withCanaries is line with every string value but the type field's (at
// the top level, and inside its arrays and objects) replaced by canary;
// false when line is not a JSON object.
func withCanaries(line string) ([]byte, bool) {
	var fields map[string]any
	if json.Unmarshal([]byte(line), &fields) != nil || fields == nil {
		return nil, false
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return canary
		case []any:
			for i, y := range x {
				x[i] = walk(y)
			}
		case map[string]any:
			for k, y := range x {
				x[k] = walk(y)
			}
		}
		return v
	}
	for k, v := range fields {
		if k != "type" {
			fields[k] = walk(v)
		}
	}
	b, err := json.Marshal(fields)
	return b, err == nil
}
