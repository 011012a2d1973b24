package bridge

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// MaxCorrelationIDBytes bounds the correlation-id header an output copies
// from its input.
const MaxCorrelationIDBytes = 128

// traceparentRE is the W3C Trace Context traceparent: version, trace-id,
// parent-id and flags in lower-case hex, 55 bytes in all.
var traceparentRE = regexp.MustCompile(`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

// dropped is an input header an output does not copy, and why.
type dropped struct{ name, why string }

func (d dropped) String() string { return d.name + " (" + d.why + ")" }

// maxDropsNamed bounds the dropped headers an error event's detail names one
// by one. A record may carry tens of thousands of headers: naming each made
// the detail, and the event, grow with them.
const maxDropsNamed = 4

// drops are the input headers an output does not copy: the first
// maxDropsNamed with their reasons, the distinct names of all of them, and
// how many there were. Its size does not grow with the record's.
type drops struct {
	named []dropped
	names []string // distinct, in order of appearance: at most the carried headers' names
	n     int
}

func (d *drops) add(name, why string) {
	d.n++
	if len(d.named) < maxDropsNamed {
		d.named = append(d.named, dropped{name, why})
	}
	if !slices.Contains(d.names, name) {
		d.names = append(d.names, name)
	}
}

// String is the error event's note: "correlation-id (empty); traceparent
// (repeated)", and "; and N more" past maxDropsNamed.
func (d drops) String() string {
	var b strings.Builder
	for i, x := range d.named {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(x.String())
	}
	if more := d.n - len(d.named); more > 0 {
		fmt.Fprintf(&b, "; and %d more", more)
	}
	return b.String()
}

// carriedHeaders returns the input headers an output copies
// (correlation-id and traceparent, the first of each) and those it drops.
// Anyone who can write an input topic chooses these bytes: copied verbatim,
// two large headers made an output over Kafka's message limit, and a record
// that cannot be answered stops the pipeline. It looks at each header once
// and allocates for at most two of them, whatever the record carries.
func carriedHeaders(in []kgo.RecordHeader) (keep []kgo.RecordHeader, d drops) {
	var seenCorr, seenTrace bool
	for _, h := range in {
		switch h.Key {
		case HeaderCorrelationID:
			if seenCorr {
				d.add(h.Key, "repeated")
				continue
			}
			seenCorr = true
			if problem := correlationProblem(h.Value); problem != "" {
				d.add(h.Key, problem)
				continue
			}
		case HeaderTraceparent:
			if seenTrace {
				d.add(h.Key, "repeated")
				continue
			}
			seenTrace = true
			if !validTraceparent(h.Value) {
				d.add(h.Key, fmt.Sprintf("%d bytes, not a W3C traceparent", len(h.Value)))
				continue
			}
		default:
			continue
		}
		keep = append(keep, kgo.RecordHeader{Key: h.Key, Value: append([]byte(nil), h.Value...)})
	}
	return keep, d
}

func validTraceparent(v []byte) bool {
	// Version ff is forbidden; all-zero ids are invalid.
	return len(v) == 55 && traceparentRE.Match(v) && string(v[:2]) != "ff" &&
		string(v[3:35]) != "00000000000000000000000000000000" && string(v[36:52]) != "0000000000000000"
}

func correlationProblem(v []byte) string {
	switch {
	case len(v) == 0:
		return "empty"
	case len(v) > MaxCorrelationIDBytes:
		return fmt.Sprintf("%d bytes, over %d", len(v), MaxCorrelationIDBytes)
	}
	for _, c := range v {
		if c < 0x20 || c > 0x7e {
			return "not printable ASCII"
		}
	}
	return ""
}

// recordBytes is what a record counts against the producer's and the
// topic's message limits: key, value and headers, with room for the
// record's and its batch's framing.
func recordBytes(r *kgo.Record) int {
	const framing = 128 // batch header (61) and record varints, generously
	n := framing + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value) + 10
	}
	return n
}
