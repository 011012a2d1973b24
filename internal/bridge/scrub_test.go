package bridge

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
)

// onboardingWith is an onboarding with canary in the field named name (its
// Avro and JSON name) and plain values elsewhere.
func onboardingWith(t *testing.T, name, canary string) *events.MemberOnboardRequested {
	t.Helper()
	m := map[string]any{"transactionId": "cmd-1", "phone": "+84900000000", "fullName": "Tran Thi B", "gender": "female",
		"birthday": "1991-01-01", "isKYC": true, "idNumber": "001122334455", "placeOfIssue": "Da Nang", "placeOfBirth": "Hue",
		"issueDate": "2020-01-01", "expireDate": "2030-01-01", "nationality": "VNM", "address": "1 Plain Street", "externalId": "E-1"}
	m[name] = canary
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var e events.MemberOnboardRequested
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

// snake is placeOfBirth as place_of_birth.
func snake(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// Every field of the one list, holding a canary: the error-event scrubber
// removes it from an API text that echoes it, and the logger removes it
// from a field named after it (or after an alias, in any spelling). Both
// put the one marker in its place.
func TestEveryPersonalFieldIsScrubbed(t *testing.T) {
	for _, f := range events.PersonalFields() {
		t.Run(f.Name, func(t *testing.T) {
			canary := "canary-" + f.Name + "-7"
			scrub := piiScrubber(onboardingWith(t, f.Name, canary))
			if got, want := scrub("rejected: "+canary+" is invalid"), "rejected: "+events.Redacted+" is invalid"; got != want {
				t.Errorf("error-event scrubber: %q, want %q", got, want)
			}

			var buf bytes.Buffer
			log, err := telemetry.NewLogger(telemetry.LogOptions{Output: &buf})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, name := range append([]string{f.Name}, f.Aliases...) {
				keys = append(keys, name, snake(name), strings.ToUpper(name))
			}
			for _, k := range keys {
				log.Info("onboarding", zap.String(k, canary))
				log.With(zap.String(k, canary)).Info("onboarding")
			}
			out := buf.String()
			if strings.Contains(out, canary) {
				t.Errorf("log redaction kept %s:\n%s", f.Name, out)
			}
			if n := strings.Count(out, events.Redacted); n != 2*len(keys) {
				t.Errorf("%d markers for %d redacted fields:\n%s", n, 2*len(keys), out)
			}
		})
	}
}

// A last name inside the full name does not leave the rest of the full
// name behind; short values and other events' texts are left alone.
func TestScrubberOrder(t *testing.T) {
	e := onboardingWith(t, "fullName", "Nguyen Van An")
	last, first := "Nguyen", "An"
	e.LastName, e.FirstName = &last, &first
	if got := piiScrubber(e)("no member Nguyen Van An (Nguyen), An"); got != "no member [redacted] ([redacted]), An" {
		t.Errorf("got %q", got)
	}
	if got := piiScrubber(&events.PurchaseCompleted{LoyaltyID: "Nguyen"})("Nguyen"); got != "Nguyen" {
		t.Errorf("a purchase scrubbed %q", got)
	}
}
