package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// span is the offsets [from, to) of one partition.
type span struct {
	topic     string
	partition int32
	from, to  int64
}

// window plans the records of topic written from since up to until (zero:
// the end when called), by record timestamp, as replay and Kafka's tools
// do: from each partition's first offset at or after since to its first at
// or after until, within its log start and last stable offset.
func (r *Reconciler) window(ctx context.Context, adm *kadm.Client, topic string, since, until time.Time) ([]span, error) {
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
	var out []span
	ends.Each(func(e kadm.ListedOffset) {
		s := span{topic: topic, partition: e.Partition, to: e.Offset}
		if st, ok := starts.Lookup(topic, e.Partition); ok {
			s.from = st.Offset
		}
		if f, ok := froms.Lookup(topic, e.Partition); ok {
			s.from = max(s.from, f.Offset)
		}
		if t, ok := tos.Lookup(topic, e.Partition); ok && t.Offset >= 0 {
			s.to = min(s.to, t.Offset)
		}
		if s.from < s.to {
			out = append(out, s)
		}
	})
	slices.SortFunc(out, func(a, b span) int { return int(a.partition - b.partition) })
	return out, nil
}

// stream reads spans with a client of its own (no group, no commits,
// committed records only) and calls emit with each record in them, in
// offset order per partition, until every span was read to its end, emit
// fails or ctx ends. Records deleted under the reader (retention) fail the
// read rather than being skipped.
func (r *Reconciler) stream(ctx context.Context, spans []span, emit func(*kgo.Record) error) error {
	type tp struct {
		topic     string
		partition int32
	}
	want := map[string]map[int32]kgo.Offset{}
	ends := map[tp]int64{}
	for _, s := range spans {
		if s.from >= s.to {
			continue
		}
		if want[s.topic] == nil {
			want[s.topic] = map[int32]kgo.Offset{}
		}
		want[s.topic][s.partition] = kgo.NewOffset().At(s.from)
		ends[tp{s.topic, s.partition}] = s.to
	}
	if len(ends) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(slices.Clone(r.o.Kafka),
		kgo.ConsumePartitions(want),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers are kept to see a span's end when it ends
		// on one; they are not emitted.
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxBytes(1<<20),
		kgo.FetchMaxWait(250*time.Millisecond),
	)...)
	if err != nil {
		return fmt.Errorf("reconcile: kafka consumer: %w", err)
	}
	defer cl.Close()
	for len(ends) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, kerr.OffsetOutOfRange) {
				err = fmt.Errorf("records deleted while being read (retention?): %w", err)
			}
			ferr = errors.Join(ferr, fmt.Errorf("reading %s/%d: %w", t, p, err))
		})
		if ferr != nil {
			return ferr
		}
		finished := map[string][]int32{}
		var eerr error
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			k := tp{fp.Topic, fp.Partition}
			end, ok := ends[k]
			if !ok || eerr != nil {
				return
			}
			for _, rec := range fp.Records {
				if rec.Offset >= end {
					break
				}
				if !rec.Attrs.IsControl() {
					if eerr = emit(rec); eerr != nil {
						return
					}
				}
			}
			if n := len(fp.Records); n > 0 && fp.Records[n-1].Offset >= end-1 {
				delete(ends, k)
				finished[fp.Topic] = append(finished[fp.Topic], fp.Partition)
			}
		})
		if eerr != nil {
			return eerr
		}
		if len(finished) > 0 {
			cl.RemoveConsumePartitions(finished)
		}
	}
	return nil
}
