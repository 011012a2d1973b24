package bridge_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
)

const validTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// Input headers are the writer's bytes: only a W3C traceparent and a short
// printable correlation-id are copied; the rest is dropped and named.
func TestCarriedHeaders(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(nil)
	pt := topics.Purchase
	h := func(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
	for _, c := range []struct {
		name          string
		headers       []kgo.RecordHeader
		corr, trace   string
		droppedHeader string
	}{
		{"valid", []kgo.RecordHeader{h("correlation-id", "order-17"), h("traceparent", validTrace)}, "order-17", validTrace, ""},
		{"traceparent too long", []kgo.RecordHeader{h("traceparent", validTrace+"-extra")}, "", "", "traceparent"},
		{"traceparent upper case", []kgo.RecordHeader{h("traceparent", strings.ToUpper(validTrace))}, "", "", "traceparent"},
		{"traceparent version ff", []kgo.RecordHeader{h("traceparent", "ff"+validTrace[2:])}, "", "", "traceparent"},
		{"traceparent zero trace id", []kgo.RecordHeader{h("traceparent", "00-"+strings.Repeat("0", 32)+validTrace[35:])}, "", "", "traceparent"},
		{"correlation-id 129 bytes", []kgo.RecordHeader{h("correlation-id", strings.Repeat("c", 129))}, "", "", "correlation-id"},
		{"correlation-id 128 bytes", []kgo.RecordHeader{h("correlation-id", strings.Repeat("c", 128))}, strings.Repeat("c", 128), "", ""},
		{"correlation-id control byte", []kgo.RecordHeader{h("correlation-id", "a\nb")}, "", "", "correlation-id"},
		{"repeated", []kgo.RecordHeader{h("correlation-id", "one"), h("correlation-id", "two")}, "one", "", "correlation-id"},
		{"both bad", []kgo.RecordHeader{h("correlation-id", strings.Repeat("c", 300_000)), h("traceparent", strings.Repeat("t", 300_000))},
			"", "", "correlation-id,traceparent"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ok := s.handle(b, s.record(pt, purchase("h-"+c.name, 1, 1000), c.headers...), false)
			bad := s.handle(b, s.record(pt, purchase("hb-"+c.name, 1, -1), c.headers...), false)
			for _, r := range []reply{ok, bad} {
				if r.header("correlation-id") != c.corr || r.header("traceparent") != c.trace || r.header("dropped-headers") != c.droppedHeader {
					t.Errorf("%s: headers %q", r.outcome(), r.rec.Headers)
				}
			}
			if ok.result == nil || bad.err == nil {
				t.Fatalf("outcomes %s, %s", ok.outcome(), bad.outcome())
			}
			if c.droppedHeader != "" && !strings.Contains(bad.err.Detail, "input headers not copied: ") {
				t.Errorf("error event does not say what it dropped: %q", bad.err.Detail)
			}
		})
	}
}

// No input, whatever its size or headers, makes an output over the
// producer's limit; and an output Kafka refuses as too large is answered by
// the smallest error event.
func TestOutputsFitTheMessageLimit(t *testing.T) {
	s := newStack(t, stackOpts{})
	pt := topics.Purchase
	big := func(n int) kgo.RecordHeader {
		return kgo.RecordHeader{Key: "correlation-id", Value: []byte(strings.Repeat("x", n))}
	}
	desc := strings.Repeat("d", 490<<10)
	ev := purchase("huge-1", 1, -1) // invalid: an error event
	ev.Description = &desc

	// The reproduction: a 490 KiB value and two 262 KiB headers.
	b := s.bridge(func(o *bridge.Options) { o.IncludeOriginal = true })
	rec := s.record(pt, ev, big(262<<10), kgo.RecordHeader{Key: "traceparent", Value: []byte(strings.Repeat("t", 262<<10))})
	r := s.handle(b, rec, false)
	if r.err == nil || r.err.OriginalValue == nil || r.header("dropped-headers") != "correlation-id,traceparent" {
		t.Fatalf("%s, original %d bytes, headers dropped %q", r.outcome(), len(r.err.OriginalValue), r.header("dropped-headers"))
	}
	if n := size(r.rec); n > bridge.DefaultMaxOutputBytes {
		t.Errorf("error event of %d bytes", n)
	}

	// A limit the original does not fit under: the event leaves it out.
	small := s.bridge(func(o *bridge.Options) { o.IncludeOriginal = true; o.MaxOutputBytes = 64 << 10 })
	r = s.handle(small, rec, false)
	if r.err == nil || r.err.OriginalValue != nil || !strings.Contains(r.err.Detail, "original not carried") || size(r.rec) > 64<<10 {
		t.Fatalf("%s, original %d bytes, %d bytes in all: %q", r.outcome(), len(r.err.OriginalValue), size(r.rec), r.err.Detail)
	}

	// An over-long transactionId does not become the key.
	long := purchase(strings.Repeat("i", 100_000), 1, 1000)
	r = s.handle(b, s.record(pt, long), false)
	if r.err == nil || string(r.rec.Key) != pt+"/1/42" || !strings.Contains(r.err.Detail, "keyed by source position") {
		t.Fatalf("%s key %.40q", r.outcome(), r.rec.Key)
	}

	// Kafka refused the output as too large: the fallback carries neither
	// the original nor the copied headers.
	valid := s.record(pt, ev, kgo.RecordHeader{Key: "correlation-id", Value: []byte("c-1")})
	cause := fmt.Errorf("%w: %w", pipeline.ErrProduce, kerr.MessageTooLarge)
	out, err := b.Fallback(valid, cause)
	if err != nil || len(out) != 1 {
		t.Fatalf("Fallback: %d outputs, %v", len(out), err)
	}
	r = s.decode(out[0])
	if r.outcome() != "error INTERNAL OUTPUT_TOO_LARGE" || r.err.OriginalValue != nil || r.header("correlation-id") != "" ||
		string(r.rec.Key) != "huge-1" || size(r.rec) > 4<<10 {
		t.Fatalf("fallback: %s key %s, original %d bytes, headers %q", r.outcome(), r.rec.Key, len(r.err.OriginalValue), r.rec.Headers)
	}
}

func size(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// The security review's record: an invalid purchase carrying 40,000 empty
// correlation-id headers (640 KB, under Kafka's default limit). Every
// dropped header was a line of the error event's detail, appended with +=:
// 48 s of CPU, an event over the message limit, a fallback that built it
// again and failed the same way, and a pipeline stopped on the record for
// every replica that took the partition. Now the detail names the first
// few and counts the rest, and the event fits whatever the flood.
func TestHeaderFlood(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(func(o *bridge.Options) { o.IncludeOriginal = true })
	pt := topics.Purchase
	flood := func(n int, keys ...string) []kgo.RecordHeader {
		h := make([]kgo.RecordHeader, n)
		for i := range h {
			h[i] = kgo.RecordHeader{Key: keys[i%len(keys)]}
		}
		return h
	}
	for _, c := range []struct {
		name    string
		headers []kgo.RecordHeader
		dropped string
		more    string
	}{
		{"40,000 empty correlation-ids", flood(40_000, "correlation-id"), "correlation-id", "and 39996 more"},
		{"both names, 20,000 each", flood(40_000, "traceparent", "correlation-id"), "traceparent,correlation-id", "and 39996 more"},
		{"5 repeats", flood(5, "correlation-id"), "correlation-id", "and 1 more"},
		{"4 repeats", flood(4, "correlation-id"), "correlation-id", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := s.handle(b, s.record(pt, purchase("flood-bad", 1, -1), c.headers...), false)
			if bad.err == nil || bad.err.Category != "VALIDATION" {
				t.Fatalf("invalid purchase: %s", bad.outcome())
			}
			if n := len(bad.err.Detail); n > bridge.MaxDetailBytes {
				t.Errorf("detail of %d bytes, over %d", n, bridge.MaxDetailBytes)
			}
			if got := strings.Count(bad.err.Detail, "(empty)") + strings.Count(bad.err.Detail, "(repeated)") +
				strings.Count(bad.err.Detail, "not a W3C traceparent"); got != min(len(c.headers), 4) {
				t.Errorf("detail names %d dropped headers, want %d: %q", got, min(len(c.headers), 4), bad.err.Detail)
			}
			if c.more != "" && !strings.Contains(bad.err.Detail, c.more) {
				t.Errorf("detail does not count the rest (%q): %q", c.more, bad.err.Detail)
			}
			if c.more == "" && strings.Contains(bad.err.Detail, "more") {
				t.Errorf("detail counts more than there are: %q", bad.err.Detail)
			}
			ok := s.handle(b, s.record(pt, purchase("flood-ok-"+c.name, 1, 1000), c.headers...), false)
			if ok.result == nil {
				t.Fatalf("valid purchase: %s", ok.outcome())
			}
			for _, r := range []reply{bad, ok} {
				if r.header("dropped-headers") != c.dropped || r.header("correlation-id") != "" {
					t.Errorf("%s: dropped-headers %q, correlation-id %q", r.outcome(), r.header("dropped-headers"), r.header("correlation-id"))
				}
				if n := size(r.rec); n > bridge.DefaultMaxOutputBytes {
					t.Errorf("%s: %d bytes", r.outcome(), n)
				}
			}
		})
	}
}
