package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/progress"
	"github.com/loyalty-bridge/loyalty-bridge/internal/replay"
	"github.com/loyalty-bridge/loyalty-bridge/internal/service"
)

func replayCommand() command {
	return command{summary: "reprocess a partition range, a time window, or the failures on an error topic", run: runReplay}
}

const replayUsage = `usage: loyalty-bridge replay [connection flags of run] SOURCE [--dry-run] [--rate N/s] [--max-in-flight N]

SOURCE is one of:
  --topic T --partition P --from-offset A [--to-offset B]   offsets [A, B) of one partition
  --topic T [--partition P] --since TIME [--until TIME]      records from the first at or after
                                                             since to the first at or after until
  --from-errors T.error [--category C]... [--since TIME]     the records of T named by error events
    [--trust-error-originals]                                (default: every retryable one)
Without --to-offset or --until a range ends where the partition ends when
the replay starts.

A replay reads with its own client (no consumer group, no commits: the live
bridges are not disturbed) and runs the bridge's own handlers with the
idempotency guard always on: an accrual or redemption that was applied comes
back ALREADY_APPLIED, nothing is granted twice. Outputs go to the usual
reply topics with the header replayed: true. Records of one key are replayed
in offset order (--ordering). --dry-run decodes and validates, prints what
would be called, and calls and produces nothing.

--from-errors reads each record at the source position its error event
names, from T only: an error event naming another topic is refused, and one
whose carried original (--include-original) differs from the source record
is reported and neither is replayed. A record the source no longer holds is
replayed from its error event's original only with --trust-error-originals
(whoever can write T.error could otherwise have anything accrued by naming a
deleted offset: give it only when T.error's write ACL is the bridge's alone).

Member onboarding has no idempotency key: an onboarding failure whose
detail says it may have been applied is retryable like any other; check the
externalIds it names (or use --dry-run) before replaying the member topic.

TIME is RFC 3339 (2026-11-23T10:00:00Z) or a duration ago (90m).
--rate is records started per second (N or N/s) or per minute (N/m).

Progress goes to stderr, the summary by outcome to stdout. Exit status 1
when something was not replayed: an error event refused or whose original
differs from its source, a source record no longer retained (and not
replayed from a trusted original), a replay that ended in a retryable error
again (TRANSIENT_EXHAUSTED, AUTH, INTERNAL), an output Kafka did not take,
an interruption; 2 for usage errors.

Examples:
  loyalty-bridge replay --from-errors loyalty.purchase.error --category TRANSIENT_EXHAUSTED --rate 50/s
  loyalty-bridge replay --topic loyalty.purchase --partition 3 \
    --since 2026-11-23T10:00:00Z --until 2026-11-23T10:20:00Z --dry-run

Flags:
`

type replayFlags struct {
	topic, fromErrors, since, until, rate string
	partition                             int
	fromOffset, toOffset                  int64
	categories                            []string
	dryRun, trustOriginals                bool
}

func runReplay(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	cfg, b := config.DefineWith(fs, config.Defaults{MaxInFlight: replay.DefaultMaxInFlight})
	var f replayFlags
	fs.StringVar(&f.topic, "topic", "", "input topic to replay")
	fs.IntVar(&f.partition, "partition", -1, "partition (default with --since: every partition)")
	fs.Int64Var(&f.fromOffset, "from-offset", -1, "first offset to replay")
	fs.Int64Var(&f.toOffset, "to-offset", -1, "offset to stop before (default: the end when the replay starts)")
	fs.StringVar(&f.since, "since", "", "first record time (RFC 3339 or a duration ago, e.g. 90m); with --from-errors: error events processed since")
	fs.StringVar(&f.until, "until", "", "time to stop before (default: the end when the replay starts)")
	fs.StringVar(&f.fromErrors, "from-errors", "", "error topic (<input>.error) whose events' original records to replay")
	fs.Func("category", "error category to replay with --from-errors (repeatable; default: every retryable error event)", func(s string) error {
		f.categories = append(f.categories, strings.ToUpper(s))
		return nil
	})
	fs.BoolVar(&f.trustOriginals, "trust-error-originals", false,
		"with --from-errors: replay the original carried in an error event when its source record is gone (only if nobody but the bridge can write the error topic)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "decode and validate, print what would be called, call nothing")
	fs.StringVar(&f.rate, "rate", "", "records started per second, N or N/s, or per minute, N/m (default: no bound)")
	fs.Usage = func() {
		fmt.Fprint(e.stderr, replayUsage)
		fs.PrintDefaults()
	}
	if err := b.ParseWithFile(args, e.lookup, "config"); err != nil {
		return &exitError{code: 2, err: err}
	}
	now := time.Now()
	since, until, perSecond, err := f.parse(now)
	err = errors.Join(err, f.check(cfg.Topics.Build().Inputs()))
	if f.dryRun { // calls nothing: the partner API settings do not matter
		err = errors.Join(err, cfg.Kafka.Validate(), cfg.Registry.Validate(), cfg.Topics.Validate(), cfg.Processing.Validate())
	} else {
		err = errors.Join(err, cfg.Validate())
	}
	if fs.NArg() > 0 {
		err = errors.Join(err, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err != nil {
		return &exitError{code: 2, err: err}
	}

	deps, err := service.Connect(ctx, cfg, service.Options{NoAPI: f.dryRun, Warnings: b.Warnings(), LogOutput: e.stderr})
	if err != nil {
		return err
	}
	defer deps.Close()
	prog := progress.New(e.stderr, "records replayed", time.Now())
	opts := replay.Options{Kafka: deps.KafkaOpts, Codec: deps.Codec, DryRun: f.dryRun, Out: e.stdout, Rate: perSecond,
		MaxInFlight: cfg.Processing.MaxInFlight, Mode: cfg.Processing.Ordering, MaxBuffered: cfg.Processing.MaxBuffered,
		DrainTimeout: cfg.Processing.DrainTimeout,
		Logger:       deps.Log.Named("replay")}
	opts.Inputs, opts.TrustErrorOriginals = cfg.Topics.Build().Inputs(), f.trustOriginals
	if !f.dryRun { // a dry run's lines are its progress
		opts.Progress = prog.Show
		br, err := deps.Bridge(true)
		if err != nil {
			return err
		}
		opts.Handle, opts.Fallback = br.Handle, br.Fallback
	}
	r, err := replay.New(opts)
	if err != nil {
		return err
	}
	defer r.Close()

	var sum *replay.Summary
	if f.fromErrors != "" {
		cats := make([]events.Category, 0, len(f.categories))
		for _, c := range f.categories {
			cats = append(cats, events.Category(c))
		}
		what := "retryable error events"
		if len(cats) > 0 {
			what = strings.Join(f.categories, ", ") + " error events"
		}
		if !since.IsZero() {
			what += " processed since " + since.Format(time.RFC3339)
		}
		fmt.Fprintf(e.stderr, "replaying the records named by the %s on %s\n", what, f.fromErrors)
		if f.trustOriginals {
			fmt.Fprintf(e.stderr, "trusting the originals carried in %s for records their source no longer holds\n", f.fromErrors)
		}
		sum, err = r.FromErrors(ctx, f.fromErrors, replay.ErrorFilter{Categories: cats, Since: since})
	} else {
		var ranges []replay.Range
		if f.fromOffset >= 0 {
			ranges, err = r.OffsetRanges(ctx, f.topic, int32(f.partition), f.fromOffset, f.toOffset)
		} else {
			ranges, err = r.TimeRanges(ctx, f.topic, int32(f.partition), since, until)
		}
		if err != nil {
			return err
		}
		if len(ranges) == 0 {
			fmt.Fprintln(e.stderr, "nothing to replay: no records in that range")
		}
		for _, rg := range ranges {
			fmt.Fprintf(e.stderr, "replaying %s: up to %d records\n", rg, rg.Len())
		}
		sum, err = r.Ranges(ctx, ranges)
	}
	if sum != nil {
		if f.dryRun {
			fmt.Fprintln(e.stdout)
		} else if sum.Planned > 0 {
			prog.Finish(sum.Records, sum.Planned)
		}
		fmt.Fprint(e.stdout, sum.Table())
	}
	if err != nil {
		return err
	}
	if !sum.OK() {
		return errors.New("not everything was replayed (see the summary)")
	}
	return nil
}

// parse reads the times and the rate.
func (f *replayFlags) parse(now time.Time) (since, until time.Time, perSecond float64, err error) {
	var errs []error
	if since, err = parseWhen(f.since, now); err != nil {
		errs = append(errs, fmt.Errorf("--since: %w", err))
	}
	if until, err = parseWhen(f.until, now); err != nil {
		errs = append(errs, fmt.Errorf("--until: %w", err))
	}
	if perSecond, err = parseRate(f.rate); err != nil {
		errs = append(errs, fmt.Errorf("--rate: %w", err))
	}
	return since, until, perSecond, errors.Join(errs...)
}

// check reports every conflict between the source flags; inputs are the
// configured input topics.
func (f *replayFlags) check(inputs []string) error {
	var errs []error
	byOffset, byTime := f.fromOffset >= 0, f.since != ""
	switch {
	case f.fromErrors != "":
		if f.topic != "" || byOffset || f.toOffset >= 0 || f.until != "" || f.partition >= 0 {
			errs = append(errs, errors.New("--from-errors takes no --topic, --partition, --from-offset, --to-offset or --until"))
		}
		if !slices.ContainsFunc(inputs, func(in string) bool { return f.fromErrors == in+".error" }) {
			errs = append(errs, fmt.Errorf("--from-errors %q: not the error topic of an input topic (%s.error)", f.fromErrors,
				strings.Join(inputs, ".error, ")))
		}
		for _, c := range f.categories {
			switch events.Category(c) {
			case events.CategoryDecode, events.CategoryValidation, events.CategoryBusiness, events.CategoryAuth,
				events.CategoryTransientExhausted, events.CategoryInternal:
			default:
				errs = append(errs, fmt.Errorf("--category %q: want DECODE, VALIDATION, BUSINESS, AUTH, TRANSIENT_EXHAUSTED or INTERNAL", c))
			}
		}
	case f.topic == "":
		errs = append(errs, errors.New("say what to replay: --topic with --from-offset or --since, or --from-errors"))
	case !slices.Contains(inputs, f.topic):
		errs = append(errs, fmt.Errorf("--topic %q: not an input topic (%s)", f.topic, strings.Join(inputs, ", ")))
	case byOffset && byTime:
		errs = append(errs, errors.New("--from-offset and --since are exclusive"))
	case byOffset && f.partition < 0:
		errs = append(errs, errors.New("--from-offset needs --partition"))
	case !byOffset && !byTime:
		errs = append(errs, errors.New("--topic needs --from-offset or --since"))
	case byOffset && f.until != "":
		errs = append(errs, errors.New("--until goes with --since; use --to-offset with --from-offset"))
	case byTime && f.toOffset >= 0:
		errs = append(errs, errors.New("--to-offset goes with --from-offset; use --until with --since"))
	case f.toOffset >= 0 && f.toOffset <= f.fromOffset:
		errs = append(errs, fmt.Errorf("--to-offset %d is not after --from-offset %d", f.toOffset, f.fromOffset))
	}
	if len(f.categories) > 0 && f.fromErrors == "" {
		errs = append(errs, errors.New("--category goes with --from-errors"))
	}
	if f.trustOriginals && f.fromErrors == "" {
		errs = append(errs, errors.New("--trust-error-originals goes with --from-errors"))
	}
	if f.until != "" && f.since == "" {
		errs = append(errs, errors.New("--until needs --since"))
	}
	return errors.Join(errs...)
}

// parseWhen reads RFC 3339 or a duration ago ("90m"); "" is the zero time.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q: want RFC 3339 (2026-11-23T10:00:00Z) or a duration ago (90m)", s)
}

// parseRate reads "N", "N/s" or "N/m" as records per second; "" is 0 (no
// bound).
func parseRate(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	n, per := s, 1.0
	if i := strings.IndexByte(s, '/'); i >= 0 {
		switch s[i+1:] {
		case "s":
		case "m":
			per = 60
		default:
			return 0, fmt.Errorf("%q: want N, N/s or N/m", s)
		}
		n = s[:i]
	}
	v, err := strconv.ParseFloat(n, 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q: want a positive number of records, N, N/s or N/m", s)
	}
	return v / per, nil
}
