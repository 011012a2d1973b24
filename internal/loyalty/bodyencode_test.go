package loyalty

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// fuzzDateFormats are the accrual date encodings FuzzEncodeBody draws
// from, some of which json.Marshal refuses (a layout sent as a number).
var fuzzDateFormats = []struct {
	format DateFormat
	typ    partnerprofile.DateType
}{
	{DateEpochMillis, ""}, {DateEpochMillis, partnerprofile.DateString}, {partnerprofile.DateEpochSeconds, ""},
	{DateISO8601, ""}, {DateISO8601, partnerprofile.DateNumber}, {"layout:2006-01-02 15:04:05", ""},
	{"layout:<2006>&", ""}, {"layout:2006\u2028", ""}, {"layout:Monday", partnerprofile.DateNumber},
	{"layout:20060102", partnerprofile.DateNumber},
}

// FuzzEncodeBody is the append encoders' differential test: for arbitrary
// accrual, lookup and redemption requests, and arbitrary already-encoded
// bodies, encodeBody and marshalRedemption give json.Marshal's bytes, or
// its error.
func FuzzEncodeBody(f *testing.F) {
	for _, s := range []struct {
		loyaltyID, txID, item string
		des, extra            string
		date                  int64
		format                uint8
		amount                float64
		currency              string
		used                  int64
		sign, redDes, redDate string
	}{
		{"LB00000001", "bench-1", "SKU-42", `{"channel":"bench","sku":"SKU-42","qty":1}`, "", 1764320000123, 0, 250000, "VND",
			7, "h.p.s", "", `"2026-11-28T10:00:00.000Z"`},
		{"LB1", "t<1>&", "Nguyễn Văn A", `{"note": "a < b"}`, `[1, 2]`, -1, 1, 1e21, "", 1, "", "trà sữa \u2028\u2029", `1764320000`},
		{"L\xff\xfe", "t\"\\\n\r\t\b\f\x00\x1f\x7f", "", ` {}`, `{"a":"\u2028"}`, 0, 3, 1e-7, "VND", -5, "s", "\xe2\x80", `"x\u003c"`},
		{"", "", "", `{"a":1}x`, `nul`, math.MaxInt64, 4, math.Inf(1), "", 0, "", "", ``},
		{"L", "t", "i", `"\u003c"`, `"<"`, math.MinInt64 / 2, 6, math.Copysign(0, -1), "", 0, "", "", `{"a":[1,{"b":null}]}`},
		{"L", "t", "i", `{"k":"v\"}"}`, `{"k":"\\"}`, 1, 8, 123456789.123456789, "USD", 0, "", "", "\"\xe2\x80\xa8\""},
		{"L", "t", "i", "", "", 1, 9, 5e-324, "VND", 0, "", "", `null`},
		{"L", "t", "", `{"a":1}`, "", 1, 0, 1, "VND", 0, "", "", `1`},
		{"L", "", "", `["\"", "x"]`, `{"a":"\\"}`, 1, 0, 1, "", 0, "", "", `"\\"`},
	} {
		f.Add(s.loyaltyID, s.txID, s.item, []byte(s.des), []byte(s.extra), s.date, s.format, s.amount, s.currency,
			s.used, s.sign, s.redDes, []byte(s.redDate))
	}
	f.Fuzz(func(t *testing.T, loyaltyID, txID, item string, des, extra []byte, date int64, format uint8, amount float64,
		currency string, used int64, sign, redDes string, redDate []byte) {
		df := fuzzDateFormats[int(format)%len(fuzzDateFormats)]
		accrual := AccrualRequest{LoyaltyID: loyaltyID, TransactionID: txID, ItemID: item, TransactionDes: des,
			TransactionDate:   TransactionDate{Time: time.UnixMilli(date), Format: df.format, Type: df.typ},
			TransactionAmount: amount, TransactionCurrency: currency, ExtraData: extra}
		got, err := encodeBody(accrual)
		sameAsMarshal(t, accrual, got, err)
		lookup := LookupRequest{LoyaltyID: loyaltyID, BitReference: item, TransactionID: txID}
		got, err = encodeBody(lookup)
		sameAsMarshal(t, lookup, got, err)
		redemption := redemptionBody{RedemptionRequest: RedemptionRequest{TransactionID: txID, TransactionDes: redDes,
			TransactionDate: item, TransactionAmount: amount, LoyaltyID: loyaltyID, UsedPoint: used, Sign: sign},
			TransactionDate: redDate}
		got, err = marshalRedemption(redemption)
		sameAsMarshal(t, redemption, got, err)
		for _, raw := range [][]byte{des, extra, redDate} {
			got, err = encodeBody(json.RawMessage(raw))
			sameAsMarshal(t, json.RawMessage(raw), got, err)
		}
	})
}

// sameAsMarshal fails t unless got and err are json.Marshal(v)'s.
func sameAsMarshal(t *testing.T, v any, got []byte, err error) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	switch {
	case (err == nil) != (wantErr == nil), err != nil && err.Error() != wantErr.Error():
		t.Fatalf("%T %+v: error %v, json.Marshal's %v", v, v, err, wantErr)
	case !bytes.Equal(got, want):
		t.Fatalf("%T %+v:\nappended:     %s\njson.Marshal: %s", v, v, got, want)
	}
}

// TestEncodeBodyAppendsCommonBodies: the bodies the bridge sends on its
// hot path are appended, not left to json.Marshal (so that the fast path
// cannot decline everything unnoticed), and equal json.Marshal's.
func TestEncodeBodyAppendsCommonBodies(t *testing.T) {
	at := time.UnixMilli(1764320000123)
	accruals := []AccrualRequest{
		// The bench's purchase (benchkit.Scenario.Event).
		{LoyaltyID: "LB00000001", TransactionID: "bench-1", ItemID: "SKU-42",
			TransactionDes:    json.RawMessage(`{"channel":"bench","sku":"SKU-42","qty":1}`),
			TransactionDate:   TransactionDate{Time: at, Format: DateEpochMillis, Type: partnerprofile.DateNumber},
			TransactionAmount: 250000, TransactionCurrency: "VND"},
		{LoyaltyID: "LB00000001", TransactionID: "tx-2", ItemID: "Cà phê sữa đá",
			TransactionDes:    json.RawMessage(`{"note":"Cà phê \"sữa\" đá, 2 ly","items":[{"qty":2,"price":29000.5}]}`),
			ExtraData:         json.RawMessage(`{"store":"HN-01"}`),
			TransactionDate:   TransactionDate{Time: at, Format: DateISO8601, Type: partnerprofile.DateString},
			TransactionAmount: 58001, TransactionCurrency: "VND"},
	}
	for _, r := range accruals {
		got, ok := appendBody(r)
		if !ok {
			t.Fatalf("appendBody declined %+v", r)
		}
		sameAsMarshal(t, r, got, nil)
	}
	red := redemptionBody{RedemptionRequest: RedemptionRequest{TransactionID: "tx-3", TransactionDes: "Đổi điểm <quà>",
		TransactionAmount: 1000, LoyaltyID: "LB00000001", UsedPoint: 7, Sign: "h.p.s"},
		TransactionDate: partnerprofile.Profile{}.RedemptionDateEncoding().JSON(at)}
	got, ok := appendRedemption(nil, red)
	if !ok {
		t.Fatalf("appendRedemption declined %+v", red)
	}
	sameAsMarshal(t, red, got, nil)
	if !strings.Contains(string(got), `"transactionDes":"Đổi điểm \u003cquà\u003e"`) {
		t.Fatalf("redemption body %s: want its < and > escaped as json.Marshal does", got)
	}
	if _, ok := appendBody(json.RawMessage(got)); !ok {
		t.Fatalf("the redemption body %s is not given to the call as it is", got)
	}
	lookup := LookupRequest{LoyaltyID: "LB00000001", TransactionID: "tx-1"}
	got, ok = appendBody(lookup)
	if !ok {
		t.Fatalf("appendBody declined %+v", lookup)
	}
	sameAsMarshal(t, lookup, got, nil)
}

// TestAppendFloatAsMarshal: at the edges of json.Marshal's two formats
// (exponent below 1e-6 and from 1e21 on; 1e-6 itself is written
// 0.000001) and its exponent without padding, appendFloat writes the same
// text.
func TestAppendFloatAsMarshal(t *testing.T) {
	for _, f := range []float64{0, 1e-6, -1e-6, 1e-7, 9.99e-7, 1.5e-6, 1e20, 1e21, -1e21, 9.999e20, 1e-100, 1e100, 0.5, 58001.25} {
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendFloat(nil, f)
		if !ok || string(got) != string(want) {
			t.Errorf("appendFloat(%g) = %q, %v; json.Marshal: %q", f, got, ok, want)
		}
	}
}

// TestEncodeBodyWritesEveryField: with every field of the bodies set (by
// reflection, so a field added to a request type is set too), the
// appended body is json.Marshal's. A field the append functions do not
// know would be missing from their body and fail here, not go unsent.
func TestEncodeBodyWritesEveryField(t *testing.T) {
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Field(i)
			if !v.Type().Field(i).IsExported() {
				continue
			}
			switch {
			case f.Kind() == reflect.String:
				f.SetString("v-" + v.Type().Field(i).Name)
			case f.Kind() == reflect.Float64:
				f.SetFloat(1.25)
			case f.Kind() == reflect.Int64 || f.Kind() == reflect.Int:
				f.SetInt(7)
			case f.Type() == reflect.TypeFor[json.RawMessage]():
				f.SetBytes([]byte(`{"k":1}`))
			case f.Type() == reflect.TypeFor[TransactionDate]():
				f.Set(reflect.ValueOf(TransactionDate{Time: time.UnixMilli(1764320000123), Format: DateEpochMillis, Type: partnerprofile.DateNumber}))
			case f.Kind() == reflect.Struct:
				fill(f)
			default:
				t.Fatalf("%s.%s: a %s this test does not fill; teach it, and the append functions", v.Type(), v.Type().Field(i).Name, f.Type())
			}
		}
	}
	var accrual AccrualRequest
	fill(reflect.ValueOf(&accrual).Elem())
	var lookup LookupRequest
	fill(reflect.ValueOf(&lookup).Elem())
	for _, body := range []any{accrual, lookup} {
		got, ok := appendBody(body)
		if !ok {
			t.Fatalf("appendBody declined %+v", body)
		}
		sameAsMarshal(t, body, got, nil)
	}
	var red redemptionBody
	fill(reflect.ValueOf(&red).Elem())
	red.TransactionDate = json.RawMessage(`"20261128"`)
	got, ok := appendRedemption(nil, red)
	if !ok {
		t.Fatalf("appendRedemption declined %+v", red)
	}
	sameAsMarshal(t, red, got, nil)
}
