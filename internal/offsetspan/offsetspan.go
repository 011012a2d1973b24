package offsetspan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Span is the offsets [From, To) of one partition.
type Span struct {
	Topic     string
	Partition int32
	From, To  int64
}

type tp struct {
	topic     string
	partition int32
}

// Read reads spans with a client built from base (the connection: seeds,
// TLS, SASL, logger) and calls emit with each committed record in them, in
// offset order per partition. It returns nil when every span was read to
// its end, or emit's first error, or ctx's, or the first fetch error; a
// record deleted under the reader is one ("records deleted while being
// read (retention?)"). Empty spans are skipped; two spans of one partition
// are an error.
//
// Responses are at most 1 MiB and a fetch waits at most 250ms for data;
// fetch options are applied after these, to change them for a caller whose
// memory depends on them. emit is called from Read's goroutine only.
func Read(ctx context.Context, base []kgo.Opt, spans []Span, emit func(*kgo.Record) error, fetch ...kgo.ConsumerOpt) error {
	want := map[string]map[int32]kgo.Offset{}
	ends := map[tp]int64{}
	for _, s := range spans {
		if s.From >= s.To {
			continue
		}
		k := tp{s.Topic, s.Partition}
		if _, dup := ends[k]; dup {
			return fmt.Errorf("two spans of %s/%d", s.Topic, s.Partition)
		}
		if want[s.Topic] == nil {
			want[s.Topic] = map[int32]kgo.Offset{}
		}
		want[s.Topic][s.Partition] = kgo.NewOffset().At(s.From)
		ends[k] = s.To
	}
	if len(ends) == 0 {
		return nil
	}
	opts := append(slices.Clone(base),
		kgo.ConsumePartitions(want),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers are kept to see a span's end when it ends
		// on one; they are not emitted.
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxBytes(1<<20),
		// As the live pipeline's: a fetch with nothing new for a partition
		// still being read waits this long, not franz-go's 5s.
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	for _, o := range fetch {
		opts = append(opts, o)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka consumer: %w", err)
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
		var finished map[string][]int32
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
			// The span's last offset may be a marker or an aborted record:
			// any record at or past it ends the span.
			if n := len(fp.Records); n > 0 && fp.Records[n-1].Offset >= end-1 {
				delete(ends, k)
				if finished == nil {
					finished = map[string][]int32{}
				}
				finished[fp.Topic] = append(finished[fp.Topic], fp.Partition)
			}
		})
		if eerr != nil {
			return eerr
		}
		if finished != nil {
			cl.RemoveConsumePartitions(finished)
		}
	}
	return nil
}
