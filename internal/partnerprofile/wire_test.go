package partnerprofile_test

import (
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// Each date encoding writes what it says and reads back only itself.
func TestDateEncodings(t *testing.T) {
	at := time.Date(2026, 11, 23, 17, 0, 0, 123e6, time.FixedZone("ICT", 7*3600))
	for _, tc := range []struct {
		name    string
		p       partnerprofile.Profile
		accrual string // the accrual JSON; "" when p is invalid
		invalid string
	}{
		{"default: epoch millis as a number", partnerprofile.Profile{}, `1795428000123`, ""},
		{"epoch millis as a string", partnerprofile.Profile{AccrualDateType: partnerprofile.DateString}, `"1795428000123"`, ""},
		{"epoch seconds as a number", partnerprofile.Profile{AccrualDateFormat: partnerprofile.DateEpochSeconds}, `1795428000`, ""},
		{"iso8601 takes a string by itself", partnerprofile.Profile{AccrualDateFormat: partnerprofile.DateISO8601}, `"2026-11-23T10:00:00.123Z"`, ""},
		{"a layout", partnerprofile.Profile{AccrualDateFormat: "layout:2006-01-02 15:04:05"}, `"2026-11-23 10:00:00"`, ""},
		{"iso8601 as a number", partnerprofile.Profile{AccrualDateFormat: partnerprofile.DateISO8601, AccrualDateType: partnerprofile.DateNumber},
			"", "cannot travel as a JSON number"},
		{"a layout without the reference time", partnerprofile.Profile{AccrualDateFormat: "layout:yyyy-mm-dd"}, "", "no element of Go's reference time"},
		{"an unknown type", partnerprofile.Profile{RedemptionDateType: "date"}, "", `date type "date"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.invalid != "" {
				if err == nil || !strings.Contains(err.Error(), tc.invalid) {
					t.Fatalf("want %q, got %v", tc.invalid, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d := tc.p.AccrualDate()
			if got := string(d.JSON(at)); got != tc.accrual {
				t.Fatalf("accrual date %s, want %s", got, tc.accrual)
			}
			back, err := d.Read([]byte(tc.accrual))
			if err != nil || back.Unix() != at.Unix() {
				t.Fatalf("read back %v %v", back, err)
			}
			// The other JSON type is refused, naming the encoding.
			other := `"` + tc.accrual + `"`
			if strings.HasPrefix(tc.accrual, `"`) {
				other = strings.Trim(tc.accrual, `"`)
			}
			if _, err := d.Read([]byte(other)); err == nil || !strings.Contains(err.Error(), d.String()) {
				t.Fatalf("%s read as %s: %v", other, d, err)
			}
		})
	}
	// A redemption date is a string unless the profile says otherwise.
	p := partnerprofile.Profile{RedemptionDateFormat: partnerprofile.DateEpochSeconds}
	if got := string(p.RedemptionDateEncoding().JSON(at)); got != `"1795428000"` {
		t.Fatalf("redemption date %s", got)
	}
	p.RedemptionDateType = partnerprofile.DateNumber
	if got := string(p.RedemptionDateEncoding().TextJSON(p.RedemptionDate(at))); got != `1795428000` {
		t.Fatalf("redemption date as a number %s", got)
	}
}

func TestJWTProfile(t *testing.T) {
	for _, tc := range []struct {
		name string
		j    partnerprofile.JWT
		want string // "" valid; "|"-separated parts
	}{
		{"default", partnerprofile.JWT{}, ""},
		{"another partner", partnerprofile.JWT{Algorithm: "PS256", Issuer: "shop-1",
			Sign:         partnerprofile.Claims{Audience: "loyalty", Type: partnerprofile.None, Lifetime: time.Minute, JTI: partnerprofile.JTITransactionID},
			PartnerToken: partnerprofile.Claims{Audience: partnerprofile.None, JTI: partnerprofile.JTINone},
			SignClaims:   []partnerprofile.SignClaim{{Field: "transactionId", Claim: "txn"}, {Field: "usedPoint", Encoding: partnerprofile.ClaimAsString}}}, ""},
		{"contradictions", partnerprofile.JWT{Algorithm: "HS256",
			Sign:         partnerprofile.Claims{Lifetime: time.Hour},
			PartnerToken: partnerprofile.Claims{JTI: partnerprofile.JTITransactionID},
			SignClaims:   []partnerprofile.SignClaim{{Field: "sign"}, {Field: "loyaltyId", Claim: "exp"}, {Field: "usedPoint", Claim: "p"}, {Field: "transactionAmount", Claim: "p"}}},
			`JWT algorithm "HS256"|sign lifetime 1h0m0s|partner token jti transaction-id|field "sign"|sign claim "exp" of field loyaltyId|sign claim "p" named twice`},
	} {
		err := tc.j.Validate()
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
	for in, want := range map[string]string{"usedPoint": "usedPoint", "transactionId=txn": "transactionId=txn",
		"usedPoint:string": "usedPoint:string", "transactionDate=date:body": "transactionDate=date"} {
		c, err := partnerprofile.ParseSignClaim(in)
		if err != nil || c.String() != want {
			t.Errorf("%s: %v %v, want %s", in, c, err, want)
		}
	}
	if _, err := partnerprofile.ParseSignClaim("usedPoint:hex"); err == nil {
		t.Error("an unknown encoding is accepted")
	}
	// The encoding is read wherever the last colon is, even first: what
	// is left is the field (here none, which Validate refuses).
	if c, err := partnerprofile.ParseSignClaim(":string"); err != nil || c.Field != "" || c.Encoding != partnerprofile.ClaimAsString {
		t.Errorf(":string: %+v %v, want no field, encoded as a string", c, err)
	}
	// A lifetime of MaxJWTLifetime is the longest allowed, not too long.
	longest := partnerprofile.Claims{Lifetime: partnerprofile.MaxJWTLifetime}
	if err := (partnerprofile.JWT{Sign: longest, PartnerToken: longest}).Validate(); err != nil {
		t.Errorf("lifetimes of %s: %v", partnerprofile.MaxJWTLifetime, err)
	}
}

// An empty or blank transactionDate is refused as the wrong JSON type or
// as no date, never read past its end.
func TestDateReadEmpty(t *testing.T) {
	for _, d := range []partnerprofile.DateEncoding{
		{Format: partnerprofile.DateEpochMillis, Type: partnerprofile.DateNumber},
		{Format: partnerprofile.DateISO8601, Type: partnerprofile.DateString},
	} {
		for _, raw := range []string{"", "  "} {
			if _, err := d.Read([]byte(raw)); err == nil {
				t.Errorf("%s: %q read as a date", d, raw)
			}
		}
	}
}
