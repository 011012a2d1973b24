package bridge

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/parking"
)

// A parked record is refused only when it is over MaxOutputBytes: one of
// exactly MaxOutputBytes, headers included, is parked. (Internal: the
// size is the bridge's own estimate, recordBytes.)
func TestParkedRecordOfExactlyTheLimitIsParked(t *testing.T) {
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	orig := &kgo.Record{Topic: "loyalty.refund-redemption", Partition: 1, Offset: 7, Key: []byte("L-1"), Value: []byte("refund value")}
	const wait, backoff = time.Minute, time.Second
	want := parking.Park("p.parked", orig, now, now.Add(parking.Backoff(backoff, 1)), 1)
	b := &Bridge{o: Options{ParkedTopic: "p.parked", OriginalWait: wait, ParkBackoff: backoff, MaxOutputBytes: recordBytes(want)},
		log: zap.NewNop(), now: func() time.Time { return now }}
	j := &job{rec: orig, st: recordState{id: "R-1"}}
	out, err := b.park(j, errors.New("original not found"))
	if err != nil || len(out) != 1 || out[0].Topic != "p.parked" || recordBytes(out[0]) != b.o.MaxOutputBytes {
		t.Fatalf("got %d records (%v), want the parked record of exactly MaxOutputBytes (%d)", len(out), err, b.o.MaxOutputBytes)
	}
}
