package replay

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
)

// Range is the offsets [From, To) of one partition.
type Range struct {
	Topic     string
	Partition int32
	From, To  int64
}

func (r Range) String() string {
	return fmt.Sprintf("%s/%d [%d, %d)", r.Topic, r.Partition, r.From, r.To)
}

// Options configures a Replayer.
type Options struct {
	// Kafka are the connection options (seeds, TLS, SASL).
	Kafka []kgo.Opt
	// Codec decodes inputs (dry run), error events and outputs (summary).
	Codec *codec.Codec
	// Handle and Fallback process a record: the bridge's, in replay mode.
	// Not used in a dry run.
	Handle   pipeline.Handler
	Fallback pipeline.Fallback
	// DryRun decodes and validates and says what would be called.
	DryRun bool
	// Out receives the dry run's lines.
	Out io.Writer
	// Rate bounds records started per second; 0 means no bound.
	Rate float64
	// MaxInFlight bounds records handled at once (default 16). Records of
	// one key are handled one after the other, in offset order.
	MaxInFlight int
	// Progress is called after each record with done and total.
	Progress func(done, total int)
	Logger   *zap.Logger
}

// Summary is what a replay did.
type Summary struct {
	Records  int
	Outcomes map[string]int // result outcome, "error CATEGORY", or in a dry run "would call …"
	// NotReplayable lists error events whose original record is neither
	// carried nor still in its topic.
	NotReplayable []string
	// ProduceFailures counts outputs Kafka did not take.
	ProduceFailures int
}

// OK reports whether everything asked for was replayed.
func (s *Summary) OK() bool { return len(s.NotReplayable) == 0 && s.ProduceFailures == 0 }

// Table renders the summary.
func (s *Summary) Table() string {
	var b strings.Builder
	keys := make([]string, 0, len(s.Outcomes))
	for k := range s.Outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	w := len("OUTCOME")
	for _, k := range keys {
		w = max(w, len(k))
	}
	fmt.Fprintf(&b, "%-*s  %7s\n", w, "OUTCOME", "RECORDS")
	for _, k := range keys {
		fmt.Fprintf(&b, "%-*s  %7d\n", w, k, s.Outcomes[k])
	}
	fmt.Fprintf(&b, "%-*s  %7d\n", w, "total", s.Records)
	for _, n := range s.NotReplayable {
		fmt.Fprintf(&b, "not replayable: %s\n", n)
	}
	if s.ProduceFailures > 0 {
		fmt.Fprintf(&b, "outputs not produced: %d\n", s.ProduceFailures)
	}
	return b.String()
}

// Replayer re-runs input records through the bridge, outside the live
// consumer group: its own client, no group, no commits.
type Replayer struct {
	outMu sync.Mutex // dry-run lines come from every lane
	o     Options
	cl    *kgo.Client
	adm   *kadm.Client
	log   *zap.Logger
}

// New connects.
func New(o Options) (*Replayer, error) {
	if o.Codec == nil || (!o.DryRun && (o.Handle == nil || o.Fallback == nil)) {
		return nil, errors.New("replay: Codec, and Handle and Fallback unless a dry run, are required")
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 16
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	cl, err := kgo.NewClient(append(slices.Clone(o.Kafka), kgo.ProducerLinger(2*time.Millisecond))...)
	if err != nil {
		return nil, fmt.Errorf("replay: kafka client: %w", err)
	}
	return &Replayer{o: o, cl: cl, adm: kadm.NewClient(cl), log: o.Logger}, nil
}

// Close releases the client.
func (r *Replayer) Close() { r.cl.Close() }

// partitions lists topic's partitions, or checks that p exists (p ≥ 0).
func (r *Replayer) partitions(ctx context.Context, topic string, p int32) ([]int32, error) {
	td, err := r.adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	d, ok := td[topic]
	if !ok || d.Err != nil {
		return nil, fmt.Errorf("topic %s does not exist", topic)
	}
	all := d.Partitions.Numbers()
	if p < 0 {
		return all, nil
	}
	if !slices.Contains(all, p) {
		return nil, fmt.Errorf("topic %s has no partition %d (it has %d)", topic, p, len(all))
	}
	return []int32{p}, nil
}

// OffsetRanges is [from, to) of partition p of topic (p < 0: every
// partition); to < 0 means the end offset now. from below the log start
// fails: those records are gone.
func (r *Replayer) OffsetRanges(ctx context.Context, topic string, p int32, from, to int64) ([]Range, error) {
	parts, err := r.partitions(ctx, topic, p)
	if err != nil {
		return nil, err
	}
	starts, err := r.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	ends, err := r.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	var out []Range
	for _, part := range parts {
		s, _ := starts.Lookup(topic, part)
		e, _ := ends.Lookup(topic, part)
		if from < s.Offset {
			return nil, fmt.Errorf("%s/%d: --from-offset %d is below the log start %d (deleted by retention)", topic, part, from, s.Offset)
		}
		end := e.Offset
		if to >= 0 {
			end = min(to, e.Offset)
		}
		if from < end {
			out = append(out, Range{Topic: topic, Partition: part, From: from, To: end})
		}
	}
	return out, nil
}

// TimeRanges is the records of topic (partition p, or every one if p < 0)
// with timestamps in [since, until); a zero until means up to the end now.
func (r *Replayer) TimeRanges(ctx context.Context, topic string, p int32, since, until time.Time) ([]Range, error) {
	parts, err := r.partitions(ctx, topic, p)
	if err != nil {
		return nil, err
	}
	froms, err := r.adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), topic)
	if err != nil {
		return nil, fmt.Errorf("offsets of %s at %s: %w", topic, since.Format(time.RFC3339), err)
	}
	ends, err := r.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	var tos kadm.ListedOffsets
	if !until.IsZero() {
		if tos, err = r.adm.ListOffsetsAfterMilli(ctx, until.UnixMilli(), topic); err != nil {
			return nil, fmt.Errorf("offsets of %s at %s: %w", topic, until.Format(time.RFC3339), err)
		}
	}
	var out []Range
	for _, part := range parts {
		f, _ := froms.Lookup(topic, part)
		e, _ := ends.Lookup(topic, part)
		to := e.Offset
		if tos != nil {
			if t, ok := tos.Lookup(topic, part); ok && t.Offset >= 0 {
				to = min(t.Offset, e.Offset)
			}
		}
		if f.Offset >= 0 && f.Offset < to {
			out = append(out, Range{Topic: topic, Partition: part, From: f.Offset, To: to})
		}
	}
	return out, nil
}

// read returns the records of ranges in offset order per partition.
func (r *Replayer) read(ctx context.Context, ranges []Range) ([]*kgo.Record, error) {
	want := map[string]map[int32]kgo.Offset{}
	end := map[string]map[int32]int64{}
	left := 0
	for _, rg := range ranges {
		if rg.From >= rg.To {
			continue
		}
		if want[rg.Topic] == nil {
			want[rg.Topic], end[rg.Topic] = map[int32]kgo.Offset{}, map[int32]int64{}
		}
		want[rg.Topic][rg.Partition] = kgo.NewOffset().At(rg.From)
		end[rg.Topic][rg.Partition] = rg.To
		left++
	}
	if left == 0 {
		return nil, nil
	}
	cl, err := kgo.NewClient(append(slices.Clone(r.o.Kafka), kgo.ConsumePartitions(want))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var recs []*kgo.Record
	done := map[string]map[int32]bool{}
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("%s/%d: %w", t, p, err))
		})
		if ferr != nil {
			return nil, fmt.Errorf("reading: %w", ferr)
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			to := end[fp.Topic][fp.Partition]
			for _, rec := range fp.Records {
				if rec.Offset < to {
					recs = append(recs, rec)
				}
			}
			last := int64(-1)
			if n := len(fp.Records); n > 0 {
				last = fp.Records[n-1].Offset
			}
			// Done once the range's last offset was seen, or the
			// partition's committed end is reached (transaction markers
			// and compaction leave gaps).
			if (last >= to-1 || fp.LastStableOffset >= 0 && last+1 >= fp.LastStableOffset && last >= 0) && !done[fp.Topic][fp.Partition] {
				if done[fp.Topic] == nil {
					done[fp.Topic] = map[int32]bool{}
				}
				done[fp.Topic][fp.Partition] = true
				left--
			}
		})
	}
	return recs, nil
}

// Ranges replays the records of ranges.
func (r *Replayer) Ranges(ctx context.Context, ranges []Range) (*Summary, error) {
	recs, err := r.read(ctx, ranges)
	if err != nil {
		return nil, err
	}
	return r.run(ctx, recs, &Summary{Outcomes: map[string]int{}})
}

// ErrorFilter chooses error events to replay.
type ErrorFilter struct {
	// Categories to replay; empty means every retryable error event.
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

type coord struct {
	topic     string
	partition int32
	offset    int64
}

// FromErrors replays the original records of the error events on
// errorTopic that f selects, each once, in source order. An original not
// carried in its event is read from its source topic if still retained.
func (r *Replayer) FromErrors(ctx context.Context, errorTopic string, f ErrorFilter) (*Summary, error) {
	ranges, err := r.OffsetRanges(ctx, errorTopic, -1, 0, -1)
	if err != nil {
		// Start offsets above 0: read from each partition's start.
		ranges, err = r.errorRanges(ctx, errorTopic)
		if err != nil {
			return nil, err
		}
	}
	evs, err := r.read(ctx, ranges)
	if err != nil {
		return nil, err
	}
	sum := &Summary{Outcomes: map[string]int{}}
	originals := map[coord]*kgo.Record{}
	var missing []coord
	for _, rec := range evs {
		v, err := r.o.Codec.Decode(ctx, errorTopic, rec.Value)
		if err != nil {
			r.log.Warn("skipping an undecodable error event", zap.Int32("partition", rec.Partition), zap.Int64("offset", rec.Offset), zap.Error(err))
			continue
		}
		e, ok := v.(*events.LoyaltyError)
		if !ok || !f.match(e) {
			continue
		}
		c := coord{e.Source.Topic, e.Source.Partition, e.Source.Offset}
		if _, seen := originals[c]; seen {
			continue
		}
		if e.OriginalValue == nil {
			originals[c] = nil
			missing = append(missing, c)
			continue
		}
		originals[c] = &kgo.Record{Topic: c.topic, Partition: c.partition, Offset: c.offset, Key: e.OriginalKey,
			Value: e.OriginalValue, Timestamp: e.Source.Timestamp}
	}
	if err := r.fetchOriginals(ctx, missing, originals, sum); err != nil {
		return nil, err
	}
	recs := make([]*kgo.Record, 0, len(originals))
	for _, rec := range originals {
		if rec != nil {
			recs = append(recs, rec)
		}
	}
	sort.Slice(recs, func(i, j int) bool {
		a, b := recs[i], recs[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Offset < b.Offset
	})
	return r.run(ctx, recs, sum)
}

func (r *Replayer) errorRanges(ctx context.Context, topic string) ([]Range, error) {
	parts, err := r.partitions(ctx, topic, -1)
	if err != nil {
		return nil, err
	}
	starts, err := r.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	ends, err := r.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []Range
	for _, p := range parts {
		s, _ := starts.Lookup(topic, p)
		e, _ := ends.Lookup(topic, p)
		out = append(out, Range{Topic: topic, Partition: p, From: s.Offset, To: e.Offset})
	}
	return out, nil
}

// fetchOriginals reads originals not carried by their error events.
func (r *Replayer) fetchOriginals(ctx context.Context, missing []coord, originals map[coord]*kgo.Record, sum *Summary) error {
	var ranges []Range
	for _, c := range missing {
		starts, err := r.adm.ListStartOffsets(ctx, c.topic)
		if err != nil {
			return fmt.Errorf("start offsets of %s: %w", c.topic, err)
		}
		s, ok := starts.Lookup(c.topic, c.partition)
		if !ok || c.offset < s.Offset {
			sum.NotReplayable = append(sum.NotReplayable,
				fmt.Sprintf("%s (original not in the error event and no longer retained)", events.SourceID(c.topic, c.partition, c.offset)))
			delete(originals, c)
			continue
		}
		ranges = append(ranges, Range{Topic: c.topic, Partition: c.partition, From: c.offset, To: c.offset + 1})
	}
	for _, rg := range ranges {
		recs, err := r.read(ctx, []Range{rg})
		if err != nil {
			return err
		}
		c := coord{rg.Topic, rg.Partition, rg.From}
		if len(recs) == 0 {
			sum.NotReplayable = append(sum.NotReplayable, fmt.Sprintf("%s (not found)", events.SourceID(c.topic, c.partition, c.offset)))
			delete(originals, c)
			continue
		}
		originals[c] = recs[0]
	}
	return nil
}

// run handles recs: per-key lanes keep each key's records in order, up to
// MaxInFlight at once, paced by Rate; outputs are produced asynchronously
// and flushed before it returns.
func (r *Replayer) run(ctx context.Context, recs []*kgo.Record, sum *Summary) (*Summary, error) {
	var (
		mu   sync.Mutex
		done int
	)
	total := len(recs)
	count := func(label string) {
		mu.Lock()
		defer mu.Unlock()
		sum.Outcomes[label]++
		sum.Records++
		done++
		if r.o.Progress != nil {
			r.o.Progress(done, total)
		}
	}
	var limiter *rate.Limiter
	if r.o.Rate > 0 {
		limiter = rate.NewLimiter(rate.Limit(r.o.Rate), 1)
	}
	lanes := make([]chan *kgo.Record, r.o.MaxInFlight)
	var wg sync.WaitGroup
	seed := maphash.MakeSeed()
	for i := range lanes {
		lanes[i] = make(chan *kgo.Record, 16)
		wg.Go(func() {
			for rec := range lanes[i] {
				if r.o.DryRun {
					count(r.dryRun(ctx, rec))
					continue
				}
				r.handle(ctx, rec, count, &mu, sum)
			}
		})
	}
	var err error
	for i, rec := range recs {
		if limiter != nil {
			if err = limiter.Wait(ctx); err != nil {
				break
			}
		}
		key := rec.Key
		if len(key) == 0 {
			key = fmt.Appendf(nil, "%s/%d/%d", rec.Topic, rec.Partition, rec.Offset)
		}
		select {
		case lanes[maphash.Bytes(seed, key)%uint64(len(lanes))] <- recs[i]:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			break
		}
	}
	for _, l := range lanes {
		close(l)
	}
	wg.Wait()
	if ferr := r.cl.Flush(context.WithoutCancel(ctx)); ferr != nil && err == nil {
		err = ferr
	}
	return sum, err
}

func (r *Replayer) handle(ctx context.Context, rec *kgo.Record, count func(string), mu *sync.Mutex, sum *Summary) {
	out, err := r.o.Handle(ctx, rec, pipeline.Meta{Fresh: true})
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if out, err = r.o.Fallback(rec, err); err != nil {
			count("error INTERNAL (not produced)")
			return
		}
	}
	label := r.label(ctx, out)
	var wg sync.WaitGroup
	failed := false
	for _, o := range out {
		wg.Add(1)
		r.cl.Produce(ctx, o, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				sum.ProduceFailures++
				failed = true
				mu.Unlock()
				r.log.Error("output not produced", zap.String("topic", o.Topic), zap.Error(err))
			}
		})
	}
	wg.Wait()
	mu.Lock()
	if failed {
		label += " (not produced)"
	}
	mu.Unlock()
	count(label)
}

// label is the outcome an output record carries.
func (r *Replayer) label(ctx context.Context, out []*kgo.Record) string {
	if len(out) == 0 {
		return "no output"
	}
	v, err := r.o.Codec.Decode(ctx, out[0].Topic, out[0].Value)
	if err != nil {
		return "undecodable output"
	}
	switch x := v.(type) {
	case *events.LoyaltyResult:
		return string(x.Outcome)
	case *events.LoyaltyError:
		return "error " + string(x.Category)
	}
	return "unknown output"
}

// calls names the API calls an event type makes.
func calls(t events.EventType) string {
	switch t {
	case events.TypePurchaseCompleted:
		return "lookup-transaction (guard) + point-accrual"
	case events.TypeRedemptionRequested:
		return "lookup-transaction (guard) + point-redemption"
	case events.TypePurchaseRefunded:
		return "lookup-transaction + point-redemption"
	case events.TypeMemberOnboardRequested:
		return "user/onboard"
	case events.TypeMemberLinkRequested:
		return "user/link-member"
	case events.TypeMemberUnlinkRequested:
		return "user/unlink-member"
	}
	return "nothing (unknown type)"
}

// dryRun decodes and validates rec and says what would be called.
func (r *Replayer) dryRun(ctx context.Context, rec *kgo.Record) string {
	pos := events.SourceID(rec.Topic, rec.Partition, rec.Offset)
	r.outMu.Lock()
	defer r.outMu.Unlock()
	ev, err := r.o.Codec.DecodeEvent(ctx, rec.Topic, rec.Value)
	if err != nil {
		fmt.Fprintf(r.o.Out, "%s: would fail DECODE: %v\n", pos, err)
		return "would fail DECODE"
	}
	if err := ev.Validate(); err != nil {
		fmt.Fprintf(r.o.Out, "%s tx=%s: would fail VALIDATION: %v\n", pos, ev.ID(), err)
		return "would fail VALIDATION"
	}
	fmt.Fprintf(r.o.Out, "%s tx=%s %s: would call %s\n", pos, ev.ID(), ev.Type(), calls(ev.Type()))
	return "would call " + calls(ev.Type())
}
