package loyalty

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkDecodeAccrualAnswer compares the fast path with encoding/json
// on the simulator's accrual answer (what decodeData does per accrual).
func BenchmarkDecodeAccrualAnswer(b *testing.B) {
	body := []byte(`{"statusCode":200,"message":"SUCCESS","data":{"sponsorId":1001,"transactionId":"bench-1234567","bitReference":"BIT000000012345","loyaltyId":"LB00001234","timestamp":"2026-11-28T17:00:00.123Z","requestId":"6f1c3d2e-8a4b-4c5d-9e6f-7a8b9c0d1e2f"}}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var env envelope[accrualWire]
			if !fastDecode(body, &env) {
				b.Fatal("declined")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var env envelope[accrualWire]
			if err := json.Unmarshal(body, &env); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEncodeAccrualBody compares the appended accrual body with
// json.Marshal's on the bench's purchase.
func BenchmarkEncodeAccrualBody(b *testing.B) {
	r := AccrualRequest{LoyaltyID: "LB00001234", TransactionID: "bench-1234567", ItemID: "SKU-42",
		TransactionDes:    json.RawMessage(`{"channel":"bench","sku":"SKU-42","qty":1}`),
		TransactionDate:   TransactionDate{Time: time.UnixMilli(1764320000123), Format: DateEpochMillis},
		TransactionAmount: 250000, TransactionCurrency: "VND"}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeBody(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
