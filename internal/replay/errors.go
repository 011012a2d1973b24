package replay

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// ErrorFilter chooses the error events whose originals FromErrors replays.
// The zero value chooses every retryable error event.
type ErrorFilter struct {
	// Categories to replay; empty means every retryable error event
	// (TRANSIENT_EXHAUSTED, AUTH, and INTERNAL failures that were
	// transient). Naming DECODE or VALIDATION replays those too, which is
	// useful only after the bridge or its schemas changed.
	Categories []events.Category
	// Since skips error events processed before it.
	Since time.Time
}

func (f ErrorFilter) match(e *events.LoyaltyError) bool {
	if !f.Since.IsZero() && e.ProcessedAt.Before(f.Since) {
		return false
	}
	if len(f.Categories) == 0 {
		return e.Retryable
	}
	return slices.Contains(f.Categories, e.Category)
}

// clockSlack widens the part of an error topic read for ErrorFilter.Since:
// a record is stamped when produced, after its event's processedAt, by a
// clock (the producer's or the broker's) that may differ from the bridge's.
const clockSlack = time.Hour

// FromErrors replays the source records named by the error events on
// errorTopic that f chooses (f.Since in the future is a *RequestError
// saying when the error events were written), each once however many error events name it,
// in source offset order. The error topic is read up to its end when
// FromErrors is called, so the error events the replay itself writes are
// not replayed again.
//
// An error event is a claim, not a record: anyone who can write the error
// topic can write one. So each source record is read at the position its
// error events name, from the input topic whose error topic this is, and
// that is what is replayed:
//   - an error event naming a position outside that input topic (another
//     topic, a partition it does not have, an offset not yet written) is
//     refused without reading anything (Summary.Refused);
//   - an original carried in an error event must equal the source record
//     (key and value bytes); if any differs, neither is replayed
//     (Summary.Mismatched) and a line names the error event and the source
//     position;
//   - a record the source no longer holds (retention, compaction) is
//     replayed from the original its error events carry only with
//     Options.TrustErrorOriginals, and only when they all carry the same
//     one; otherwise it is counted in Summary.SourceGone.
//
// What is held in memory until the replay starts is the source records
// read (about their total size) and, per error event, its position and a
// digest of its original; the carried originals themselves only with
// Options.TrustErrorOriginals.
func (r *Replayer) FromErrors(ctx context.Context, errorTopic string, f ErrorFilter) (*Summary, error) {
	sum := newSummary()
	sum.fromErrors = true
	input, ok := r.inputOf(errorTopic)
	if !ok {
		return sum, fmt.Errorf("replay: %s is not the error topic of an input topic (%s)", errorTopic, strings.Join(r.o.Inputs, ", "))
	}
	if err := r.sinceInFuture(ctx, errorTopic, f.Since); err != nil {
		return sum, err
	}
	parts, err := r.partitions(ctx, errorTopic, -1)
	if err != nil {
		return sum, err
	}
	bs, err := r.bounds(ctx, errorTopic)
	if err != nil {
		return sum, err
	}
	var froms map[int32]int64
	if !f.Since.IsZero() {
		if froms, err = r.afterMilli(ctx, errorTopic, f.Since.Add(-clockSlack)); err != nil {
			return sum, err
		}
	}
	var ranges []Range
	for _, p := range parts {
		b := bs[p]
		ranges = append(ranges, Range{Topic: errorTopic, Partition: p, From: max(b.start, froms[p]), To: b.end})
	}

	claims := map[events.Position]*claim{}
	err = r.stream(ctx, ranges, func(rec *kgo.Record) error {
		at := events.Position{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}
		ev, chosen, err := readErrorEvent(ctx, r.o.Codec, errorTopic, input, rec, f)
		var refused *refusedErrorEvent
		switch {
		case errors.As(err, &refused) && refused.names != nil:
			r.refuse(sum, at, 1, *refused.names, input, refused.why)
			return nil
		case errors.As(err, &refused):
			sum.NotReplayable = append(sum.NotReplayable, refused.Error())
			return nil
		case err != nil: // the registry, not the record: try again later
			return err
		case !chosen:
			return nil
		}
		c := ev.source
		cl := claims[c]
		if cl == nil {
			cl = &claim{first: at}
			claims[c] = cl
		}
		cl.events++
		if ev.original != nil {
			cl.carried = append(cl.carried, carried{at: at, digest: digestOf(ev.original.Key, ev.original.Value)})
			if cl.fallback == nil && r.o.TrustErrorOriginals {
				cl.fallback = ev.original
			}
		}
		return nil
	})
	if err != nil {
		return sum, err
	}
	recs, err := r.resolve(ctx, input, claims, sum)
	if err != nil {
		return sum, err
	}
	clear(claims)
	slices.SortFunc(recs, func(a, b *kgo.Record) int {
		pa := events.Position{Topic: a.Topic, Partition: a.Partition, Offset: a.Offset}
		return pa.Compare(events.Position{Topic: b.Topic, Partition: b.Partition, Offset: b.Offset})
	})
	err = r.run(ctx, len(recs), func(ctx context.Context, emit func(*kgo.Record) error) error {
		for i, rec := range recs {
			recs[i] = nil // handed over: the scheduler holds it until it is done
			if err := emit(rec); err != nil {
				return err
			}
		}
		return nil
	}, sum)
	return sum, err
}

// errorEvent is what a chosen error event claims: the input record it
// names, and the original it carries.
type errorEvent struct {
	// source is a position of the input topic, never of another topic: the
	// record a replay reads and replays for this error event.
	source events.Position
	// original is the record the error event carries (at source, with the
	// stated timestamp and the error event's trace headers), nil when it
	// carries none. It is a claim: only compared with the source record,
	// or replayed when that is gone and originals are trusted.
	original *kgo.Record
}

// refusedErrorEvent is a record of an error topic that names nothing to
// replay, for a reason of its own (not the registry's): what is wrong
// with it.
type refusedErrorEvent struct {
	at  events.Position // the error topic's record
	why string          // what is wrong with it
	// names is the position it names when that is outside the input topic
	// (nil when it could not be read as an error event at all).
	names *events.Position
}

func (e *refusedErrorEvent) Error() string {
	if e.names == nil {
		return fmt.Sprintf("error event %s (%s)", e.at, e.why)
	}
	return fmt.Sprintf("error event %s names %.*q/%d/%d: %s", e.at, maxNamedTopic, e.names.Topic, e.names.Partition, e.names.Offset, e.why)
}

// readErrorEvent reads rec, a record of errorTopic, the error topic of
// input: the error event it holds and whether f chooses it. A record that
// is not an error event of errorTopic's contract, or one whose source is
// not a position of input (another topic, a negative partition or offset),
// is a *refusedErrorEvent saying why; any other error is the registry's,
// for a later try. Whether input has the position named is for the caller
// to check against the topic itself.
func readErrorEvent(ctx context.Context, cd *codec.Codec, errorTopic, input string, rec *kgo.Record, f ErrorFilter) (errorEvent, bool, error) {
	at := events.Position{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}
	v, err := cd.Decode(ctx, errorTopic, rec.Value)
	if err != nil {
		var de *codec.DecodeError
		if !errors.As(err, &de) {
			return errorEvent{}, false, fmt.Errorf("error event %s: %w", at, err)
		}
		return errorEvent{}, false, &refusedErrorEvent{at: at, why: "undecodable: " + err.Error()}
	}
	e, ok := v.(*events.LoyaltyError)
	if !ok {
		return errorEvent{}, false, &refusedErrorEvent{at: at, why: fmt.Sprintf("not an error event but a %T", v)}
	}
	if !f.match(e) {
		return errorEvent{}, false, nil
	}
	c := events.Position{Topic: e.Source.Topic, Partition: e.Source.Partition, Offset: e.Source.Offset}
	if c.Topic != input || c.Partition < 0 || c.Offset < 0 {
		return errorEvent{}, false, &refusedErrorEvent{at: at, why: "not a position of " + input, names: &c}
	}
	ev := errorEvent{source: c}
	if e.OriginalValue != nil {
		ev.original = &kgo.Record{Topic: c.Topic, Partition: c.Partition, Offset: c.Offset,
			Key: e.OriginalKey, Value: e.OriginalValue, Timestamp: e.Source.Timestamp, Headers: traceHeaders(rec.Headers)}
	}
	return ev, true, nil
}

// inputOf is the input topic (of Options.Inputs) whose error topic is
// errorTopic.
func (r *Replayer) inputOf(errorTopic string) (string, bool) {
	for _, in := range r.o.Inputs {
		if (codec.Topics{}).ErrorTopic(in) == errorTopic {
			return in, true
		}
	}
	return "", false
}

// claim is what the chosen error events say about one source position.
type claim struct {
	first    events.Position // the first error event naming it
	events   int             // error events naming it
	carried  []carried       // those of them that carry an original
	fallback *kgo.Record     // the first carried original, kept only with TrustErrorOriginals
}

// carried is an error event's original, as a digest: enough to compare it
// with the source record and with the other error events' originals
// without holding every copy.
type carried struct {
	at     events.Position
	digest [sha256.Size]byte
}

// digestOf is a digest of a record's key and value (a nil key and an
// empty one are the same, as a carried original does not tell them apart).
func digestOf(key, value []byte) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(key)))
	h.Write(n[:])
	h.Write(key)
	h.Write(value)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// traceHeaders are the input headers the bridge copies to its outputs; an
// error event's record carries them, so an output replayed from an error
// event's original carries them too.
func traceHeaders(hs []kgo.RecordHeader) []kgo.RecordHeader {
	var out []kgo.RecordHeader
	for _, h := range hs {
		if h.Key == bridge.HeaderCorrelationID || h.Key == bridge.HeaderTraceparent {
			out = append(out, h)
		}
	}
	return out
}

// maxNamedTopic bounds how much of a topic name taken from an error event
// (anyone's writing, for a refused one) a line repeats.
const maxNamedTopic = 100

// refuse counts n error events naming c, the first at at, as refused.
func (r *Replayer) refuse(sum *Summary, at events.Position, n int, c events.Position, input, why string) {
	sum.Refused += n
	more := ""
	if n > 1 {
		more = fmt.Sprintf(" (and %d more error events)", n-1)
	}
	src := fmt.Sprintf("%.*q/%d/%d", maxNamedTopic, c.Topic, c.Partition, c.Offset)
	sum.NotReplayable = append(sum.NotReplayable, fmt.Sprintf("error event %s%s names %s: %s (refused, nothing read)", at, more, src, why))
	r.log.Warn("replay: refused an error event whose source is outside its input topic",
		zap.String("error_event", at.String()), zap.Int("more_error_events", n-1), zap.String("source", src),
		zap.String("input_topic", input), zap.String("why", why))
}

// mismatch reports the error events of cl whose original's digest is not
// want (that of the source record, or of the first carried original when
// the source is gone) and counts the record as mismatched; it reports
// whether there was any.
func (r *Replayer) mismatch(sum *Summary, c events.Position, cl *claim, want [sha256.Size]byte, against string) bool {
	bad := false
	for _, x := range cl.carried {
		if x.digest == want {
			continue
		}
		bad = true
		sum.NotReplayable = append(sum.NotReplayable,
			fmt.Sprintf("error event %s: its original differs from %s %s (neither replayed)", x.at, against, c))
		r.log.Warn("replay: an error event's original differs from its source record; neither replayed",
			zap.String("error_event", x.at.String()), zap.String("source", c.String()), zap.String("compared_with", against))
	}
	if bad {
		sum.Mismatched++
	}
	return bad
}

// resolve decides what to replay for each claimed position of input: the
// source record when it is there and every carried original equals it;
// the carried original when the source is gone, it is trusted and the
// error events agree on it; nothing otherwise, counted in sum. Source
// records are read in one pass per partition over the span claimed.
func (r *Replayer) resolve(ctx context.Context, input string, claims map[events.Position]*claim, sum *Summary) ([]*kgo.Record, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	bs, err := r.bounds(ctx, input)
	if err != nil {
		return nil, err
	}
	wanted := map[events.Position]bool{}
	gone := map[events.Position]string{}
	spans := map[int32]*Range{}
	for _, c := range slices.SortedFunc(maps.Keys(claims), events.Position.Compare) {
		cl := claims[c]
		b, ok := bs[c.Partition]
		switch {
		case !ok:
			r.refuse(sum, cl.first, cl.events, c, input, fmt.Sprintf("%s has no partition %d", input, c.Partition))
		case c.Offset >= b.end:
			r.refuse(sum, cl.first, cl.events, c, input, fmt.Sprintf("beyond the end (%d) of its partition", b.end))
		case c.Offset < b.start:
			gone[c] = fmt.Sprintf("no longer retained: the log starts at %d", b.start)
		default:
			wanted[c] = true
			if s := spans[c.Partition]; s != nil {
				s.To = c.Offset + 1 // sorted
			} else {
				spans[c.Partition] = &Range{Topic: input, Partition: c.Partition, From: c.Offset, To: c.Offset + 1}
			}
		}
	}
	var ranges []Range
	for _, p := range slices.Sorted(maps.Keys(spans)) {
		ranges = append(ranges, *spans[p])
	}
	var recs []*kgo.Record
	err = r.stream(ctx, ranges, func(rec *kgo.Record) error {
		c := events.Position{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}
		if !wanted[c] {
			return nil
		}
		delete(wanted, c)
		if !r.mismatch(sum, c, claims[c], digestOf(rec.Key, rec.Value), "the source record") {
			recs = append(recs, rec)
			sum.FromSource++
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("source records of %s: %w", input, err)
	}
	for c := range wanted {
		gone[c] = "not found at its position (compacted, or not a committed record)"
	}
	for _, c := range slices.SortedFunc(maps.Keys(gone), events.Position.Compare) {
		cl := claims[c]
		switch {
		case len(cl.carried) == 0:
			sum.SourceGone++
			sum.NotReplayable = append(sum.NotReplayable, fmt.Sprintf("%s (%s; its error event %s carries no original)", c, gone[c], cl.first))
		case !r.o.TrustErrorOriginals:
			sum.SourceGone++
			sum.NotReplayable = append(sum.NotReplayable, fmt.Sprintf(
				"%s (%s; the original in error event %s is not used unless error-event originals are trusted)", c, gone[c], cl.carried[0].at))
		case !r.mismatch(sum, c, cl, cl.carried[0].digest, "the original of error event "+cl.carried[0].at.String()+" for source"):
			recs = append(recs, cl.fallback)
			sum.FromErrorOriginals++
		}
	}
	return recs, nil
}
