package events

import (
	"strings"
	"testing"
	"time"
)

func TestJSONDepth(t *testing.T) {
	for in, want := range map[string]int{
		`{}`:                          1,
		`{"a":{"b":[1,{"c":2}]}}`:     4,
		`{"s":"{{{[[[\"}}}"}`:         1,
		`{"s":"\\"}`:                  1,
		strings.Repeat("[", 40) + "]": 40,
	} {
		if got := jsonDepth(in); got != want {
			t.Errorf("jsonDepth(%s) = %d, want %d", in, got, want)
		}
	}
}

// Hostile sizes are VALIDATION problems naming the field, never echoing
// the value.
func TestLimits(t *testing.T) {
	long := strings.Repeat("x", MaxIDLen+1)
	deep := strings.Repeat(`{"a":`, MaxJSONDepth+1) + "1" + strings.Repeat("}", MaxJSONDepth+1)
	huge := `{"a":"` + strings.Repeat("y", MaxJSONLen) + `"}`
	ok := `{"a":{"b":1}}`
	for name, tc := range map[string]struct {
		ev    Event
		field string
	}{
		"long transactionId": {&PurchaseCompleted{TransactionID: long, LoyaltyID: "L", TransactionDate: time.Now(), Currency: "VND"}, "transactionId"},
		"deep description":   {&PurchaseCompleted{TransactionID: "t", LoyaltyID: "L", TransactionDate: time.Now(), Description: &deep}, "description"},
		"huge extraData":     {&PurchaseCompleted{TransactionID: "t", LoyaltyID: "L", TransactionDate: time.Now(), ExtraData: &huge}, "extraData"},
		"long partner id":    {&MemberLinkRequested{TransactionID: "t", LoyaltyID: "L", PartnerMemberID: long}, "partnerMemberId"},
		"long sign": {&RedemptionRequested{TransactionID: "t", LoyaltyID: "L", TransactionDate: time.Now(), UsedPoint: 1,
			Sign: ptr(strings.Repeat("s", MaxSignLen+1))}, "sign"},
		"long address": {func() Event {
			o := validOnboarding()
			o.Address = strings.Repeat("a", MaxAddressLen+1)
			return o
		}(), "address"},
	} {
		err := tc.ev.Validate()
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("%s: %v does not name %s", name, err, tc.field)
		}
		if strings.Contains(err.Error(), "xxxx") || strings.Contains(err.Error(), "yyyy") || strings.Contains(err.Error(), "aaaa") {
			t.Errorf("%s: the error echoes the value", name)
		}
	}
	if err := (&PurchaseCompleted{TransactionID: "t", LoyaltyID: "L", TransactionDate: time.Now(), Description: &ok}).Validate(); err != nil {
		t.Errorf("a normal description refused: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func validOnboarding() *MemberOnboardRequested {
	id := "012345678901"
	return &MemberOnboardRequested{TransactionID: "t", Phone: "+84900000001", FullName: "A B", Gender: "male", Birthday: "1990-01-01",
		IsKYC: true, IDNumber: &id, PlaceOfIssue: "HN", PlaceOfBirth: "HN", IssueDate: "2015-01-01", ExpireDate: "2030-01-01",
		Nationality: "VNM", Address: "1 Street", ExternalID: "e"}
}
