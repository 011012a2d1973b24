package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

type tp struct {
	topic     string
	partition int32
}

// stream reads ranges with a client of its own (no group, no commits) and
// calls emit with each record in them, in offset order per partition. It
// returns when every range was read to its end, or with emit's first error,
// or ctx's.
//
// A range's end is known to be reached when a record at or past its last
// offset is seen. Control records (transaction markers) are kept for that
// purpose and not emitted, and only committed records are read, so a range
// that ends on a marker or an aborted batch still ends. Records deleted
// under the reader (retention) fail the read rather than being skipped.
func (r *Replayer) stream(ctx context.Context, ranges []Range, emit func(*kgo.Record) error) error {
	want := map[string]map[int32]kgo.Offset{}
	ends := map[tp]int64{}
	for _, rg := range ranges {
		if rg.From >= rg.To {
			continue
		}
		if want[rg.Topic] == nil {
			want[rg.Topic] = map[int32]kgo.Offset{}
		}
		k := tp{rg.Topic, rg.Partition}
		if _, dup := ends[k]; dup {
			return fmt.Errorf("replay: two ranges of %s/%d", rg.Topic, rg.Partition)
		}
		want[rg.Topic][rg.Partition] = kgo.NewOffset().At(rg.From)
		ends[k] = rg.To
	}
	if len(ends) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(slices.Clone(r.o.Kafka),
		kgo.ConsumePartitions(want),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		// As the live pipeline: small responses keep memory flat; the
		// records wait in the replay's own bounded buffer.
		kgo.FetchMaxBytes(1<<20),
		kgo.FetchMaxPartitionBytes(256<<10),
		kgo.FetchMaxWait(250*time.Millisecond),
	)...)
	if err != nil {
		return fmt.Errorf("replay: kafka consumer: %w", err)
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
