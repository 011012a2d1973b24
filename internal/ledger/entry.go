package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Kind is what a transactionId names at the partner: the bridge writes
// accruals, redemptions and refunds' clawbacks, each keyed apart, since one
// transactionId may name an accrual and a redemption (an order paid partly
// with points).
type Kind byte

// Kinds of entries.
const (
	Accrual    Kind = 'a'
	Redemption Kind = 'r'
	Refund     Kind = 'f'
)

func (k Kind) String() string {
	switch k {
	case Accrual:
		return "accrual"
	case Redemption:
		return "redemption"
	case Refund:
		return "refund"
	}
	return fmt.Sprintf("kind(%q)", byte(k))
}

func (k Kind) valid() bool { return k == Accrual || k == Redemption || k == Refund }

// State is how far a transaction got.
type State string

// States of an entry.
const (
	// Intent: a write was about to be sent (and may have been).
	Intent State = "intent"
	// Settled: the record was answered with a result (Outcome).
	Settled State = "settled"
)

// Entry is one transaction's latest state. Only ids, points and the
// partner's references: never personal data.
type Entry struct {
	Kind          Kind
	TransactionID string
	State         State
	// Where the record came from.
	Topic     string
	Partition int32
	Offset    int64
	// At is when the entry was made: for an intent, when its write was
	// about to be sent.
	At time.Time
	// ClawbackID is a refund's clawback slot: for an intent, the slot it
	// is about to write; settled, the slot that holds its clawback.
	ClawbackID string
	// A settled entry's result, enough to answer a duplicate.
	Outcome         string
	Points          *int64
	UsedPoint       *int64
	RequestedPoints *int64
	BitReference    string
	RequestID       string
	APITimestamp    string
}

// Key is the entry's record key: kind, a slash, transactionId.
func Key(k Kind, transactionID string) string { return string(k) + "/" + transactionID }

// validKey reports whether parseKey reads key, without copying its id
// (the tail and a restore check every entry they read).
func validKey(key []byte) bool { return len(key) >= 3 && key[1] == '/' && Kind(key[0]).valid() }

// parseKey reverses Key.
func parseKey(key []byte) (Kind, string, error) {
	if !validKey(key) {
		return 0, "", fmt.Errorf("ledger key %q: want <a|r|f>/<transactionId>", clipKey(key))
	}
	return Kind(key[0]), string(key[2:]), nil
}

func clipKey(key []byte) []byte {
	if len(key) > 64 {
		return key[:64]
	}
	return key
}

// The record value, version 1 (JSON cost twice the bytes, and a restore
// spent most of its time decoding it):
//
//	[0] version  [1] state  [2] outcome  [3:11] At, Unix ms, big-endian
//	uvarint which numbers follow (1 points, 2 usedPoint, 4 requestedPoints)
//	varint each number present, varint partition, varint offset
//	uvarint-prefixed topic, clawbackID, bitReference, requestID,
//	apiTimestamp, and the outcome when it is none of the table's
//
// At sits at a fixed place so that the process can forget old entries
// without decoding them.
const valueVersion = 1

const (
	stateIntent  = 1
	stateSettled = 2
	headerLen    = 11
)

// outcomes are the outcomes a byte stands for; 255: spelled out.
var outcomes = [...]string{"", "APPLIED", "ALREADY_APPLIED", "NO_OP"}

const outcomeSpelled = 255

// encode is the entry's record value.
func (e *Entry) encode() ([]byte, error) {
	if !e.Kind.valid() || e.TransactionID == "" {
		return nil, fmt.Errorf("ledger entry %s/%q: no kind or transactionId", e.Kind, e.TransactionID)
	}
	b := make([]byte, headerLen, 64+len(e.Topic)+len(e.ClawbackID)+len(e.BitReference)+len(e.RequestID)+len(e.APITimestamp))
	b[0] = valueVersion
	switch e.State {
	case Intent:
		b[1] = stateIntent
	case Settled:
		b[1] = stateSettled
	default:
		return nil, fmt.Errorf("ledger entry %s: state %q", Key(e.Kind, e.TransactionID), e.State)
	}
	b[2] = outcomeSpelled
	for i, o := range outcomes {
		if o == e.Outcome {
			b[2] = byte(i)
		}
	}
	binary.BigEndian.PutUint64(b[3:], uint64(e.At.UnixMilli()))
	var which uint64
	// Arrays, not slices: nothing escapes (an intent is encoded per record).
	nums := [...]*int64{e.Points, e.UsedPoint, e.RequestedPoints}
	for i, n := range nums {
		if n != nil {
			which |= 1 << i
		}
	}
	b = binary.AppendUvarint(b, which)
	for _, n := range nums {
		if n != nil {
			b = binary.AppendVarint(b, *n)
		}
	}
	b = binary.AppendVarint(b, int64(e.Partition))
	b = binary.AppendVarint(b, e.Offset)
	strs := [...]string{e.Topic, e.ClawbackID, e.BitReference, e.RequestID, e.APITimestamp, e.Outcome}
	n := len(strs)
	if b[2] != outcomeSpelled {
		n-- // the outcome is b[2]
	}
	for _, str := range strs[:n] {
		b = binary.AppendUvarint(b, uint64(len(str)))
		b = append(b, str...)
	}
	return b, nil
}

// errForeign marks a record this version does not read (another version,
// or not a ledger entry): skipped, so that a newer bridge's entries never
// stop an older one.
var errForeign = errors.New("ledger: entry not understood")

// decode reads one record of the ledger topic.
func decode(key, value []byte) (*Entry, error) {
	k, id, err := parseKey(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errForeign, err)
	}
	e, err := decodeValue(k, id, value)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errForeign, Key(k, id), err)
	}
	return e, nil
}

// decodeValue reads an entry's value.
func decodeValue(k Kind, id string, v []byte) (*Entry, error) {
	if len(v) < headerLen || v[0] != valueVersion {
		return nil, errors.New("not a version 1 value")
	}
	e := &Entry{Kind: k, TransactionID: id, At: time.UnixMilli(int64(binary.BigEndian.Uint64(v[3:])))}
	switch v[1] {
	case stateIntent:
		e.State = Intent
	case stateSettled:
		e.State = Settled
	default:
		return nil, fmt.Errorf("state %d", v[1])
	}
	r := reader{b: v[headerLen:]}
	which := r.uvarint()
	for i, n := range []**int64{&e.Points, &e.UsedPoint, &e.RequestedPoints} {
		if which&(1<<i) != 0 {
			x := r.varint()
			*n = &x
		}
	}
	e.Partition, e.Offset = int32(r.varint()), r.varint()
	for _, str := range []*string{&e.Topic, &e.ClawbackID, &e.BitReference, &e.RequestID, &e.APITimestamp} {
		*str = r.str()
	}
	switch o := v[2]; {
	case o == outcomeSpelled:
		e.Outcome = r.str()
	case int(o) < len(outcomes):
		e.Outcome = outcomes[o]
	default:
		return nil, fmt.Errorf("outcome %d", o)
	}
	if r.err != nil {
		return nil, r.err
	}
	return e, nil
}

// valueAt is the At of a value decodeValue reads, without decoding it.
func valueAt[V string | []byte](v V) int64 {
	var x uint64
	for i := 3; i < headerLen; i++ {
		x = x<<8 | uint64(v[i])
	}
	return int64(x)
}

// valueOf reports whether v is a value decodeValue reads, of input topic
// topic, made at or after since (Unix ms), without decoding it whole.
func valueOf(v []byte, topic string, since int64) bool {
	t, ok := valueTopicBytes(v)
	return ok && int64(binary.BigEndian.Uint64(v[3:])) >= since && string(t) == topic
}

// valueTopic is the input topic of a value decodeValue reads; ok is false
// for any other value.
func valueTopic(v []byte) (topic string, ok bool) {
	t, ok := valueTopicBytes(v)
	return string(t), ok
}

// valueTopicBytes is valueTopic's bytes, within v (no copy: a restore
// checks a million of them).
func valueTopicBytes(v []byte) ([]byte, bool) {
	if len(v) < headerLen || v[0] != valueVersion || (v[1] != stateIntent && v[1] != stateSettled) {
		return nil, false
	}
	r := reader{b: v[headerLen:]}
	which := r.uvarint()
	for i := range 3 {
		if which&(1<<i) != 0 {
			r.varint()
		}
	}
	r.varint() // partition
	r.varint() // offset
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		return nil, false
	}
	topic := r.b[:n]
	// The rest as decodeValue reads it, without copying: a value cut
	// short after its topic is not one decodeValue reads, and the store
	// would keep it where a readable value was (get then finds nothing).
	r.b = r.b[n:]
	for range 4 { // ClawbackID, BitReference, RequestID, APITimestamp
		r.skip()
	}
	switch o := v[2]; {
	case o == outcomeSpelled:
		r.skip()
	case int(o) >= len(outcomes):
		return nil, false
	}
	if r.err != nil {
		return nil, false
	}
	return topic, true
}

// valueState is the state byte of such a value.
func valueState[V string | []byte](v V) byte { return v[1] }

// reader takes varints and strings off b, remembering the first error.
type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("value cut short")

func (r *reader) uvarint() uint64 {
	x, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *reader) varint() int64 {
	x, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *reader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// skip takes a string off b without copying it.
func (r *reader) skip() {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return
	}
	r.b = r.b[n:]
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = errShort
	}
	r.b = nil
}
