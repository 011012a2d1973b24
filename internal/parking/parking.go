package parking

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Header names of the parking headers. Every one starts with HeaderPrefix;
// an input's own headers with that prefix are dropped when it is parked,
// so that nobody upstream can choose a parked record's position.
const (
	HeaderPrefix          = "parked-"
	HeaderSourceTopic     = "parked-source-topic"
	HeaderSourcePartition = "parked-source-partition"
	HeaderSourceOffset    = "parked-source-offset"
	// HeaderSourceTimestamp is the original record's timestamp, Unix
	// milliseconds (the ledger and error events read it).
	HeaderSourceTimestamp = "parked-source-timestamp"
	// HeaderFirst is when the record was first parked (RFC 3339, ms): the
	// wait for its original runs from there.
	HeaderFirst = "parked-first"
	// HeaderDue is when it is to be tried again (RFC 3339, ms).
	HeaderDue = "parked-due"
	// HeaderTries is how many times it was parked, 1 the first time.
	HeaderTries = "parked-tries"
)

// Defaults of the settings (config's --original-wait and --park-backoff).
const (
	// DefaultOriginalWait is how long a refund waits for its purchase:
	// issue 29's 15 minutes, far beyond the usual skew between the
	// purchase and refund topics (seconds) yet short enough that an
	// operator hears of a refund without a purchase the same hour.
	DefaultOriginalWait = 15 * time.Minute
	// DefaultBackoff is the first delay: a purchase a few seconds behind
	// its refund is found at the first return.
	DefaultBackoff = 10 * time.Second
	// MaxBackoff caps the doubling delay: after the purchase lands, its
	// refund waits at most this long, and a refund that waits the whole
	// DefaultOriginalWait costs about ten lookups (10 s, 20 s, 40 s, 80 s,
	// then every 2 minutes).
	MaxBackoff = 2 * time.Minute
)

// maxTopicLen is Kafka's limit on a topic name.
const maxTopicLen = 249

// maxHeaderValue bounds every parking header's value as read: a position,
// a time or a count is never longer.
const maxHeaderValue = 64

// timeLayout is RFC 3339 with milliseconds, in UTC.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// Parked is what a parked record's headers say.
type Parked struct {
	// Original is the input record as it was: its topic, partition,
	// offset and timestamp, key, value and its own headers (without the
	// parking headers).
	Original *kgo.Record
	// First is when it was first parked, Due when it is to be tried
	// again, Tries how many times it was parked.
	First, Due time.Time
	Tries      int
}

// Backoff is the delay before a record parked tries times (1 the first
// time) is tried again: first, doubling, capped at max(first, MaxBackoff).
func Backoff(first time.Duration, tries int) time.Duration {
	ceil := max(first, MaxBackoff)
	d := first
	for i := 1; i < tries && d < ceil; i++ {
		d *= 2
	}
	return min(d, ceil)
}

// Park returns the record that parks orig on topic: orig's key and value
// unchanged, its headers (less any with HeaderPrefix) and the parking
// headers. orig is the input record as it was (for a record parked again,
// Parked.Original); first is when it was first parked, due when it is to
// be tried again, tries how many times it is now parked. The record has
// no partition: it is keyed as its input was.
func Park(topic string, orig *kgo.Record, first, due time.Time, tries int) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, len(orig.Headers)+7)
	for _, x := range orig.Headers {
		if !strings.HasPrefix(x.Key, HeaderPrefix) {
			h = append(h, x)
		}
	}
	h = append(h,
		kgo.RecordHeader{Key: HeaderSourceTopic, Value: []byte(orig.Topic)},
		kgo.RecordHeader{Key: HeaderSourcePartition, Value: strconv.AppendInt(nil, int64(orig.Partition), 10)},
		kgo.RecordHeader{Key: HeaderSourceOffset, Value: strconv.AppendInt(nil, orig.Offset, 10)},
		kgo.RecordHeader{Key: HeaderSourceTimestamp, Value: strconv.AppendInt(nil, orig.Timestamp.UnixMilli(), 10)},
		kgo.RecordHeader{Key: HeaderFirst, Value: []byte(first.UTC().Format(timeLayout))},
		kgo.RecordHeader{Key: HeaderDue, Value: []byte(due.UTC().Format(timeLayout))},
		kgo.RecordHeader{Key: HeaderTries, Value: strconv.AppendInt(nil, int64(tries), 10)},
	)
	return &kgo.Record{Topic: topic, Key: orig.Key, Value: orig.Value, Headers: h}
}

// HeaderError is a parked record whose parking headers cannot be read.
type HeaderError struct {
	Header string // the header at fault
	Why    string
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("parked record: header %s: %s", e.Header, e.Why)
}

// IsHeaderError reports whether err is a *HeaderError.
func IsHeaderError(err error) bool {
	var he *HeaderError
	return errors.As(err, &he)
}

// Parse reads rec, a record of the parked topic: a *HeaderError when a
// parking header is missing, repeated, too long or malformed, or when the
// source topic is not one of sources (the topics whose records are
// parked).
func Parse(rec *kgo.Record, sources ...string) (*Parked, error) {
	vals := map[string]string{}
	orig := &kgo.Record{Key: rec.Key, Value: rec.Value}
	for _, x := range rec.Headers {
		if !strings.HasPrefix(x.Key, HeaderPrefix) {
			orig.Headers = append(orig.Headers, x)
			continue
		}
		if _, dup := vals[x.Key]; dup {
			return nil, &HeaderError{Header: x.Key, Why: "repeated"}
		}
		limit := maxHeaderValue
		if x.Key == HeaderSourceTopic {
			limit = maxTopicLen
		}
		if len(x.Value) > limit {
			return nil, &HeaderError{Header: x.Key, Why: fmt.Sprintf("%d bytes, over %d", len(x.Value), limit)}
		}
		vals[x.Key] = string(x.Value)
	}
	get := func(k string) (string, error) {
		v, ok := vals[k]
		if !ok || v == "" {
			return "", &HeaderError{Header: k, Why: "missing"}
		}
		return v, nil
	}
	num := func(k string, bits int) (int64, error) {
		v, err := get(k)
		if err != nil {
			return 0, err
		}
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil || n < 0 {
			return 0, &HeaderError{Header: k, Why: "not a non-negative integer"}
		}
		return n, nil
	}
	when := func(k string) (time.Time, error) {
		v, err := get(k)
		if err != nil {
			return time.Time{}, err
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return time.Time{}, &HeaderError{Header: k, Why: "not an RFC 3339 time"}
		}
		return t, nil
	}
	var err error
	var errs []error
	keep := func(e error) {
		if e != nil {
			errs = append(errs, e)
		}
	}
	orig.Topic, err = get(HeaderSourceTopic)
	keep(err)
	if err == nil && !slices.Contains(sources, orig.Topic) {
		keep(&HeaderError{Header: HeaderSourceTopic, Why: "not a topic whose records are parked"})
	}
	part, err := num(HeaderSourcePartition, 32)
	keep(err)
	orig.Partition = int32(part)
	orig.Offset, err = num(HeaderSourceOffset, 64)
	keep(err)
	ts, err := num(HeaderSourceTimestamp, 64)
	keep(err)
	orig.Timestamp = time.UnixMilli(ts)
	p := &Parked{Original: orig}
	p.First, err = when(HeaderFirst)
	keep(err)
	p.Due, err = when(HeaderDue)
	keep(err)
	tries, err := num(HeaderTries, 32)
	keep(err)
	if err == nil && tries < 1 {
		keep(&HeaderError{Header: HeaderTries, Why: "below 1"})
	}
	p.Tries = int(tries)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return p, nil
}
