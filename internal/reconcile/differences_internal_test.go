package reconcile

import (
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
)

// differences names each field where the bridge's side (the result, the
// input event) disagrees with the partner's record: points as the result
// reports them; the amount within a relative 1e-9 (absolute below 1); the
// usedPoint a redemption asked for, unless the result's points already
// differ (one disagreement, named once); the bitReference when both have
// one.
func TestDifferences(t *testing.T) {
	p := func(v int64) *int64 { return &v }
	partner := loyalty.Transaction{TransactionPoint: 40, TransactionAmount: 4000, BitReference: "BIT-1"}
	for _, tc := range []struct {
		name    string
		in      *inputRecord
		res     result
		partner loyalty.Transaction
		want    string
	}{
		{"all agree", &inputRecord{amount: 4000, asked: 40}, result{points: p(40), bitReference: "BIT-1"}, partner, ""},
		{"no input record, no points, no bitReference", nil, result{}, partner, ""},
		{"points", nil, result{points: p(41)}, partner, "points: result 41, partner 40"},
		{"amount within 1e-9 of it", &inputRecord{amount: 4000.000001, asked: -1}, result{}, partner, ""},
		{"amount beyond 1e-9 of it", &inputRecord{amount: 4000.0001, asked: -1}, result{}, partner, "amount: event 4000.0001, partner 4000"},
		{"amount below 1: 1e-9 absolute, exactly", &inputRecord{amount: 0, asked: -1}, result{},
			loyalty.Transaction{TransactionAmount: 1e-9}, ""},
		{"amount below 1: beyond 1e-9 absolute", &inputRecord{amount: 0, asked: -1}, result{},
			loyalty.Transaction{TransactionAmount: 2e-9}, "amount: event 0, partner 2e-09"},
		{"usedPoint asked, result without points", &inputRecord{amount: 4000, asked: 50}, result{}, partner, "usedPoint: event 50, partner 40"},
		{"usedPoint asked, result's points agree", &inputRecord{amount: 4000, asked: 50}, result{points: p(40)}, partner, "usedPoint: event 50, partner 40"},
		{"usedPoint asked, result's points differ: named once", &inputRecord{amount: 4000, asked: 50}, result{points: p(50)}, partner,
			"points: result 50, partner 40"},
		{"usedPoint 0 asked", &inputRecord{amount: 4000, asked: 0}, result{}, partner, "usedPoint: event 0, partner 40"},
		{"bitReference", nil, result{bitReference: "BIT-2"}, partner, "bitReference: result BIT-2, partner BIT-1"},
		{"bitReference the partner lacks", nil, result{bitReference: "BIT-2"}, loyalty.Transaction{TransactionPoint: 40}, ""},
		{"everything", &inputRecord{amount: 1, asked: 7}, result{points: p(41), bitReference: "BIT-2"}, partner,
			"points: result 41, partner 40; amount: event 1, partner 4000; bitReference: result BIT-2, partner BIT-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := differences(tc.in, tc.res, &tc.partner); got != tc.want {
				t.Errorf("differences: %q, want %q", got, tc.want)
			}
		})
	}
}
