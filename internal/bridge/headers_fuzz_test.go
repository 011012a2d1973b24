package bridge

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fuzzHeaders cuts data into headers: each header is a name byte (0:
// correlation-id, 1: traceparent, otherwise a name of its own) and a value
// up to the next 0xff, so the fuzzer explores repeats, orders and values.
func fuzzHeaders(data []byte) []kgo.RecordHeader {
	var hs []kgo.RecordHeader
	for len(data) > 0 {
		name := "x-other"
		switch data[0] % 4 {
		case 0:
			name = HeaderCorrelationID
		case 1:
			name = HeaderTraceparent
		case 2:
			name = string(data[0:1])
		}
		data = data[1:]
		v := data
		if i := bytes.IndexByte(data, 0xff); i >= 0 {
			v, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		hs = append(hs, kgo.RecordHeader{Key: name, Value: v})
	}
	return hs
}

// FuzzCarriedHeaders: whatever headers an input record carries (anyone
// who can write the topic chooses them), an output copies at most one
// valid correlation-id and one valid traceparent, as copies, and the
// error event's note about the rest stays small however many there are.
func FuzzCarriedHeaders(f *testing.F) {
	tp := []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	f.Add(append(append([]byte{0}, "order-1"...), append([]byte{0xff, 1}, tp...)...))
	f.Add(append([]byte{1}, bytes.Repeat([]byte{'a'}, 55)...))
	f.Add(bytes.Repeat([]byte{0, 0xff}, 200))
	f.Add(bytes.Repeat(append([]byte{0}, bytes.Repeat([]byte{'c'}, 200)...), 3))
	f.Add([]byte{0, 0x1f, 0xff, 1, 0xff, 2, 'z'})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzHeaders(data)
		keep, d := carriedHeaders(in)
		if len(keep) > 2 {
			t.Fatalf("%d headers kept", len(keep))
		}
		var carried, corr, trace int
		for _, h := range in {
			if h.Key == HeaderCorrelationID || h.Key == HeaderTraceparent {
				carried++
			}
		}
		for _, h := range keep {
			switch h.Key {
			case HeaderCorrelationID:
				corr++
				if p := correlationProblem(h.Value); p != "" {
					t.Fatalf("kept a correlation-id that is %s", p)
				}
			case HeaderTraceparent:
				trace++
				if !validTraceparent(h.Value) {
					t.Fatalf("kept traceparent %q", h.Value)
				}
			default:
				t.Fatalf("kept header %q", h.Key)
			}
			for _, x := range in {
				if len(x.Value) > 0 && len(h.Value) > 0 && &x.Value[0] == &h.Value[0] {
					t.Fatal("kept header shares the input's bytes")
				}
			}
		}
		if corr > 1 || trace > 1 {
			t.Fatalf("kept %d correlation-ids, %d traceparents", corr, trace)
		}
		if len(keep)+d.n != carried {
			t.Fatalf("%d kept + %d dropped, of %d carried headers", len(keep), d.n, carried)
		}
		// Two names, four reasons of bounded size, and a count.
		if note := d.String(); len(note) > 512 {
			t.Fatalf("drop note of %d bytes for %d headers", len(note), len(in))
		}
	})
}
