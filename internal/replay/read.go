package replay

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/offsetspan"
)

// stream reads ranges with a client of its own (no group, no commits,
// committed records only; offsetspan.Read) and calls emit with each record
// in them, in offset order per partition, until every range was read to
// its end, emit fails or ctx ends.
func (r *Replayer) stream(ctx context.Context, ranges []Range, emit func(*kgo.Record) error) error {
	spans := make([]offsetspan.Span, len(ranges))
	for i, rg := range ranges {
		spans[i] = offsetspan.Span(rg)
	}
	// Records wait in the replay's buffer while they are handled at the
	// partner's pace, as in the live pipeline, whose sizes these are
	// (measured there: fetched records are most of the heap); 256 KiB per
	// partition keeps a one-partition replay's responses as small.
	return offsetspan.Read(ctx, r.o.Kafka, spans, emit, kgo.FetchMaxPartitionBytes(256<<10))
}
