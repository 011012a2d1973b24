package replay

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// Request is what an operator asks a replay for, as the replay command's
// flags say it: a source (an offset range or a time window of an input
// topic, or the failures on an error topic) and how to go about it. Define
// puts its flags on a flag set; Validate checks and reads them; Apply sets
// the Options it decides; Replayer.Replay runs it.
type Request struct {
	// Topic is the input topic of a range: Partition with FromOffset and
	// ToOffset, or Since and Until.
	Topic string
	// Partition is -1 for every partition (a time window only).
	Partition int32
	// FromOffset and ToOffset are -1 when not given (ToOffset: the end
	// when the replay starts).
	FromOffset, ToOffset int64
	// Since and Until are zero when not given (Until: the end when the
	// replay starts). With FromErrors, Since chooses error events by
	// processedAt.
	Since, Until time.Time
	// FromErrors is the error topic whose failures to replay, those of
	// Categories (empty: every retryable error event).
	FromErrors          string
	Categories          []events.Category
	TrustErrorOriginals bool
	DryRun              bool
	// Rate bounds records started per second (0: no bound).
	Rate float64
	// MaxWait and FailFast: when to give up on a partner that is still
	// failing (Options.MaxWait, Options.FailFast).
	MaxWait  time.Duration
	FailFast bool

	raw struct {
		partition, fromOffset, toOffset optionalInt
		since, until, rate              string
		categories                      []string
	}
}

// Define defines the request's flags on fs. They come from the command line
// only, never the environment: an exported variable must not choose what
// is sent to the partner again.
func (q *Request) Define(fs *flag.FlagSet) {
	fs.StringVar(&q.Topic, "topic", "", "input topic to replay")
	fs.Var(&q.raw.partition, "partition", "partition (default with --since: every partition)")
	fs.Var(&q.raw.fromOffset, "from-offset", "first offset to replay")
	fs.Var(&q.raw.toOffset, "to-offset", "offset to stop before (default: the end when the replay starts)")
	fs.StringVar(&q.raw.since, "since", "", "first record time (RFC 3339 or a duration ago, e.g. 90m); with --from-errors: error events processed since")
	fs.StringVar(&q.raw.until, "until", "", "time to stop before (default: the end when the replay starts)")
	fs.StringVar(&q.FromErrors, "from-errors", "", "error topic (<input>.error) whose events' original records to replay")
	fs.Func("category", "error category to replay with --from-errors (repeatable; default: every retryable error event)", func(s string) error {
		q.raw.categories = append(q.raw.categories, strings.ToUpper(s))
		return nil
	})
	fs.BoolVar(&q.TrustErrorOriginals, "trust-error-originals", false,
		"with --from-errors: replay the original carried in an error event when its source record is gone (only if nobody but the bridge can write the error topic)")
	fs.BoolVar(&q.DryRun, "dry-run", false, "decode and validate, print what would be called, call nothing")
	fs.StringVar(&q.raw.rate, "rate", "", "records started per second, N or N/s, or per minute, N/m (default: no bound)")
	fs.DurationVar(&q.MaxWait, "max-wait", 0,
		"give up when no record has finished for this long, e.g. 10m: the partner is still failing; exit 1, \"still failing, replay later\" (default: wait as long as it takes)")
	fs.BoolVar(&q.FailFast, "fail-fast", false,
		"give up as soon as the partner is known to be failing: the circuit opens, the credentials are refused, or a record ends in a retryable error again (exit 1)")
}

// Validate reads the flags Define bound, TIMEs counted back from now, and
// reports every problem at once, each naming its flag; inputs are the
// configured input topics. A value that only Kafka can refuse (an offset
// past a partition's end) is refused by Replay.
func (q *Request) Validate(inputs []string, now time.Time) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	var err error
	if q.Since, err = config.ParseWhen(q.raw.since, now); err != nil {
		bad("--since: %w", err)
	}
	if q.Until, err = config.ParseWhen(q.raw.until, now); err != nil {
		bad("--until: %w", err)
	}
	if q.Rate, err = config.ParseRate(q.raw.rate); err != nil {
		bad("--rate: %w", err)
	}
	if q.MaxWait < 0 {
		bad("--max-wait %s: must not be negative", q.MaxWait)
	}
	if q.DryRun && (q.MaxWait > 0 || q.FailFast) {
		bad("--max-wait and --fail-fast go without --dry-run, which calls nothing")
	}
	q.Partition, q.FromOffset, q.ToOffset = -1, -1, -1
	for _, o := range []struct {
		name string
		v    optionalInt
		max  int64
		to   func(int64)
	}{
		{"partition", q.raw.partition, math.MaxInt32, func(v int64) { q.Partition = int32(v) }},
		{"from-offset", q.raw.fromOffset, math.MaxInt64, func(v int64) { q.FromOffset = v }},
		{"to-offset", q.raw.toOffset, math.MaxInt64, func(v int64) { q.ToOffset = v }},
	} {
		switch {
		case !o.v.set:
		case o.v.v < 0:
			bad("--%s %d: must be 0 or more", o.name, o.v.v)
		case o.v.v > o.max:
			bad("--%s %d: must be at most %d", o.name, o.v.v, o.max)
		default:
			o.to(o.v.v)
		}
	}
	q.Categories = q.Categories[:0]
	for _, c := range q.raw.categories {
		switch cat := events.Category(c); cat {
		case events.CategoryDecode, events.CategoryValidation, events.CategoryBusiness, events.CategoryAuth,
			events.CategoryTransientExhausted, events.CategoryInternal:
			q.Categories = append(q.Categories, cat)
		default:
			bad("--category %q: want DECODE, VALIDATION, BUSINESS, AUTH, TRANSIENT_EXHAUSTED or INTERNAL", c)
		}
	}
	errs = append(errs, q.conflicts(inputs))
	return errors.Join(errs...)
}

// conflicts reports the source flags that do not go together.
func (q *Request) conflicts(inputs []string) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	byOffset, byTime := q.raw.fromOffset.set, q.raw.since != ""
	switch {
	case q.FromErrors != "":
		if q.Topic != "" || byOffset || q.raw.toOffset.set || q.raw.until != "" || q.raw.partition.set {
			bad("--from-errors takes no --topic, --partition, --from-offset, --to-offset or --until")
		}
		if !slices.ContainsFunc(inputs, func(in string) bool { return q.FromErrors == in+".error" }) {
			bad("--from-errors %q: not the error topic of an input topic (%s.error)", q.FromErrors, strings.Join(inputs, ".error, "))
		}
	case q.Topic == "":
		bad("say what to replay: --topic with --from-offset or --since, or --from-errors")
	case !slices.Contains(inputs, q.Topic):
		bad("--topic %q: not an input topic (%s)", q.Topic, strings.Join(inputs, ", "))
	case byOffset && byTime:
		bad("--from-offset and --since are exclusive")
	case byOffset && !q.raw.partition.set:
		bad("--from-offset needs --partition")
	case !byOffset && !byTime:
		bad("--topic needs --from-offset or --since")
	case byOffset && q.raw.until != "":
		bad("--until goes with --since; use --to-offset with --from-offset")
	case byTime && q.raw.toOffset.set:
		bad("--to-offset goes with --from-offset; use --until with --since")
	case q.ToOffset >= 0 && q.FromOffset >= 0 && q.ToOffset <= q.FromOffset:
		bad("--to-offset %d is not after --from-offset %d", q.ToOffset, q.FromOffset)
	case !q.Until.IsZero() && !q.Since.IsZero() && !q.Until.After(q.Since):
		bad("--until %s is not after --since %s", q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339))
	}
	if len(q.raw.categories) > 0 && q.FromErrors == "" {
		bad("--category goes with --from-errors")
	}
	if q.TrustErrorOriginals && q.FromErrors == "" {
		bad("--trust-error-originals goes with --from-errors")
	}
	if q.raw.until != "" && q.raw.since == "" {
		bad("--until needs --since")
	}
	return errors.Join(errs...)
}

// Apply sets the Options the request decides: dry run, rate, trust in
// error-event originals, when to give up.
func (q *Request) Apply(o *Options) {
	o.DryRun, o.Rate, o.TrustErrorOriginals = q.DryRun, q.Rate, q.TrustErrorOriginals
	o.MaxWait, o.FailFast = q.MaxWait, q.FailFast
}

// Replay plans and runs q (validated), writing to w what it is about to
// replay. A request that cannot match what Kafka holds is a
// *RequestError naming the flag (see OffsetRanges, TimeRanges,
// FromErrors).
func (r *Replayer) Replay(ctx context.Context, q *Request, w io.Writer) (*Summary, error) {
	if q.FromErrors != "" {
		if err := r.sinceInFuture(ctx, q.FromErrors, q.Since); err != nil {
			return nil, err
		}
		what := "retryable error events"
		if len(q.Categories) > 0 {
			what = strings.Join(q.raw.categories, ", ") + " error events"
		}
		if !q.Since.IsZero() {
			what += " processed since " + q.Since.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "replaying the records named by the %s on %s\n", what, q.FromErrors)
		if q.TrustErrorOriginals {
			fmt.Fprintf(w, "trusting the originals carried in %s for records their source no longer holds\n", q.FromErrors)
		}
		return r.FromErrors(ctx, q.FromErrors, ErrorFilter{Categories: q.Categories, Since: q.Since})
	}
	var ranges []Range
	var err error
	if q.FromOffset >= 0 {
		ranges, err = r.OffsetRanges(ctx, q.Topic, q.Partition, q.FromOffset, q.ToOffset)
	} else {
		ranges, err = r.TimeRanges(ctx, q.Topic, q.Partition, q.Since, q.Until)
	}
	if err != nil {
		return nil, err
	}
	if len(ranges) == 0 {
		fmt.Fprintln(w, "nothing to replay: no records in that window")
	}
	for _, rg := range ranges {
		fmt.Fprintf(w, "replaying %s: up to %d records\n", rg, rg.Len())
	}
	return r.Ranges(ctx, ranges)
}

// RequestError is a request that cannot match what Kafka holds: a window
// after a topic's last record or in the future, an offset past a
// partition's end, a partition the topic does not have. Its message names
// the flag and what the topic holds (offsets, times). A command reports it
// as a usage error: nothing was replayed.
type RequestError struct {
	Flag string // "--since"
	msg  string
}

func (e *RequestError) Error() string { return e.msg }

func requestError(flag, format string, args ...any) *RequestError {
	return &RequestError{Flag: flag, msg: flag + " " + fmt.Sprintf(format, args...)}
}

// optionalInt is an integer flag that knows whether it was given, so that a
// negative value given is refused rather than taken for "not given".
type optionalInt struct {
	v   int64
	set bool
}

func (o *optionalInt) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatInt(o.v, 10)
}

func (o *optionalInt) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("want a whole number")
	}
	o.v, o.set = v, true
	return nil
}
