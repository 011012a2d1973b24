package personalmatch_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/personalmatch"
)

func member() *events.MemberOnboardRequested {
	first, last, email, idn, pp := "An", "Nguyễn", "an.nguyen@mail.example", "001122334455", "B1234567"
	return &events.MemberOnboardRequested{TransactionID: "cmd-1", Phone: "+84912345678", FullName: "Nguyễn Văn An",
		FirstName: &first, LastName: &last, Gender: "male", Birthday: "1987-06-05", Email: &email, IsKYC: true,
		IDNumber: &idn, PassportNumber: &pp, PlaceOfIssue: "Cục Cảnh sát", PlaceOfBirth: "Huế", IssueDate: "2021-03-04",
		ExpireDate: "2036-03-04", Nationality: "VNM", Address: "12 Lý Thường Kiệt, Hoàn Kiếm", ExternalID: "E-1"}
}

func TestScrub(t *testing.T) {
	birth := time.Date(1987, 6, 5, 0, 0, 0, 0, time.UTC)
	const r = events.Redacted
	for _, tc := range []struct {
		name, in, want string
	}{
		{"phone as sent", "phone +84912345678 taken", "phone " + r + " taken"},
		{"phone national", "phone 0912345678 taken", "phone " + r + " taken"},
		{"phone spaced", "phone +84 912 345 678 taken", "phone " + r + " taken"},
		{"phone dashed in parentheses", "tel (+84) 912-345-678.", "tel " + r + "."},
		{"phone dotted national", "0912.345.678", r},
		{"phone without plus", "msisdn=84912345678&x=1", "msisdn=" + r + "&x=1"},
		{"birthday iso", "birthday 1987-06-05 invalid", "birthday " + r + " invalid"},
		{"birthday spec dateOfBirth", `"dateOfBirth":"05-06-1987"`, `"dateOfBirth":"` + r + `"`},
		{"birthday slashes", "born 05/06/1987", "born " + r},
		{"birthday unpadded", "born 5/6/1987", "born " + r},
		{"birthday timestamp", "at 1987-06-05T00:00:00.000Z", "at " + r + "T00:00:00.000Z"},
		{"birthday epoch ms", fmt.Sprintf("dob=%d", birth.UnixMilli()), "dob=" + r},
		{"birthday epoch ms +07", fmt.Sprintf("dob=%d", birth.Add(-7*time.Hour).UnixMilli()), "dob=" + r},
		{"issue date", "issued 04/03/2021", "issued " + r},
		{"name upper without diacritics", "NO MEMBER NGUYEN VAN AN", "NO MEMBER " + r},
		{"name lower", "no member nguyễn văn an!", "no member " + r + "!"},
		{"name decomposed", "Nguye\u0302\u0303n  Va\u0306n An", r},
		{"last name alone", "Mr NGUYỄN", "Mr " + r},
		{"address without diacritics", "address 12 ly thuong kiet, hoan kiem rejected", "address " + r + " rejected"},
		{"place", "born in HUE", "born in " + r},
		{"passport", "passport b1234567 expired", "passport " + r + " expired"},
		{"id spaced", "id 0011 2233 4455", "id " + r},
		{"email upper", "AN.NGUYEN@MAIL.EXAMPLE exists", r + " exists"},
		{"short values left", "An is here", "An is here"},
		{"plain text", "Bad Request", "Bad Request"},
		{"other numbers", "order 12345, amount 100000", "order 12345, amount 100000"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := personalmatch.New(member()).Scrub(tc.in); got != tc.want {
				t.Errorf("Scrub(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

// A nil Matcher (an event without personal data) changes nothing.
func TestNil(t *testing.T) {
	var m *personalmatch.Matcher
	if got := m.Scrub("+84912345678"); got != "+84912345678" {
		t.Errorf("nil matcher: %q", got)
	}
	if m := personalmatch.New(nil); m != nil {
		t.Errorf("New(nil) = %v", m)
	}
}

// Every field of the one list is matched (a canary of letters in each).
func TestEveryPersonalField(t *testing.T) {
	for _, f := range events.PersonalFields() {
		t.Run(f.Name, func(t *testing.T) {
			if f.Name == "phone" || f.Name == "birthday" {
				t.Skip("not a text: TestScrub covers its spellings")
			}
			e := member()
			canary := "Canary-" + f.Name
			setField(t, e, f.Name, canary)
			if got := personalmatch.New(e).Scrub("x " + strings.ToUpper(canary) + " y"); got != "x "+events.Redacted+" y" {
				t.Errorf("%s: %q", f.Name, got)
			}
		})
	}
}

func setField(t *testing.T, e *events.MemberOnboardRequested, name, v string) {
	t.Helper()
	switch name {
	case "phone":
		e.Phone = v
	case "fullName":
		e.FullName = v
	case "firstName":
		e.FirstName = &v
	case "lastName":
		e.LastName = &v
	case "email":
		e.Email = &v
	case "birthday":
		e.Birthday = v
	case "placeOfBirth":
		e.PlaceOfBirth = v
	case "idNumber":
		e.IDNumber = &v
	case "passportNumber":
		e.PassportNumber = &v
	case "placeOfIssue":
		e.PlaceOfIssue = v
	case "address":
		e.Address = v
	default:
		t.Fatalf("personal field %s unknown to this test", name)
	}
}

func BenchmarkScrub(b *testing.B) {
	m := personalmatch.New(member())
	text := strings.Repeat("partner said: no member NGUYEN VAN AN, phone 0912 345 678; ", 4)
	b.ReportAllocs()
	for b.Loop() {
		m.Scrub(text)
	}
}
