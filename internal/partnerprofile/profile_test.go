package partnerprofile_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// The zero Profile reads as Default everywhere, without WithDefaults.
func TestZeroIsDefault(t *testing.T) {
	var zero partnerprofile.Profile
	d := partnerprofile.Default()
	want := partnerprofile.Profile{NotFoundCodes: []string{"TRANSACTION_NOT_FOUND"}, MemberNotFoundCodes: []string{"MEMBER_NOT_FOUND"},
		DuplicateCodes: []string{"DUPLICATE_TRANSACTION"}, SignRefusedCodes: []string{"INVALID_SIGN"},
		WireRefusedCodes: []string{"INVALID_REQUEST", "MISSING_FIELD"},
		AccrualType:      "ACCRUAL", RedemptionType: "REDEMPTION", AppliedStatuses: []string{"SUCCESS"},
		AccrualDateFormat: partnerprofile.DateEpochMillis, RedemptionDateFormat: partnerprofile.DateISO8601,
		RedemptionDateType: partnerprofile.DateString, UnsetKeyed: partnerprofile.KeyedAbsent,
		TransactionKey: partnerprofile.KeyIDAndType,
		JWT: partnerprofile.JWT{
			Sign: partnerprofile.Claims{Audience: "/api-point/partner/v1/point-redemption-with-token", Type: "redemption-sign",
				Lifetime: 2 * time.Minute, JTI: partnerprofile.JTIRandom},
			PartnerToken: partnerprofile.Claims{Audience: "/api-identity/public/v1/exchange-token", Type: "partner-token",
				Lifetime: 2 * time.Minute, JTI: partnerprofile.JTIRandom},
			SignClaims: []partnerprofile.SignClaim{{"loyaltyId", "loyaltyId", "body"}, {"transactionId", "transactionId", "body"},
				{"usedPoint", "usedPoint", "body"}, {"transactionAmount", "transactionAmount", "body"}, {"transactionDate", "transactionDate", "body"}}},
		FractionalPoints: partnerprofile.FractionsRefuse, ApplyWindow: 2 * time.Second, TokenLifetimeUnit: partnerprofile.LifetimeSeconds}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("Default %+v", d)
	}
	for _, p := range []partnerprofile.Profile{zero, d} {
		if !p.IsNotFound("TRANSACTION_NOT_FOUND") || p.IsNotFound("") || !p.IsDuplicate("DUPLICATE_TRANSACTION") ||
			p.Window() != 2*time.Second ||
			!p.IsMemberNotFound("MEMBER_NOT_FOUND") || p.IsMemberNotFound("") || p.IsMemberNotFound("TRANSACTION_NOT_FOUND") ||
			p.KindOf("ACCRUAL") != partnerprofile.Accrual || p.KindOf("REDEMPTION") != partnerprofile.Redemption || p.KindOf("EARN") != 0 ||
			p.StatusOf("SUCCESS") != partnerprofile.StatusApplied || p.StatusOf("FAILED") != partnerprofile.StatusUnknown ||
			p.AccrualFormat() != partnerprofile.DateEpochMillis || p.Fractions() != partnerprofile.FractionsRefuse ||
			p.Key() != partnerprofile.KeyIDAndType {
			t.Errorf("%+v does not read as the default", p)
		}
	}
	at := time.Date(2026, 11, 23, 17, 0, 0, 123e6, time.FixedZone("ICT", 7*3600))
	if got := zero.RedemptionDate(at); got != "2026-11-23T10:00:00.123Z" {
		t.Errorf("redemption date %s", got)
	}
	if got := (partnerprofile.Profile{RedemptionDateFormat: partnerprofile.DateEpochMillis}).RedemptionDate(at); got != "1795428000123" {
		t.Errorf("epoch-millis redemption date %s", got)
	}
	// WithDefaults copies: the result shares no list with its source.
	p := partnerprofile.Profile{FailedStatuses: []string{"FAILED"}}
	q := p.WithDefaults()
	q.FailedStatuses[0] = "X"
	if p.FailedStatuses[0] != "FAILED" {
		t.Error("WithDefaults shares a list")
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    partnerprofile.Profile
		want string // "" valid; "|"-separated parts
	}{
		{"zero", partnerprofile.Profile{}, ""},
		{"another partner", partnerprofile.Profile{NotFoundCodes: []string{"A", "B"}, AccrualType: "EARN", RedemptionType: "BURN",
			AppliedStatuses: []string{"OK"}, FailedStatuses: []string{"KO"}}, ""},
		{"contradictions", partnerprofile.Profile{NotFoundCodes: []string{"X"}, DuplicateCodes: []string{"X", "Y"}, AccrualType: "T",
			MemberNotFoundCodes: []string{"Y", ""},
			RedemptionType:      "T", FailedStatuses: []string{"SUCCESS", " "}, AccrualDateFormat: "julian", FractionalPoints: "floor",
			TransactionKey: "type", TokenLifetimeUnit: "minutes"},
			`token lifetime unit "minutes"|code "X" is both|code "Y" is both a member-not-found and a duplicate code|member-not-found codes: an empty entry|same transactionType "T"|status "SUCCESS" is both|failed statuses: an empty entry|accrual date format "julian"|fractional points "floor"|transaction key "type"`},
		{"keyed by id alone", partnerprofile.Profile{TransactionKey: partnerprofile.KeyID}, ""},
		{"empty result URL parameter", partnerprofile.Profile{ResultURLParams: []string{"errorCode", ""}}, "result URL parameters: an empty entry"},
		{"negative apply window", partnerprofile.Profile{ApplyWindow: -time.Second}, "apply window -1s: must be positive"},
		{"one type for both through the default", partnerprofile.Profile{RedemptionType: "ACCRUAL"}, `same transactionType "ACCRUAL"`},
	} {
		err := tc.p.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		for _, part := range strings.Split(tc.want, "|") {
			if err == nil || !strings.Contains(err.Error(), part) {
				t.Errorf("%s: want %q in %v", tc.name, part, err)
			}
		}
	}
}

// Each code list accepts its own codes, the defaults when the profile names
// none, and never the empty code (an answer with no code is none of them).
func TestCodeLists(t *testing.T) {
	other := partnerprofile.Profile{SignRefusedCodes: []string{"S1"}, WireRefusedCodes: []string{"W1", "W2"}}
	for _, tc := range []struct {
		name string
		is   func(partnerprofile.Profile, string) bool
		def  string // a default code
		own  string // a code of other's list
	}{
		{"sign-refused", partnerprofile.Profile.IsSignRefused, partnerprofile.DefaultSignRefusedCode, "S1"},
		{"wire-refused", partnerprofile.Profile.IsWireRefused, partnerprofile.DefaultMissingFieldCode, "W2"},
	} {
		for _, c := range []struct {
			p    partnerprofile.Profile
			code string
			want bool
		}{
			{partnerprofile.Profile{}, tc.def, true},
			{partnerprofile.Profile{}, "", false},
			{partnerprofile.Profile{}, tc.own, false},
			{other, tc.own, true},
			{other, tc.def, false},
			{other, "", false},
		} {
			if got := tc.is(c.p, c.code); got != c.want {
				t.Errorf("%s: %q with the profile's list %v: %v, want %v", tc.name, c.code, c.p.SignRefusedCodes, got, c.want)
			}
		}
	}
}

// A setting Validate leaves to its own parser is refused all the same.
func TestValidateReportsItsParsers(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    partnerprofile.Profile
		want string
	}{
		{"unset keyed", partnerprofile.Profile{UnsetKeyed: "omit"}, `unset keyed fields "omit"`},
		{"JWT", partnerprofile.Profile{JWT: partnerprofile.JWT{Algorithm: "HS256"}}, `JWT algorithm "HS256"`},
	} {
		if err := tc.p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want %q, got %v", tc.name, tc.want, err)
		}
	}
}
