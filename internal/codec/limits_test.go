package codec_test

import (
	"context"
	"errors"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
)

// A value above MaxValueBytes is refused before any decoding, with a kind
// the bridge turns into a DECODE error event.
func TestMaxValueBytes(t *testing.T) {
	_, cl, _ := newRegistry(t)
	if _, err := codec.New(context.Background(), codec.Options{Registry: cl, Register: true}); err != nil {
		t.Fatal(err)
	}
	c, err := codec.New(context.Background(), codec.Options{Registry: cl, MaxValueBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 65) // magic byte 0, then a body a real decoder would try
	_, err = c.Decode(context.Background(), codec.DefaultPurchaseTopic, big)
	var de *codec.DecodeError
	if !errors.As(err, &de) || de.Kind != codec.KindTooLarge {
		t.Fatalf("got %v, want a TOO_LARGE decode error", err)
	}
	// At the limit it is decoded (and fails on content, not size).
	_, err = c.Decode(context.Background(), codec.DefaultPurchaseTopic, big[:64])
	if errors.As(err, &de) && de.Kind == codec.KindTooLarge {
		t.Fatal("a value at the limit is refused")
	}
}
