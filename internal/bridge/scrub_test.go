package bridge

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnertext"
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
// removes it from an API text that echoes it, in any case, and the logger
// removes it from a field named after it (or after an alias, in any
// spelling). Both put the one marker in its place.
func TestEveryPersonalFieldIsScrubbed(t *testing.T) {
	for _, f := range events.PersonalFields() {
		t.Run(f.Name, func(t *testing.T) {
			canary := "canary-" + f.Name + "-7"
			scrub := partnerTexts(onboardingWith(t, f.Name, canary), nil).Text
			for _, spelling := range []string{canary, strings.ToUpper(canary)} {
				if got, want := scrub("rejected: "+spelling+" is invalid"), "rejected: "+events.Redacted+" is invalid"; got != want {
					t.Errorf("error-event scrubber: %q, want %q", got, want)
				}
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
	if got := partnerTexts(e, nil).Text("no member Nguyen Van An (Nguyen), An"); got != "no member [redacted] ([redacted]), An" {
		t.Errorf("got %q", got)
	}
	if got := partnerTexts(&events.PurchaseCompleted{LoyaltyID: "Nguyen"}, nil).Text("Nguyen"); got != "Nguyen" {
		t.Errorf("a purchase scrubbed %q", got)
	}
}

// An onboarding's member in the spellings a partner uses, in every text
// the bridge publishes: partner texts, codes and the detail. Other events
// lose tokens only.
func TestPartnerTextsPerEvent(t *testing.T) {
	e := onboardingWith(t, "phone", "+84912345678")
	name := "Nguyễn Văn An"
	e.FullName = name
	const r = events.Redacted
	jwt := "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.c2ln"
	for _, tc := range []struct {
		name string
		ev   events.Event
		fn   func(c partnertext.Scrubber) func(string) string
		in   string
		want string
	}{
		{"phone national", e, textOf, "phone 0912345678 in use", "phone " + r + " in use"},
		{"phone spaced", e, textOf, "phone +84 912 345 678 in use", "phone " + r + " in use"},
		{"birthday as dateOfBirth", e, textOf, "dateOfBirth 01-01-1991", "dateOfBirth " + r},
		{"name in capitals without diacritics", e, textOf, "NGUYEN VAN AN exists", r + " exists"},
		{"id number in a code", e, codeOf, "ID_001122334455_TAKEN", "ID_" + r + "_TAKEN"},
		{"detail", e, detailOf, "loyalty: onboard: business error (HTTP 400) 0001 DUP_0912-345-678 Bearer " + jwt,
			"loyalty: onboard: business error (HTTP 400) 0001 DUP_" + r + " Bearer " + r},
		{"purchase: phone left, token gone", &events.PurchaseCompleted{LoyaltyID: "L1"}, textOf,
			"0912345678 Bearer " + jwt, "0912345678 Bearer " + r},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fn(partnerTexts(tc.ev, nil))(tc.in); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func textOf(c partnertext.Scrubber) func(string) string   { return c.Text }
func codeOf(c partnertext.Scrubber) func(string) string   { return c.Code }
func detailOf(c partnertext.Scrubber) func(string) string { return c.Detail }
