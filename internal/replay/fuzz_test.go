package replay

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// FuzzReadErrorEvent feeds readErrorEvent, what `replay --from-errors`
// makes of each record of an error topic, what anyone who may write the
// error topic can put there: any value bytes (seeded with real error
// events, a result event and garbage), and an error event encoded from any
// source topic, partition, offset and original. Whatever it is given, it
// never panics, a refusal is a *refusedErrorEvent naming the record and
// what was wrong (never the registry's error: srfake answers), and an
// error event it chooses names a record of the input topic and nothing
// else: another input, a topic with the input's name as a prefix, a
// negative partition or offset are refused.
func FuzzReadErrorEvent(f *testing.F) {
	topics := codec.DefaultTopics()
	input := topics.Purchase
	errorTopic := topics.ErrorTopic(input)
	reg := srfake.New()
	f.Cleanup(reg.Close)
	sc, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cd, err := codec.New(ctx, codec.Options{Registry: sc, Register: true, Topics: topics})
	if err != nil {
		f.Fatal(err)
	}
	purchase, err := cd.Encode(input, &events.PurchaseCompleted{TransactionID: "T-1", LoyaltyID: "L-1",
		TransactionDate: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), Amount: 1000, Currency: "VND"})
	if err != nil {
		f.Fatal(err)
	}
	errorEventOf := func(t testing.TB, src events.ErrorSource, key, value []byte, retryable bool) []byte {
		t.Helper()
		cat := events.CategoryValidation
		if retryable {
			cat = events.CategoryTransientExhausted
		}
		b, err := cd.EncodeError(errorTopic, &events.LoyaltyError{TransactionID: "T-1", Category: cat, Retryable: retryable,
			Detail: "test", Attempts: 1, Source: src, OriginalKey: key, OriginalValue: value,
			ProcessedAt: time.Date(2026, 11, 23, 10, 0, 1, 0, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	result, err := cd.EncodeResult(topics.ResultTopic(input), &events.LoyaltyResult{TransactionID: "T-1",
		EventType: events.TypePurchaseCompleted, Outcome: events.OutcomeApplied, ProcessedAt: time.Date(2026, 11, 23, 10, 0, 1, 0, time.UTC)})
	if err != nil {
		f.Fatal(err)
	}
	genuine := errorEventOf(f, events.ErrorSource{Topic: input, Partition: 1, Offset: 42}, []byte("L-1"), purchase, true)
	for _, s := range []struct {
		value     []byte // an error topic's record, as it is
		src       string // the source an encoded error event names
		part      int32
		off       int64
		orig      []byte
		retryable bool
	}{
		{value: genuine, src: input, part: 1, off: 42, orig: purchase, retryable: true},
		{value: errorEventOf(f, events.ErrorSource{Topic: input}, nil, nil, false), src: input},
		{value: errorEventOf(f, events.ErrorSource{Topic: topics.RefundRedemption, Offset: 3}, nil, purchase, true),
			src: topics.RefundRedemption, off: 3, orig: purchase, retryable: true},
		{value: errorEventOf(f, events.ErrorSource{Topic: input + "-shadow"}, nil, nil, true), src: input + "-shadow", retryable: true},
		{value: errorEventOf(f, events.ErrorSource{Topic: input, Partition: -1}, nil, nil, true), src: input, part: -1, retryable: true},
		{value: errorEventOf(f, events.ErrorSource{Topic: input, Offset: -2}, nil, nil, true), src: input, off: -2, retryable: true},
		{value: result, src: input},
		{value: genuine[:len(genuine)/2], src: input},
		{value: append(append([]byte(nil), genuine...), 0x02), src: errorTopic},
		{value: []byte{0, 0, 0, 0x7f, 1, 2}, src: strings.ToUpper(input)},
		{value: []byte{}, src: ""},
	} {
		f.Add(s.value, []byte("corr-1"), s.src, s.part, s.off, s.orig, s.retryable, false)
		f.Add(s.value, []byte{}, s.src, s.part, s.off, s.orig, s.retryable, true)
	}

	every := ErrorFilter{Categories: []events.Category{events.CategoryDecode, events.CategoryValidation, events.CategoryBusiness,
		events.CategoryAuth, events.CategoryTransientExhausted, events.CategoryInternal}}
	at := events.Position{Topic: errorTopic, Partition: 0, Offset: 7}
	f.Fuzz(func(t *testing.T, value, correlation []byte, src string, part int32, off int64, orig []byte, retryable, all bool) {
		filter := ErrorFilter{}
		if all {
			filter = every
		}
		check := func(what string, value []byte) {
			rec := &kgo.Record{Topic: at.Topic, Partition: at.Partition, Offset: at.Offset, Value: value,
				Headers: []kgo.RecordHeader{{Key: bridge.HeaderCorrelationID, Value: correlation}, {Key: "x-other", Value: correlation}}}
			ev, chosen, err := readErrorEvent(context.Background(), cd, errorTopic, input, rec, filter)
			if err != nil {
				var refused *refusedErrorEvent
				if !errors.As(err, &refused) {
					t.Fatalf("%s: not a refusal of the record but %T: %v", what, err, err)
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "error event "+at.String()+" ") || refused.why == "" || len(msg) > 1024 {
					t.Fatalf("%s: a refusal that does not name the record and what is wrong with it in a line: %q", what, msg)
				}
				switch n := refused.names; {
				case n == nil && !strings.HasPrefix(refused.why, "undecodable: ") && !strings.HasPrefix(refused.why, "not an error event"):
					t.Fatalf("%s: refused for an unexpected reason: %q", what, msg)
				case n != nil && n.Topic == input && n.Partition >= 0 && n.Offset >= 0:
					t.Fatalf("%s: a position of %s refused: %q", what, input, msg)
				case n != nil && refused.why != "not a position of "+input:
					t.Fatalf("%s: a source outside %s refused for an unexpected reason: %q", what, input, msg)
				}
				return
			}
			// What the record holds, decoded here for the facts the
			// choice must follow.
			v, derr := cd.Decode(context.Background(), errorTopic, value)
			e, ok := v.(*events.LoyaltyError)
			if derr != nil || !ok {
				t.Fatalf("%s: a record that is no error event (%v) read as one", what, derr)
			}
			if chosen != (all || e.Retryable) {
				t.Fatalf("%s: chosen %v for a retryable=%v error event with every category %v", what, chosen, e.Retryable, all)
			}
			if !chosen {
				return
			}
			want := events.Position{Topic: e.Source.Topic, Partition: e.Source.Partition, Offset: e.Source.Offset}
			if ev.source != want || ev.source.Topic != input || ev.source.Partition < 0 || ev.source.Offset < 0 {
				t.Fatalf("%s: chose %v for an error event naming %v (input %s)", what, ev.source, want, input)
			}
			switch o := ev.original; {
			case (o == nil) != (e.OriginalValue == nil):
				t.Fatalf("%s: original %v for an error event carrying %d bytes", what, o, len(e.OriginalValue))
			case o == nil:
			case o.Topic != input || o.Partition != ev.source.Partition || o.Offset != ev.source.Offset ||
				!bytes.Equal(o.Value, e.OriginalValue) || !bytes.Equal(o.Key, e.OriginalKey):
				t.Fatalf("%s: original %s/%d/%d is not the record the error event carries at %v", what, o.Topic, o.Partition, o.Offset, ev.source)
			case len(o.Headers) != 1 || o.Headers[0].Key != bridge.HeaderCorrelationID:
				t.Fatalf("%s: original with headers %v, not the error event's trace headers", what, o.Headers)
			}
		}
		check("the record", value)
		// The same error event, encoded from the fuzzer's fields.
		if encoded, err := cd.EncodeError(errorTopic, &events.LoyaltyError{TransactionID: "T-1", Category: events.CategoryAuth,
			Retryable: retryable, Detail: "fuzz", Attempts: 1, Source: events.ErrorSource{Topic: src, Partition: part, Offset: off},
			OriginalKey: correlation, OriginalValue: orig, ProcessedAt: time.Date(2026, 11, 23, 10, 0, 1, 0, time.UTC)}); err == nil {
			check("an error event naming "+events.SourceID(src, part, off), encoded)
		}
	})
}
