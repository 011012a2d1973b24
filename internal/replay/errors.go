package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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

type coord struct {
	topic     string
	partition int32
	offset    int64
}

func (c coord) String() string { return events.SourceID(c.topic, c.partition, c.offset) }

func (c coord) compare(d coord) int {
	return cmp.Or(cmp.Compare(c.topic, d.topic), cmp.Compare(c.partition, d.partition), cmp.Compare(c.offset, d.offset))
}

// FromErrors replays the original records of the error events on
// errorTopic that f chooses, as they were when they failed, each once
// however many error events name it, in source offset order. The error
// topic is read up to its end when FromErrors is called, so the error
// events the replay itself writes are not replayed again. An original not
// carried in its event (a PII-strict deployment) is read from its source
// position if the source topic still retains it; otherwise it is listed in
// Summary.NotReplayable.
//
// The chosen originals are held in memory until they are replayed (they
// must be sorted by source position): about their total size.
func (r *Replayer) FromErrors(ctx context.Context, errorTopic string, f ErrorFilter) (*Summary, error) {
	sum := newSummary()
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

	originals := map[coord]*kgo.Record{}
	var missing []coord
	err = r.stream(ctx, ranges, func(rec *kgo.Record) error {
		at := events.SourceID(rec.Topic, rec.Partition, rec.Offset)
		v, err := r.o.Codec.Decode(ctx, errorTopic, rec.Value)
		if err != nil {
			var de *codec.DecodeError
			if !errors.As(err, &de) { // the registry, not the record: try again later
				return fmt.Errorf("error event %s: %w", at, err)
			}
			sum.NotReplayable = append(sum.NotReplayable, fmt.Sprintf("error event %s (undecodable: %v)", at, err))
			return nil
		}
		e, ok := v.(*events.LoyaltyError)
		if !ok {
			sum.NotReplayable = append(sum.NotReplayable, fmt.Sprintf("%s (not an error event)", at))
			return nil
		}
		if !f.match(e) {
			return nil
		}
		c := coord{e.Source.Topic, e.Source.Partition, e.Source.Offset}
		if _, seen := originals[c]; seen {
			return nil
		}
		if e.OriginalValue == nil {
			originals[c] = nil
			missing = append(missing, c)
			return nil
		}
		originals[c] = &kgo.Record{Topic: c.topic, Partition: c.partition, Offset: c.offset,
			Key: e.OriginalKey, Value: e.OriginalValue, Timestamp: e.Source.Timestamp, Headers: traceHeaders(rec.Headers)}
		return nil
	})
	if err != nil {
		return sum, err
	}
	if err := r.fetchOriginals(ctx, missing, originals, sum); err != nil {
		return sum, err
	}
	recs := make([]*kgo.Record, 0, len(originals))
	for _, rec := range originals {
		if rec != nil {
			recs = append(recs, rec)
		}
	}
	slices.SortFunc(recs, func(a, b *kgo.Record) int {
		return coord{a.Topic, a.Partition, a.Offset}.compare(coord{b.Topic, b.Partition, b.Offset})
	})
	clear(originals)
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

// traceHeaders are the input headers the bridge copies to its outputs; an
// error event's record carries them, so a replayed output carries them too.
func traceHeaders(hs []kgo.RecordHeader) []kgo.RecordHeader {
	var out []kgo.RecordHeader
	for _, h := range hs {
		if h.Key == bridge.HeaderCorrelationID || h.Key == bridge.HeaderTraceparent {
			out = append(out, h)
		}
	}
	return out
}

// fetchOriginals reads the originals that error events did not carry from
// their source positions, one pass per partition over the span they cover.
// Those no longer retained (or never found) are listed as not replayable.
func (r *Replayer) fetchOriginals(ctx context.Context, missing []coord, originals map[coord]*kgo.Record, sum *Summary) error {
	if len(missing) == 0 {
		return nil
	}
	slices.SortFunc(missing, coord.compare)
	unreplayable := func(c coord, why string) {
		sum.NotReplayable = append(sum.NotReplayable, fmt.Sprintf("%s (original not in its error event, %s)", c, why))
		delete(originals, c)
	}
	byTopic := map[string][]coord{}
	for _, c := range missing {
		byTopic[c.topic] = append(byTopic[c.topic], c)
	}
	wanted := map[coord]bool{}
	var ranges []Range
	for _, topic := range slices.Sorted(maps.Keys(byTopic)) {
		bs, err := r.bounds(ctx, topic)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			for _, c := range byTopic[topic] {
				unreplayable(c, fmt.Sprintf("and its topic cannot be read: %v", err))
			}
			continue
		}
		spans := map[int32]*Range{}
		for _, c := range byTopic[topic] {
			b, ok := bs[c.partition]
			switch {
			case !ok:
				unreplayable(c, "and its partition no longer exists")
			case c.offset < b.start:
				unreplayable(c, "and no longer retained")
			case c.offset >= b.end:
				unreplayable(c, "and beyond the end of its topic")
			default:
				wanted[c] = true
				if s := spans[c.partition]; s != nil {
					s.To = c.offset + 1 // missing is sorted
				} else {
					spans[c.partition] = &Range{Topic: topic, Partition: c.partition, From: c.offset, To: c.offset + 1}
				}
			}
		}
		for _, p := range slices.Sorted(maps.Keys(spans)) {
			ranges = append(ranges, *spans[p])
		}
	}
	err := r.stream(ctx, ranges, func(rec *kgo.Record) error {
		c := coord{rec.Topic, rec.Partition, rec.Offset}
		if wanted[c] {
			originals[c] = rec
			delete(wanted, c)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range slices.SortedFunc(maps.Keys(wanted), coord.compare) {
		unreplayable(c, "and not found at its position (compacted or aborted)")
	}
	return nil
}
