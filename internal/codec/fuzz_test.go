package codec_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
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

func fuzzSeeds(t testing.TB, c *codec.Codec, foreign []byte) []fuzzSeed {
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
	return seeds
}

func FuzzDecode(f *testing.F) {
	reg, cl, _ := newRegistry(f)
	c := newCodec(f, cl)
	id := register(f, reg, "upstream-value", newRefundRedemption)
	foreign := wire(f, id, newRefundRedemption, map[string]any{"com.loyaltybridge.events.PurchaseRefunded": map[string]any{
		"refundId": "R-1", "originalTransactionId": "T-1", "loyaltyId": "L-1", "refundAmount": 1.5, "refundDate": when,
		"reason": nil}})
	for _, s := range fuzzSeeds(f, c, foreign) {
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
	reg, cl, _ := newRegistry(t)
	c := newCodec(t, cl)
	id := register(t, reg, "upstream-value", newRefundRedemption)
	foreign := wire(t, id, newRefundRedemption, map[string]any{"com.loyaltybridge.events.PurchaseRefunded": map[string]any{
		"refundId": "R-1", "originalTransactionId": "T-1", "loyaltyId": "L-1", "refundAmount": 1.5, "refundDate": when,
		"reason": nil}})
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range fuzzSeeds(t, c, foreign) {
		body := fmt.Sprintf("go test fuzz v1\nbyte(%q)\n[]byte(%q)\n", rune(s.topic), s.value)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
