package codec_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// A value above MaxValueBytes is refused before any decoding, with a kind
// the bridge turns into a DECODE error event.
func TestMaxValueBytes(t *testing.T) {
	cl, _ := newRegistry(t)
	newCodec(t, cl)
	c, err := codec.New(context.Background(), codec.Options{Registry: cl, Topics: topics, MaxValueBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 65) // magic byte 0, then a body a real decoder would try
	_, err = c.Decode(context.Background(), topics.Purchase, big)
	var de *codec.DecodeError
	if !errors.As(err, &de) || de.Kind != codec.KindTooLarge {
		t.Fatalf("got %v, want a TOO_LARGE decode error", err)
	}
	// At the limit it is decoded (and fails on content, not size).
	_, err = c.Decode(context.Background(), topics.Purchase, big[:64])
	if errors.As(err, &de) && de.Kind == codec.KindTooLarge {
		t.Fatal("a value at the limit is refused")
	}
}

// An upstream writer may add an array or map field in a compatible
// evolution; hamba/avro then skips its items in a loop that goes on past
// the end of the value (before these checks, a 20-byte value declaring
// 2^40 items did not finish in ten minutes). A block declaring more items
// than bytes remain is MALFORMED at once, a writer schema whose array items
// take no bytes is INCOMPATIBLE, and real arrays and maps still decode.
func TestBlockCountsBounded(t *testing.T) {
	cl, _ := newRegistry(t)
	c := newCodec(t, cl)
	for name, tc := range map[string]struct {
		junk string           // the extra field's type
		kind codec.DecodeKind // for a value declaring 2^40 items
		real any              // a real value of the field, which must decode
	}{
		"array of null":            {`{"type":"array","items":"null"}`, codec.KindIncompatible, nil},
		"array of fixed(0)":        {`{"type":"array","items":{"type":"fixed","name":"Nothing","size":0}}`, codec.KindIncompatible, nil},
		"array of empty records":   {`{"type":"array","items":{"type":"record","name":"Empty","fields":[]}}`, codec.KindIncompatible, nil},
		"array of records of null": {`{"type":"array","items":{"type":"record","name":"Nulls","fields":[{"name":"a","type":"null"}]}}`, codec.KindIncompatible, nil},
		"array of long":            {`{"type":"array","items":"long"}`, codec.KindMalformed, []any{int64(1), int64(2)}},
		"array of unions":          {`{"type":"array","items":["null","long"]}`, codec.KindMalformed, []any{nil, int64(7)}},
		"map of string":            {`{"type":"map","values":"string"}`, codec.KindMalformed, map[string]any{"a": "b"}},
		"nested arrays":            {`{"type":"array","items":{"type":"array","items":"int"}}`, codec.KindMalformed, []any{[]any{1, 2}, []any{}}},
	} {
		t.Run(name, func(t *testing.T) {
			schema := `{"type":"record","name":"PurchaseCompleted","namespace":"com.loyaltybridge.events","fields":[
 {"name":"junk","type":` + tc.junk + `},
 {"name":"transactionId","type":"string"},{"name":"loyaltyId","type":"string"},
 {"name":"transactionDate","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"amount","type":"double"}]}`
			id := register(t, cl, "upstream-"+strings.ReplaceAll(name, " ", "-"), schema)
			tail := []byte{2, 't', 2, 'l', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
			for _, count := range []int64{1 << 40, -(1 << 40)} {
				b := []byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
				b = binary.AppendVarint(b, count)
				if count < 0 {
					b = binary.AppendVarint(b, 1) // the block's size in bytes
				}
				b = binary.AppendVarint(b, 0) // end of the array
				b = append(b, tail...)
				start := time.Now()
				_, err := c.Decode(context.Background(), topics.Purchase, b)
				var de *codec.DecodeError
				if !errors.As(err, &de) || de.Kind != tc.kind {
					t.Errorf("count %d: got %v, want %s", count, err, tc.kind)
				}
				if took := time.Since(start); took > 5*time.Second {
					t.Errorf("count %d: decode took %v", count, took)
				}
			}
			if tc.real == nil {
				return
			}
			v := wire(t, id, schema, map[string]any{"junk": tc.real, "transactionId": "t", "loyaltyId": "l",
				"transactionDate": time.UnixMilli(1763805600123), "amount": 1.5})
			got, err := c.Decode(context.Background(), topics.Purchase, v)
			if err != nil {
				t.Fatalf("a real value: %v", err)
			}
			if p, ok := got.(*events.PurchaseCompleted); !ok || p.TransactionID != "t" || p.Amount != 1.5 {
				t.Errorf("a real value decoded as %+v", got)
			}
		})
	}
}

// hamba/avro skips a block that carries its size in bytes by that size,
// without reading its items, so the scan before it must refuse a size
// other than the items': the decoder would read the next block header
// where the scan did not check one (FuzzDecode found a 60-byte value that
// kept it skipping items past the value's end for 4.6 s; the value is in
// its corpus). A right size still decodes.
func TestBlockSizeMatchesItems(t *testing.T) {
	cl, _ := newRegistry(t)
	c := newCodec(t, cl)
	for _, tc := range []struct {
		name, junk string
		block      []byte // the junk field's encoding (zig-zag counts and sizes)
		want       codec.DecodeKind
	}{
		{"array, size short of the items", `{"type":"array","items":"long"}`, []byte{3, 2, 2, 4, 0}, codec.KindMalformed},
		{"array, size past the items", `{"type":"array","items":"long"}`, []byte{3, 6, 2, 4, 0, 0}, codec.KindMalformed},
		{"map, size short of the entries", `{"type":"map","values":"long"}`, []byte{1, 4, 2, 'k', 4, 0}, codec.KindMalformed},
		{"array, right size", `{"type":"array","items":"long"}`, []byte{3, 4, 2, 4, 0}, ""},
		{"map, right size", `{"type":"map","values":"long"}`, []byte{1, 6, 2, 'k', 4, 0}, ""},
		{"array, count without size", `{"type":"array","items":"long"}`, []byte{4, 2, 4, 0}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema := `{"type":"record","name":"PurchaseCompleted","namespace":"com.loyaltybridge.events","fields":[
 {"name":"junk","type":` + tc.junk + `},
 {"name":"transactionId","type":"string"},{"name":"loyaltyId","type":"string"},
 {"name":"transactionDate","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"amount","type":"double"}]}`
			id := register(t, cl, "upstream-size-"+strings.ReplaceAll(tc.name, " ", "-"), schema)
			b := append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, tc.block...)
			b = append(b, 2, 't', 2, 'l', 0, 0, 0, 0, 0, 0, 0, 0, 0) // the date, the amount
			got, err := c.Decode(context.Background(), topics.Purchase, b)
			if tc.want == "" {
				if p, ok := got.(*events.PurchaseCompleted); err != nil || !ok || p.TransactionID != "t" {
					t.Fatalf("got %+v, %v; want the purchase", got, err)
				}
				return
			}
			var de *codec.DecodeError
			if !errors.As(err, &de) || de.Kind != tc.want {
				t.Fatalf("got %+v, %v; want %s", got, err, tc.want)
			}
		})
	}
}
