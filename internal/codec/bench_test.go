package codec_test

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkCodec measures the per-record path of every type. The registry
// request counter proves that path makes no registry call.
func BenchmarkCodec(b *testing.B) {
	cl, reg := newRegistry(b)
	c := newCodec(b, cl)
	ctx := context.Background()
	for _, s := range samples() {
		name := fmt.Sprintf("%T", s.value)[len("*events."):]
		enc, err := encodeAny(c, s.topic, s.value)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Decode(ctx, s.topic, enc); err != nil { // warm the plan cache
			b.Fatal(err)
		}
		before := reg.requests.Load()
		b.Run("Encode/"+name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if _, err := encodeAny(c, s.topic, s.value); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Decode/"+name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if _, err := c.Decode(ctx, s.topic, enc); err != nil {
					b.Fatal(err)
				}
			}
		})
		if n := reg.requests.Load() - before; n != 0 {
			b.Fatalf("%s: %d registry requests while encoding and decoding", name, n)
		}
	}
}
