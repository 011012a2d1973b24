package codec_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// fuzzTopics are indexed by the fuzzer's first argument.
var fuzzTopics = []string{
	topics.Purchase, topics.RefundRedemption, topics.MemberOnboarding,
	topics.ResultTopic(topics.Purchase), topics.ErrorTopic(topics.Purchase),
}

// fuzzSeeds are valid records of every type on their topic (and on the
// wrong one), plus a foreign writer's union, cut and extended.
type fuzzSeed struct {
	topic uint8
	value []byte
}

func fuzzSeeds(t testing.TB, c *codec.Codec, foreign []byte, evolved ...[]byte) []fuzzSeed {
	var seeds []fuzzSeed
	add := func(topic string, b []byte) {
		for i, tp := range fuzzTopics {
			if tp == topic {
				seeds = append(seeds, fuzzSeed{uint8(i), b})
			}
		}
	}
	for _, s := range samples() {
		b, err := encodeAny(c, s.topic, s.value)
		if err != nil {
			t.Fatal(err)
		}
		add(s.topic, b)
		add(topics.Purchase, b)
		add(s.topic, b[:len(b)/2])
		add(s.topic, append(append([]byte(nil), b...), 0x02))
	}
	add(topics.RefundRedemption, foreign)
	add(topics.Purchase, []byte{0, 0, 0, 0, 1})
	add(topics.Purchase, []byte{})
	for _, b := range evolved {
		add(topics.Purchase, b)
		add(topics.Purchase, b[:len(b)*2/3])
	}
	return seeds
}

// evolvedPurchase is an upstream PurchaseCompleted with arrays and maps
// the bridge does not read: decoding skips them, within bounds.
const evolvedPurchase = `{"type":"record","name":"PurchaseCompleted","namespace":"com.loyaltybridge.events","fields":[
 {"name":"transactionId","type":"string"},{"name":"loyaltyId","type":"string"},
 {"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
  {"name":"sku","type":"string"},{"name":"qty","type":"int"},{"name":"tags","type":{"type":"map","values":["null","string"]}}]}}},
 {"name":"transactionDate","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"amount","type":"double"},{"name":"codes","type":{"type":"array","items":{"type":"array","items":"long"}}}]}`

// evolvedSeeds registers evolvedPurchase and returns values of it.
func evolvedSeeds(t testing.TB, cl *sr.Client) [][]byte {
	id := register(t, cl, "upstream-evolved", evolvedPurchase)
	line := func(sku string, qty int, tags map[string]any) map[string]any {
		return map[string]any{"sku": sku, "qty": qty, "tags": tags}
	}
	return [][]byte{
		wire(t, id, evolvedPurchase, map[string]any{"transactionId": "T-9", "loyaltyId": "L-9",
			"lines":           []any{line("A", 1, map[string]any{"c": "red", "n": nil}), line("B", 3, map[string]any{})},
			"transactionDate": when, "amount": 12.5, "codes": []any{[]any{int64(1), int64(2)}, []any{}}}),
		wire(t, id, evolvedPurchase, map[string]any{"transactionId": "T-10", "loyaltyId": "L-10", "lines": []any{},
			"transactionDate": when, "amount": 0.0, "codes": []any{}}),
	}
}

// checkValidation runs an input event's validation, which the bridge does
// right after decoding: it never panics, and its message names fields but
// never carries their values (several are personal data).
func checkValidation(t *testing.T, v any) {
	ev, ok := v.(events.Event)
	if !ok {
		return
	}
	err := ev.Validate()
	if err == nil {
		return
	}
	msg := err.Error()
	rv := reflect.ValueOf(ev).Elem()
	for i := range rv.NumField() {
		f := rv.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			f = f.Elem()
		}
		if f.Kind() == reflect.String && len(f.String()) >= 12 && strings.Contains(msg, f.String()) {
			t.Fatalf("validation error carries the value of %s: %s", rv.Type().Field(i).Name, msg)
		}
	}
}

// FuzzDecode runs on srfake: the committed corpus holds srfake's ids.
func FuzzDecode(f *testing.F) {
	cl, _ := newFakeRegistry(f)
	c := newCodec(f, cl)
	id := register(f, cl, "upstream", newRefundRedemption)
	foreign := wire(f, id, newRefundRedemption, map[string]any{"com.loyaltybridge.events.PurchaseRefunded": map[string]any{
		"refundId": "R-1", "originalTransactionId": "T-1", "loyaltyId": "L-1", "refundAmount": 1.5, "refundDate": when,
		"reason": nil}})
	for _, s := range fuzzSeeds(f, c, foreign, evolvedSeeds(f, cl)...) {
		f.Add(s.topic, s.value)
	}
	f.Fuzz(func(t *testing.T, ti uint8, value []byte) {
		topic := fuzzTopics[int(ti)%len(fuzzTopics)]
		v, err := c.Decode(context.Background(), topic, value)
		if err != nil {
			var de *codec.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("non-DecodeError for bad data: %v", err)
			}
			if strings.Contains(de.Detail, "panic") {
				t.Fatalf("decoder panicked: %v", err)
			}
			return
		}
		checkValidation(t, v)
		// Whatever decodes re-encodes, and the re-encoding is stable.
		b1, err := encodeAny(c, topic, v)
		if err != nil {
			t.Fatalf("re-encode %T: %v", v, err)
		}
		v2, err := c.Decode(context.Background(), topic, b1)
		if err != nil {
			t.Fatalf("decode of re-encoding: %v", err)
		}
		b2, err := encodeAny(c, topic, v2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("unstable re-encoding: %v\n% x\n% x", err, b1, b2)
		}
	})
}

// TestWriteFuzzCorpus regenerates testdata/fuzz/FuzzDecode from fuzzSeeds
// when LOYALTY_BRIDGE_WRITE_CORPUS=1; the files are committed so that a
// plain `go test` replays them.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("LOYALTY_BRIDGE_WRITE_CORPUS") != "1" {
		t.Skip("set LOYALTY_BRIDGE_WRITE_CORPUS=1 to regenerate the seed corpus")
	}
	cl, _ := newFakeRegistry(t)
	c := newCodec(t, cl)
	id := register(t, cl, "upstream", newRefundRedemption)
	foreign := wire(t, id, newRefundRedemption, map[string]any{"com.loyaltybridge.events.PurchaseRefunded": map[string]any{
		"refundId": "R-1", "originalTransactionId": "T-1", "loyaltyId": "L-1", "refundAmount": 1.5, "refundDate": when,
		"reason": nil}})
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range fuzzSeeds(t, c, foreign, evolvedSeeds(t, cl)...) {
		body := fmt.Sprintf("go test fuzz v1\nbyte(%q)\n[]byte(%q)\n", rune(s.topic), s.value)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
