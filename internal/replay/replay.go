package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/offsetspan"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
)

// Defaults of Options.
const (
	DefaultMaxInFlight  = 16
	DefaultDrainTimeout = 10 * time.Second
	DefaultTick         = 2 * time.Second
)

// Progress is where a replay stands, as Options.Progress is told.
type Progress struct {
	// Done of Planned records finished (Planned is an upper bound for
	// ranges until their last record is read).
	Done, Planned int
	// Tick is set on the scheduled calls; the others follow a record.
	Tick bool
	// Idle is, on a tick, how long no record has finished (since the
	// replay started when none has).
	Idle time.Duration
	// Waiting is, on a tick, what Options.WaitingFor said records wait
	// for; "" when nothing is known to hold them.
	Waiting string

	tick time.Duration // Options.Tick
}

// roundIdle rounds a wait for a line: to the second, or to 100 ms when
// shorter (tests tick faster than people read).
func roundIdle(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// Note is what a progress line adds to the counts on a tick: what records
// wait for, and for how long none finished when that is a tick or more.
func (p Progress) Note() string {
	stalled := ""
	if p.Tick && p.Done < p.Planned && p.Idle >= p.tick {
		stalled = "no record finished for " + roundIdle(p.Idle).String()
	}
	switch {
	case stalled != "" && p.Waiting != "":
		return stalled + ": " + p.Waiting
	case stalled != "":
		return stalled + " (waiting for the partner's answers)"
	}
	return p.Waiting
}

// Options configures a Replayer. Every field but Codec (and Handle and
// Fallback outside a dry run) has a usable zero value.
type Options struct {
	// Kafka are the connection options (seeds, TLS, SASL, logger) of the
	// replay's own clients. Group options do not belong here.
	Kafka []kgo.Opt
	// Codec decodes inputs (dry run), error events (FromErrors) and
	// outputs (the summary's outcomes).
	Codec *codec.Codec
	// Inputs are the configured input topics. FromErrors reads only the
	// error topic of one of them, and reads a source record only from
	// that input topic: an error event naming any other topic is refused.
	// Empty: FromErrors refuses to run.
	Inputs []string
	// TrustErrorOriginals lets FromErrors replay the original carried in
	// an error event (originalKey/originalValue, written with
	// --include-original) when its source no longer holds the record.
	// Off (the default), such records are counted in Summary.SourceGone:
	// whoever can write an error topic could otherwise have anything
	// accrued by naming an offset that retention already deleted. Set it
	// only when the error topic's write ACL is the bridge's alone. While
	// the source holds the record, a carried original is never used: it
	// is checked against the source instead.
	TrustErrorOriginals bool
	// Handle and Fallback process a record: the bridge's, in replay mode
	// (guard always on, outputs marked replayed). Handle must return an
	// error only when its context ended; any other error goes to Fallback,
	// once. Not used in a dry run.
	Handle   pipeline.Handler
	Fallback pipeline.Fallback
	// DryRun decodes and validates every record and writes to Out what
	// would be called, calling nothing and producing nothing.
	DryRun bool
	// Out receives the dry run's lines, one per record (default: discard).
	Out io.Writer
	// Rate bounds records started per second; 0 means no bound. A replay
	// shares the partner API with the live bridge: keep it below the
	// headroom the live traffic leaves.
	Rate float64
	// MaxInFlight bounds records handled at once (default 16; a dry run
	// handles one at a time).
	MaxInFlight int
	// Mode orders the records of one partition as the live bridge does:
	// Key (the zero value) runs one key's records one at a time in offset
	// order and different keys concurrently.
	Mode ordering.Mode
	// MaxBuffered bounds records read from Kafka and not yet handled
	// (default 4 × MaxInFlight): a replay of a whole topic holds no more
	// than that in memory, plus one fetch.
	MaxBuffered int
	// DrainTimeout is how long records in flight may go on after the
	// context ends before they are abandoned too (default 10s). Abandoned
	// and never-started records are reported as not replayed.
	DrainTimeout time.Duration
	// Progress, when set, is called after each record and every Tick while
	// records are outstanding, whether or not any finished, so that a
	// stuck replay keeps saying so and why. Calls never overlap.
	Progress func(Progress)
	// Tick is how often Progress is called, and MaxWait and FailFast are
	// checked, on schedule (default 2s).
	Tick time.Duration
	// WaitingFor, when set, says what records wait for at a time (an open
	// circuit, refused credentials, retries: service.Deps.WaitingFor);
	// held is set when the partner is known to be failing. It is asked on
	// each tick and must be safe for concurrent use.
	WaitingFor func(now time.Time) (why string, held bool)
	// MaxWait gives up when no record has finished for this long (0:
	// wait as long as it takes): a batch replay against a partner that is
	// still down ends, reporting what was not replayed
	// (Summary.GaveUp), instead of holding its records for ever.
	MaxWait time.Duration
	// FailFast gives up at the first sign that the partner is still
	// failing: WaitingFor reports it held (circuit open, credentials
	// refused) or a record ends in a retryable error again.
	FailFast bool
	// Logger; nil means no logs.
	Logger *zap.Logger
	// Now is the clock that tells a window in the future from one after a
	// topic's last record (default time.Now).
	Now func() time.Time
}

// Range is the offsets [From, To) of one partition.
type Range offsetspan.Span

func (r Range) String() string {
	return fmt.Sprintf("%s/%d [%d, %d)", r.Topic, r.Partition, r.From, r.To)
}

// Len is the number of offsets in r, an upper bound of its records
// (compaction and transaction markers leave gaps).
func (r Range) Len() int64 { return max(0, r.To-r.From) }

// Replayer re-runs input records through the bridge, outside the live
// consumer group: its own clients, no group membership, no commits. One
// replay (Ranges or FromErrors) at a time; Close when done.
type Replayer struct {
	o   Options
	cl  *kgo.Client // produces outputs, lists offsets
	adm *kadm.Client
	log *zap.Logger
}

// New checks o and creates the producing client. It does not dial: the
// first request does.
func New(o Options) (*Replayer, error) {
	if o.Codec == nil {
		return nil, errors.New("replay: Options.Codec is required")
	}
	if !o.DryRun && (o.Handle == nil || o.Fallback == nil) {
		return nil, errors.New("replay: Options.Handle and Fallback are required unless DryRun")
	}
	if o.Rate < 0 {
		return nil, fmt.Errorf("replay: Options.Rate %v is negative", o.Rate)
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.DryRun {
		o.MaxInFlight = 1 // decoding is cheap; the lines come in offset order
	}
	if o.MaxBuffered <= 0 {
		o.MaxBuffered = 4 * o.MaxInFlight
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Tick <= 0 {
		o.Tick = DefaultTick
	}
	if o.MaxWait < 0 {
		return nil, fmt.Errorf("replay: Options.MaxWait %s is negative", o.MaxWait)
	}
	// Outputs go out as the live bridge's do: idempotent, acks=all, a
	// short linger (a replay waits for each record's outputs).
	cl, err := kgo.NewClient(append(slices.Clone(o.Kafka),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(2*time.Millisecond))...)
	if err != nil {
		return nil, fmt.Errorf("replay: kafka client: %w", err)
	}
	return &Replayer{o: o, cl: cl, adm: kadm.NewClient(cl), log: o.Logger}, nil
}

// Close releases the client; outputs not yet acknowledged are lost (a
// replay returns only after its outputs were acknowledged).
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
	slices.Sort(all)
	if p < 0 {
		return all, nil
	}
	if !slices.Contains(all, p) {
		return nil, requestError("--partition", "%d: topic %s has no partition %d (it has %d: 0 to %d)", p, topic, p, len(all), len(all)-1)
	}
	return []int32{p}, nil
}

// bounds are a partition's log start and its end for a replay: the last
// stable offset, so that a transaction open when the replay starts is
// neither waited for nor half read.
type bounds struct{ start, end int64 }

// holds says what offsets b holds, for a message.
func (b bounds) holds() string {
	if b.start >= b.end {
		return fmt.Sprintf("holds no records (its next offset is %d)", b.end)
	}
	return fmt.Sprintf("holds offsets %d to %d", b.start, b.end-1)
}

func (r *Replayer) bounds(ctx context.Context, topic string) (map[int32]bounds, error) {
	starts, err := r.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	ends, err := r.adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	out := map[int32]bounds{}
	ends.Each(func(e kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, e.Partition)
		out[e.Partition] = bounds{start: s.Offset, end: e.Offset}
	})
	return out, nil
}

// OffsetRanges plans the offsets [from, to) of partition p of topic (every
// partition if p < 0); to < 0 means the end when called: records produced
// later are not replayed. A range that cannot match is a *RequestError
// naming the partition's offsets: from below a partition's log start
// (those records are gone), from at or past its end, to past its end.
func (r *Replayer) OffsetRanges(ctx context.Context, topic string, p int32, from, to int64) ([]Range, error) {
	if from < 0 {
		return nil, requestError("--from-offset", "%d: must be 0 or more", from)
	}
	parts, err := r.partitions(ctx, topic, p)
	if err != nil {
		return nil, err
	}
	bs, err := r.bounds(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []Range
	for _, part := range parts {
		b := bs[part]
		switch {
		case from < b.start:
			return nil, requestError("--from-offset", "%d is below the log start of %s/%d, which %s (earlier records were deleted by retention)",
				from, topic, part, b.holds())
		case from >= b.end:
			return nil, requestError("--from-offset", "%d is beyond the end of %s/%d, which %s", from, topic, part, b.holds())
		case to > b.end:
			return nil, requestError("--to-offset", "%d is beyond the end of %s/%d, which %s (leave --to-offset out to replay to the end)",
				to, topic, part, b.holds())
		}
		end := b.end
		if to >= 0 {
			end = to
		}
		out = append(out, Range{Topic: topic, Partition: part, From: from, To: end})
	}
	return out, nil
}

// TimeRanges plans the records of topic (partition p, or every one if
// p < 0) from the first at or after since up to the first at or after
// until (a zero until: the end when called). Like Kafka's own tools it goes
// by offsets: a record whose producer stamped it out of order inside the
// window is replayed with its neighbours.
//
// A window that holds no record because it lies outside what the topic
// holds is a *RequestError saying when the topic's records were written:
// since after the last record (in the future, typically a mistyped year),
// until before the first one still held, or no records at all. A window
// between two records is no error: it plans nothing.
func (r *Replayer) TimeRanges(ctx context.Context, topic string, p int32, since, until time.Time) ([]Range, error) {
	if !until.IsZero() && !until.After(since) {
		return nil, requestError("--until", "%s is not after --since %s", until.Format(time.RFC3339), since.Format(time.RFC3339))
	}
	parts, err := r.partitions(ctx, topic, p)
	if err != nil {
		return nil, err
	}
	bs, err := r.bounds(ctx, topic)
	if err != nil {
		return nil, err
	}
	froms, err := r.afterMilli(ctx, topic, since)
	if err != nil {
		return nil, err
	}
	var tos map[int32]int64
	if !until.IsZero() {
		if tos, err = r.afterMilli(ctx, topic, until); err != nil {
			return nil, err
		}
	}
	var out []Range
	for _, part := range parts {
		b := bs[part]
		from, to := max(froms[part], b.start), b.end
		if t, ok := tos[part]; ok {
			to = min(t, b.end)
		}
		if from < to {
			out = append(out, Range{Topic: topic, Partition: part, From: from, To: to})
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	return nil, r.outside(ctx, topic, p, parts, bs, since, until)
}

// outside explains a time window of topic that holds no record: a
// *RequestError when the window lies outside the records of parts (or they
// hold none), nil when it falls between two records.
func (r *Replayer) outside(ctx context.Context, topic string, p int32, parts []int32, bs map[int32]bounds, since, until time.Time) error {
	where := topic
	if p >= 0 {
		where = fmt.Sprintf("%s/%d", topic, p)
	}
	sp := r.span(ctx, topic, parts, bs)
	now := r.o.Now()
	switch {
	case sp.empty:
		return requestError("--since", "%s: %s", since.Format(time.RFC3339), sp.describe(where))
	case since.After(now):
		return requestError("--since", "%s is in the future (now %s): %s", since.Format(time.RFC3339), now.Format(time.RFC3339), sp.describe(where))
	case !sp.last.IsZero() && since.After(sp.last):
		return requestError("--since", "%s is after the last record: %s", since.Format(time.RFC3339), sp.describe(where))
	case !until.IsZero() && !sp.first.IsZero() && !until.After(sp.first):
		return requestError("--until", "%s is not after the first record: %s", until.Format(time.RFC3339), sp.describe(where))
	}
	return nil
}

// span is when the records of some partitions were written (by their
// timestamps): zero times when unknown.
type span struct {
	first, last time.Time
	empty       bool // the partitions hold no records
}

// span asks Kafka when the records of topic's parts were written: the
// first record at or after the epoch and the record with the greatest
// timestamp (Kafka 3.0 or later; unknown otherwise). Best effort: it only
// explains an error.
func (r *Replayer) span(ctx context.Context, topic string, parts []int32, bs map[int32]bounds) span {
	s := span{empty: !slices.ContainsFunc(parts, func(p int32) bool { return bs[p].start < bs[p].end })}
	if s.empty {
		return s
	}
	firsts, err := r.adm.ListOffsetsAfterMilli(ctx, 0, topic)
	if err == nil {
		firsts.Each(func(l kadm.ListedOffset) {
			if slices.Contains(parts, l.Partition) && l.Err == nil && l.Timestamp >= 0 {
				if t := time.UnixMilli(l.Timestamp).UTC(); s.first.IsZero() || t.Before(s.first) {
					s.first = t
				}
			}
		})
	}
	lasts, err := r.adm.ListMaxTimestampOffsets(ctx, topic)
	if err == nil {
		lasts.Each(func(l kadm.ListedOffset) {
			if slices.Contains(parts, l.Partition) && l.Err == nil && l.Offset >= 0 && l.Timestamp >= 0 {
				if t := time.UnixMilli(l.Timestamp).UTC(); t.After(s.last) {
					s.last = t
				}
			}
		})
	}
	return s
}

// describe says when the records of where were written.
func (s span) describe(where string) string {
	first, last := s.first.Format(time.RFC3339), s.last.Format(time.RFC3339)
	switch {
	case s.empty:
		return where + " holds no records"
	case s.first.IsZero() || s.last.IsZero():
		return fmt.Sprintf("the records of %s carry no timestamps Kafka can list", where)
	case first == last:
		return fmt.Sprintf("the records of %s were all written at %s", where, first)
	}
	return fmt.Sprintf("the records of %s were written from %s to %s", where, first, last)
}

// sinceInFuture is a *RequestError when since is after now, saying when
// the records of topic were written; nil otherwise (asking Kafka nothing).
func (r *Replayer) sinceInFuture(ctx context.Context, topic string, since time.Time) error {
	now := r.o.Now()
	if !since.After(now) {
		return nil
	}
	where := "when the records of " + topic + " were written is unknown"
	parts, err := r.partitions(ctx, topic, -1)
	if err == nil {
		var bs map[int32]bounds
		if bs, err = r.bounds(ctx, topic); err == nil {
			where = r.span(ctx, topic, parts, bs).describe(topic)
		}
	}
	return requestError("--since", "%s is in the future (now %s): %s", since.Format(time.RFC3339), now.Format(time.RFC3339), where)
}

// afterMilli is, per partition, the first offset at or after t (the end
// offset when there is none).
func (r *Replayer) afterMilli(ctx context.Context, topic string, t time.Time) (map[int32]int64, error) {
	l, err := r.adm.ListOffsetsAfterMilli(ctx, t.UnixMilli(), topic)
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("offsets of %s at %s: %w", topic, t.Format(time.RFC3339), err)
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

// Ranges replays the records of ranges: each partition's in offset order
// as Mode says, stopping at each range's end.
func (r *Replayer) Ranges(ctx context.Context, ranges []Range) (*Summary, error) {
	planned := 0
	for _, rg := range ranges {
		planned += int(rg.Len())
	}
	sum := newSummary()
	err := r.run(ctx, planned, func(ctx context.Context, emit func(*kgo.Record) error) error {
		return r.stream(ctx, ranges, func(rec *kgo.Record) error { return emit(rec) })
	}, sum)
	return sum, err
}
