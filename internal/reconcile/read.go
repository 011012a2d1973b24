package reconcile

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/offsetspan"
)

// window plans the records of topic written from since up to until (zero:
// the end when called), by record timestamp, as replay and Kafka's tools
// do: from each partition's first offset at or after since to its first at
// or after until, within its log start and last stable offset.
func (r *Reconciler) window(ctx context.Context, adm *kadm.Client, topic string, since, until time.Time) ([]offsetspan.Span, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	at := func(t time.Time) (kadm.ListedOffsets, error) {
		l, err := adm.ListOffsetsAfterMilli(ctx, t.UnixMilli(), topic)
		if err == nil {
			err = l.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("offsets of %s at %s: %w", topic, t.Format(time.RFC3339), err)
		}
		return l, nil
	}
	froms, err := at(since)
	if err != nil {
		return nil, err
	}
	var tos kadm.ListedOffsets
	if !until.IsZero() {
		if tos, err = at(until); err != nil {
			return nil, err
		}
	}
	var out []offsetspan.Span
	ends.Each(func(e kadm.ListedOffset) {
		s := offsetspan.Span{Topic: topic, Partition: e.Partition, To: e.Offset}
		if st, ok := starts.Lookup(topic, e.Partition); ok {
			s.From = st.Offset
		}
		if f, ok := froms.Lookup(topic, e.Partition); ok {
			s.From = max(s.From, f.Offset)
		}
		if t, ok := tos.Lookup(topic, e.Partition); ok && t.Offset >= 0 {
			s.To = min(s.To, t.Offset)
		}
		if s.From < s.To {
			out = append(out, s)
		}
	})
	slices.SortFunc(out, func(a, b offsetspan.Span) int { return int(a.Partition - b.Partition) })
	return out, nil
}

// stream reads spans with a client of its own (no group, no commits,
// committed records only; offsetspan.Read) and calls emit with each record
// in them, in offset order per partition, until every span was read to its
// end, emit fails or ctx ends. emit handles each record at once and keeps
// little, so the responses are offsetspan's default size.
func (r *Reconciler) stream(ctx context.Context, spans []offsetspan.Span, emit func(*kgo.Record) error) error {
	return offsetspan.Read(ctx, r.o.Kafka, spans, emit)
}
