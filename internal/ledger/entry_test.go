package ledger

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestValueRoundTrip(t *testing.T) {
	p, u, r := int64(70), int64(-3), int64(1<<40)
	at := time.UnixMilli(1_795_000_000_123)
	cases := []Entry{
		{Kind: Accrual, TransactionID: "p-1", State: Intent, Topic: "loyalty.purchase", Partition: 3, Offset: 42, At: at},
		{Kind: Refund, TransactionID: "f-1", State: Settled, Topic: "t", Partition: 0, Offset: 1 << 50, At: at, ClawbackID: "p-1~cb2",
			Outcome: "APPLIED", Points: &p, UsedPoint: &u, RequestedPoints: &r, BitReference: "BIT1", RequestID: "rq", APITimestamp: "2026-11-27T10:00:00Z"},
		{Kind: Redemption, TransactionID: "r-1", State: Settled, Topic: "t", At: at, Outcome: "SOMETHING_NEW", UsedPoint: &p},
	}
	for _, e := range cases {
		v, err := e.encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := decode([]byte(Key(e.Kind, e.TransactionID)), v)
		if err != nil {
			t.Fatalf("%s: %v", Key(e.Kind, e.TransactionID), err)
		}
		got.At, e.At = got.At.UTC(), e.At.UTC()
		if !reflect.DeepEqual(*got, e) {
			t.Errorf("round trip:\n got %+v\nwant %+v", *got, e)
		}
		if valueAt(string(v)) != at.UnixMilli() || !valueOf(v, e.Topic, at.UnixMilli()) || valueOf(v, e.Topic+"x", 0) ||
			valueOf(v, e.Topic, at.UnixMilli()+1) {
			t.Errorf("%s: the header reads wrong", Key(e.Kind, e.TransactionID))
		}
		for n := range v {
			if _, err := decode([]byte(Key(e.Kind, e.TransactionID)), v[:n]); err == nil {
				t.Errorf("%s cut to %d bytes decodes", Key(e.Kind, e.TransactionID), n)
			}
		}
	}
	for _, bad := range []Entry{{Kind: 'x', TransactionID: "a", State: Intent}, {Kind: Accrual, State: Intent}, {Kind: Accrual, TransactionID: "a", State: "odd"}} {
		if _, err := bad.encode(); err == nil {
			t.Errorf("%+v encodes", bad)
		}
	}
}

// Whatever a ledger topic holds, reading it never panics, and what reads
// encodes back to the same entry.
func FuzzDecode(f *testing.F) {
	p := int64(5)
	e := Entry{Kind: Accrual, TransactionID: "p-1", State: Settled, Topic: "t", At: time.UnixMilli(1), Outcome: "APPLIED", Points: &p}
	v, _ := e.encode()
	f.Add([]byte("a/p-1"), v)
	f.Add([]byte("f/x"), []byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		e, err := decode(key, value)
		// The restore and the tail check values with valueTopic alone:
		// it must take exactly the values decode reads.
		if _, ok := valueTopic(value); validKey(key) && ok != (err == nil) {
			t.Fatalf("valueTopic ok %v, decode error %v, for %x", ok, err, value)
		}
		if err != nil {
			return
		}
		again, err := e.encode()
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", e, err)
		}
		e2, err := decode(key, again)
		if err != nil || !reflect.DeepEqual(e, e2) {
			t.Fatalf("%+v encodes to something that reads as %+v, %v", e, e2, err)
		}
	})
}

// A record of the ledger topic that is not an entry of this version is
// foreign, refused without reading past its end: a key that is not
// <a|r|f>/<transactionId>, an outcome byte past the table's.
func TestDecodeRefusesForeignRecords(t *testing.T) {
	p := int64(5)
	good, err := (&Entry{Kind: Accrual, TransactionID: "p", State: Settled, Topic: "t", At: time.UnixMilli(1), Outcome: "APPLIED", Points: &p}).encode()
	if err != nil {
		t.Fatal(err)
	}
	if e, err := decode([]byte("a/p"), good); err != nil || e.TransactionID != "p" || e.Kind != Accrual {
		t.Fatalf("the shortest key: %+v %v", e, err)
	}
	outcome := append([]byte(nil), good...)
	outcome[2] = byte(len(outcomes)) // the first byte past the table
	for _, tc := range []struct {
		name       string
		key, value []byte
	}{
		{"no transactionId", []byte("a/"), good},
		{"no slash", []byte("ap-1"), good},
		{"another kind", []byte("x/p-1"), good},
		{"an outcome past the table", []byte("a/p"), outcome},
	} {
		if e, err := decode(tc.key, tc.value); !errors.Is(err, errForeign) {
			t.Errorf("%s: %+v %v", tc.name, e, err)
		}
	}
}

// Any one of an entry's texts may be long (a partner's bitReference, an
// operator's topic name): the entry encodes and reads back whole.
func TestValueRoundTripLongTexts(t *testing.T) {
	long := strings.Repeat("x", 200)
	for i, set := range []func(*Entry){
		func(e *Entry) { e.Topic = long },
		func(e *Entry) { e.ClawbackID = long },
		func(e *Entry) { e.BitReference = long },
		func(e *Entry) { e.RequestID = long },
		func(e *Entry) { e.APITimestamp = long },
	} {
		e := Entry{Kind: Refund, TransactionID: "f-1", State: Settled, Topic: "t", At: time.UnixMilli(1).UTC(), Outcome: "APPLIED"}
		set(&e)
		v, err := e.encode()
		if err != nil {
			t.Fatalf("text %d: %v", i, err)
		}
		got, err := decode([]byte(Key(e.Kind, e.TransactionID)), v)
		if err != nil {
			t.Fatalf("text %d: %v", i, err)
		}
		got.At = got.At.UTC()
		if !reflect.DeepEqual(*got, e) {
			t.Errorf("text %d: read back %+v", i, *got)
		}
	}
}

// valueTopic, the restore's and the tail's check, takes a value exactly
// when decodeValue reads it: a value cut short anywhere, after its topic
// too, is refused by both, so the store never keeps a value that its
// lookups cannot read (a lookup takes such a value for no entry).
func TestValueTopicAgreesWithDecode(t *testing.T) {
	p := int64(70)
	at := time.UnixMilli(1_795_000_000_123)
	for _, e := range []Entry{
		{Kind: Accrual, TransactionID: "p-1", State: Intent, Topic: "loyalty.purchase", Partition: 3, Offset: 42, At: at},
		{Kind: Refund, TransactionID: "f-1", State: Settled, Topic: "t", At: at, ClawbackID: "p-1~cb2", Outcome: "APPLIED",
			Points: &p, BitReference: "BIT1", RequestID: "rq", APITimestamp: "2026-11-27T10:00:00Z"},
		{Kind: Redemption, TransactionID: "r-1", State: Settled, Topic: "t", At: at, Outcome: "SOMETHING_NEW", UsedPoint: &p},
	} {
		v, err := e.encode()
		if err != nil {
			t.Fatal(err)
		}
		for cut := 0; cut <= len(v); cut++ {
			_, derr := decodeValue(e.Kind, e.TransactionID, v[:cut])
			topic, ok := valueTopic(v[:cut])
			if ok != (derr == nil) {
				t.Errorf("%s cut at %d of %d: valueTopic ok %v, decodeValue error %v", Key(e.Kind, e.TransactionID), cut, len(v), ok, derr)
			}
			if ok && topic != e.Topic {
				t.Errorf("%s cut at %d: topic %q, want %q", Key(e.Kind, e.TransactionID), cut, topic, e.Topic)
			}
		}
	}
}
