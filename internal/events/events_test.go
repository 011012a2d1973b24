package events_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

func ptr[T any](v T) *T { return &v }

var when = time.Date(2026, 11, 20, 10, 30, 0, 0, time.UTC)

// Personal data used in fixtures; tests assert none of it is ever echoed.
const (
	phone    = "+84901234567"
	fullName = "Nguyen Van An"
	email    = "an.nguyen@example.com"
	idNumber = "079201001234"
	address  = "12 Ly Thuong Kiet, Ha Noi"
	birthday = "1990-02-28"
)

func validOnboard() *events.MemberOnboardRequested {
	return &events.MemberOnboardRequested{
		TransactionID: "cmd-1", Phone: phone, FullName: fullName, Gender: "female",
		Birthday: birthday, Email: ptr(email), IsKYC: true, IDNumber: ptr(idNumber),
		PlaceOfIssue: "Ha Noi", PlaceOfBirth: "Hai Phong", IssueDate: "2020-01-15",
		ExpireDate: "2035-01-15", Nationality: "VNM", Address: address, ExternalID: "ext-1",
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		ev   events.Event
		want []string // "field: message" prefixes, in order; nil = valid
	}{
		{"purchase ok", &events.PurchaseCompleted{TransactionID: "t1", LoyaltyID: "L1", TransactionDate: when, Amount: 0,
			Description: ptr(`{"sku":"A1"}`), ExtraData: ptr(` {} `)}, nil},
		{"purchase bad", &events.PurchaseCompleted{TransactionID: " ", Amount: -1, Currency: "vnd",
			Description: ptr(`"text"`), ExtraData: ptr(`{`)},
			[]string{"transactionId: required", "loyaltyId: required", "transactionDate: required", "amount: must be >= 0",
				"currency: must be", "description: must be a JSON object", "extraData: must be a JSON object"}},
		{"redemption ok", &events.RedemptionRequested{TransactionID: "t2", LoyaltyID: "L1", TransactionDate: when, Amount: 10, UsedPoint: 1,
			Description: ptr("free text is fine here")}, nil},
		{"redemption bad", &events.RedemptionRequested{TransactionID: "t2", LoyaltyID: "L1", TransactionDate: when, Amount: 10, UsedPoint: 0, Sign: ptr("")},
			[]string{"usedPoint: must be > 0", "sign: must not be blank"}},
		{"refund ok", &events.PurchaseRefunded{TransactionID: "r1", OriginalTransactionID: "t1", LoyaltyID: "L1", RefundAmount: 5, RefundDate: when}, nil},
		{"refund bad", &events.PurchaseRefunded{TransactionID: "t1", OriginalTransactionID: "t1", RefundAmount: -5},
			[]string{"transactionId: the refund id must differ", "loyaltyId: required", "refundAmount: must be >= 0", "refundDate: required"}},
		{"onboard ok", validOnboard(), nil},
		{"onboard passport only", func() events.Event {
			e := validOnboard()
			e.IDNumber, e.PassportNumber = nil, ptr("B1234567")
			return e
		}(), nil},
		{"onboard bad", func() events.Event {
			e := validOnboard()
			e.Gender, e.Birthday, e.IssueDate, e.ExpireDate = "F", "1990-02-30", "15-01-2020", ""
			e.IDNumber, e.Nationality, e.Phone = nil, "VN", ""
			return e
		}(), []string{"phone: required", "gender: must be one of", "birthday: must be an existing date", "idNumber: required when passportNumber",
			"issueDate: must be an existing date", "expireDate: required", "nationality: must be an ISO 3166-1 alpha-3"}},
		{"link bad", &events.MemberLinkRequested{TransactionID: "c"}, []string{"loyaltyId: required", "partnerMemberId: required"}},
		{"unlink ok", &events.MemberUnlinkRequested{TransactionID: "c", LoyaltyID: "L", PartnerMemberID: "P"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.ev.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ve *events.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate() = %v, want *ValidationError", err)
			}
			if len(ve.Problems) != len(tt.want) {
				t.Fatalf("problems = %v, want %d: %v", ve.Problems, len(tt.want), tt.want)
			}
			for i, p := range ve.Problems {
				if got := p.Field + ": " + p.Message; !strings.HasPrefix(got, tt.want[i]) {
					t.Errorf("problem %d = %q, want prefix %q", i, got, tt.want[i])
				}
			}
			for _, pii := range []string{phone, fullName, email, idNumber, address, "1990-02-30"} {
				if strings.Contains(err.Error(), pii) {
					t.Errorf("error %q echoes personal data", err)
				}
			}
		})
	}
}

func TestValidateDefaultsCurrency(t *testing.T) {
	e := &events.PurchaseCompleted{TransactionID: "t", LoyaltyID: "L", TransactionDate: when}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	if e.Currency != events.DefaultCurrency {
		t.Fatalf("currency = %q", e.Currency)
	}
}

func TestOnboardingNeverPrintsPersonalData(t *testing.T) {
	e := validOnboard()
	core, logs := observer.New(zap.DebugLevel)
	zap.New(core).Info("event", zap.Object("event", e), zap.Any("any", e), zap.Stringer("s", e))
	var out strings.Builder
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		fmt.Fprintf(&out, verb+"\n", e)
		fmt.Fprintf(&out, verb+"\n", *e)
	}
	fmt.Fprintf(&out, "%v\n", fmt.Errorf("wrapped: %v", e))
	for _, entry := range logs.All() {
		fmt.Fprintf(&out, "%v\n", entry.ContextMap())
	}
	if !strings.Contains(out.String(), "cmd-1") || !strings.Contains(out.String(), events.Redacted) {
		t.Fatalf("redacted form lost the identifiers:\n%s", out.String())
	}
	for _, pii := range []string{phone, fullName, email, idNumber, address, birthday, "Hai Phong"} {
		if strings.Contains(out.String(), pii) {
			t.Errorf("output contains personal datum %q:\n%s", pii, out.String())
		}
	}
}

func TestCountryTable(t *testing.T) {
	for _, c := range []string{"VNM", "USA", "GBR", "DEU", "SSD", "CUW", "BES", "ALA", "TLS"} {
		if !events.IsCountryAlpha3(c) {
			t.Errorf("%s rejected", c)
		}
	}
	for _, c := range []string{"", "VN", "vnm", "XKX", "ANT", "SCG", "ZZZ", "VNMM"} {
		if events.IsCountryAlpha3(c) {
			t.Errorf("%s accepted", c)
		}
	}
}

func TestNewAndTypes(t *testing.T) {
	for _, typ := range events.EventTypes() {
		if e := events.New(typ); e == nil || e.Type() != typ {
			t.Errorf("New(%s) = %v", typ, e)
		}
	}
	if events.New("Nope") != nil {
		t.Error("New(unknown) != nil")
	}
	if got := events.SourceID("loyalty.purchase", 3, 42); got != "loyalty.purchase/3/42" {
		t.Errorf("SourceID = %q", got)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRedact(t *testing.T) {
	e := validOnboard()
	r := e.Redact()
	b := fmt.Sprintf("%s %s %s %s %s %s %s", r.Phone, r.FullName, *r.Email, *r.IDNumber, r.Address, r.Birthday, r.PlaceOfBirth)
	for _, pii := range []string{phone, fullName, email, idNumber, address, birthday, "Hai Phong"} {
		if strings.Contains(b, pii) {
			t.Errorf("Redact kept %q", pii)
		}
	}
	if r.PassportNumber != nil || r.TransactionID != e.TransactionID || r.ExternalID != e.ExternalID || e.Phone != phone {
		t.Errorf("Redact changed the wrong fields: %+v", r)
	}
}
