package parking_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/parking"
)

func TestBackoffDoublesToItsCap(t *testing.T) {
	for _, tc := range []struct {
		first time.Duration
		tries int
		want  time.Duration
	}{
		{10 * time.Second, 1, 10 * time.Second}, {10 * time.Second, 2, 20 * time.Second}, {10 * time.Second, 4, 80 * time.Second},
		{10 * time.Second, 5, parking.MaxBackoff}, {10 * time.Second, 1000, parking.MaxBackoff}, {5 * time.Minute, 3, 5 * time.Minute},
	} {
		if got := parking.Backoff(tc.first, tc.tries); got != tc.want {
			t.Errorf("Backoff(%s, %d) = %s, want %s", tc.first, tc.tries, got, tc.want)
		}
	}
}

// Park and Parse agree, and an input's own parked-* headers never choose
// the parked record's position.
func TestParkThenParse(t *testing.T) {
	first := time.Date(2026, 11, 24, 9, 0, 0, 123e6, time.UTC)
	orig := &kgo.Record{Topic: "refunds", Partition: 3, Offset: 77, Timestamp: first.Add(-time.Second), Key: []byte("LB1"),
		Value: []byte("v"), Headers: []kgo.RecordHeader{{Key: "correlation-id", Value: []byte("c")},
			{Key: parking.HeaderSourceOffset, Value: []byte("1")}}}
	rec := parking.Park("g.parked", orig, first, first.Add(10*time.Second), 2)
	p, err := parking.Parse(rec, "refunds")
	if err != nil {
		t.Fatal(err)
	}
	o := p.Original
	if o.Topic != "refunds" || o.Partition != 3 || o.Offset != 77 || !o.Timestamp.Equal(orig.Timestamp) || string(o.Key) != "LB1" ||
		string(o.Value) != "v" || len(o.Headers) != 1 || o.Headers[0].Key != "correlation-id" {
		t.Errorf("original %+v", o)
	}
	if !p.First.Equal(first) || !p.Due.Equal(first.Add(10*time.Second)) || p.Tries != 2 {
		t.Errorf("first %s due %s tries %d", p.First, p.Due, p.Tries)
	}
	if _, err := parking.Parse(rec, "other"); !parking.IsHeaderError(err) {
		t.Errorf("a source topic not parked: %v", err)
	}
	for _, h := range []struct{ k, v string }{{parking.HeaderTries, "0"}, {parking.HeaderTries, "-1"}, {parking.HeaderDue, "soon"},
		{parking.HeaderSourcePartition, "99999999999"}, {parking.HeaderSourceTopic, strings.Repeat("t", 300)}, {parking.HeaderFirst, ""}} {
		bad := &kgo.Record{Key: rec.Key, Value: rec.Value}
		for _, x := range rec.Headers {
			if x.Key == h.k {
				x.Value = []byte(h.v)
			}
			bad.Headers = append(bad.Headers, x)
		}
		if _, err := parking.Parse(bad, "refunds"); !parking.IsHeaderError(err) {
			t.Errorf("%s=%.20q: %v, want a header error", h.k, h.v, err)
		}
	}
	dup := &kgo.Record{Headers: append(append([]kgo.RecordHeader(nil), rec.Headers...), kgo.RecordHeader{Key: parking.HeaderTries, Value: []byte("1")})}
	if _, err := parking.Parse(dup, "refunds"); !parking.IsHeaderError(err) {
		t.Errorf("a repeated header: %v", err)
	}
}
