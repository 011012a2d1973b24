package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/replay"
	"github.com/loyalty-bridge/loyalty-bridge/internal/service"
)

func replayCommand() command {
	return command{summary: "reprocess a partition range, a time window, or the failures on an error topic", run: runReplay}
}

const replayUsage = `usage: loyalty-bridge replay [connection flags of run] SOURCE [--dry-run] [--rate N] [--max-in-flight N]

SOURCE is one of:
  --topic T --partition P --from-offset A [--to-offset B]    offsets [A, B) (B: the end now)
  --topic T [--partition P] --since TIME [--until TIME]       records with timestamps in [since, until)
  --from-errors T.error [--category C]... [--since TIME]       the originals of error events
                                                               (default: the retryable ones)

Replays run the bridge's own handlers outside the live consumer group (no
group, no commits) with the idempotency guard always on: an accrual or
redemption that was applied comes back ALREADY_APPLIED, nothing is granted
twice. Outputs go to the usual reply topics with the header replayed: true.
TIME is RFC 3339 (2026-11-23T10:00:00Z) or a duration ago (90m).
The exit status is 1 when something could not be replayed.

Examples:
  loyalty-bridge replay --from-errors loyalty.purchase.error --category TRANSIENT_EXHAUSTED --rate 50
  loyalty-bridge replay --topic loyalty.purchase --partition 3 --since 2026-11-23T10:00:00Z --until 2026-11-23T10:20:00Z --dry-run

Flags:
`

type replayFlags struct {
	topic, fromErrors, since, until string
	partition                       int
	fromOffset, toOffset            int64
	categories                      []string
	dryRun                          bool
	rate                            float64
}

func runReplay(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	cfg, b := config.Define(fs)
	var f replayFlags
	fs.StringVar(&f.topic, "topic", "", "input topic to replay")
	fs.IntVar(&f.partition, "partition", -1, "partition (default: every partition)")
	fs.Int64Var(&f.fromOffset, "from-offset", -1, "first offset to replay")
	fs.Int64Var(&f.toOffset, "to-offset", -1, "offset to stop before (default: the end now)")
	fs.StringVar(&f.since, "since", "", "first record time (RFC 3339 or a duration ago, e.g. 90m)")
	fs.StringVar(&f.until, "until", "", "time to stop before (default: the end now)")
	fs.StringVar(&f.fromErrors, "from-errors", "", "error topic whose events' originals to replay")
	fs.Func("category", "error category to replay from --from-errors (repeatable; default: every retryable one)", func(s string) error {
		f.categories = append(f.categories, strings.ToUpper(s))
		return nil
	})
	fs.BoolVar(&f.dryRun, "dry-run", false, "decode and validate, print what would be called, call nothing")
	fs.Float64Var(&f.rate, "rate", 0, "records started per second (0: no bound)")
	fs.Usage = func() {
		fmt.Fprint(e.stderr, replayUsage)
		fs.PrintDefaults()
	}
	// Replay is gentler than the live bridge by default (set on the value,
	// not through fs.Set, so the environment and file still apply).
	mif := fs.Lookup("max-in-flight")
	_ = mif.Value.Set("16")
	mif.DefValue = "16"
	if err := b.ParseWithFile(args, e.lookup, "config"); err != nil {
		return &exitError{code: 2, err: err}
	}
	now := time.Now()
	since, until, err := f.times(now)
	if err == nil {
		err = f.check(since)
	}
	if err == nil && !f.dryRun {
		err = cfg.Validate()
	} else if err == nil {
		err = cfg.ValidateKafka()
	}
	if fs.NArg() > 0 {
		err = errors.Join(err, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if cfg.AuthURL == "" {
		cfg.AuthURL = cfg.APIBaseURL
	}

	deps, err := service.Connect(ctx, cfg, service.Options{NoAPI: f.dryRun})
	if err != nil {
		return err
	}
	defer deps.Close()
	opts := replay.Options{Kafka: deps.KafkaOpts, Codec: deps.Codec, DryRun: f.dryRun, Out: e.stdout, Rate: f.rate,
		MaxInFlight: cfg.MaxInFlight, Logger: deps.Log}
	if !f.dryRun {
		br, err := deps.Bridge(true)
		if err != nil {
			return err
		}
		opts.Handle, opts.Fallback = br.Handle, br.Fallback
	}
	prog := newProgress(e.stderr, "records replayed", now)
	var pmu sync.Mutex
	opts.Progress = func(done, total int) {
		pmu.Lock()
		defer pmu.Unlock()
		prog.show(done, total)
	}
	r, err := replay.New(opts)
	if err != nil {
		return err
	}
	defer r.Close()

	var sum *replay.Summary
	switch {
	case f.fromErrors != "":
		cats := make([]events.Category, 0, len(f.categories))
		for _, c := range f.categories {
			cats = append(cats, events.Category(c))
		}
		sum, err = r.FromErrors(ctx, f.fromErrors, replay.ErrorFilter{Categories: cats, Since: since})
	default:
		var ranges []replay.Range
		if f.fromOffset >= 0 {
			ranges, err = r.OffsetRanges(ctx, f.topic, int32(f.partition), f.fromOffset, f.toOffset)
		} else {
			ranges, err = r.TimeRanges(ctx, f.topic, int32(f.partition), since, until)
		}
		if err != nil {
			return err
		}
		sum, err = r.Ranges(ctx, ranges)
	}
	if sum != nil {
		prog.finish(sum.Records, sum.Records)
		fmt.Fprintf(e.stdout, "\n%s", sum.Table())
	}
	if err != nil {
		return err
	}
	if !sum.OK() {
		return errors.New("not everything was replayed (see above)")
	}
	return nil
}

func (f *replayFlags) times(now time.Time) (since, until time.Time, err error) {
	if since, err = parseWhen(f.since, now); err != nil {
		return since, until, fmt.Errorf("--since: %w", err)
	}
	if until, err = parseWhen(f.until, now); err != nil {
		return since, until, fmt.Errorf("--until: %w", err)
	}
	return since, until, nil
}

func (f *replayFlags) check(since time.Time) error {
	var errs []error
	byOffset, byTime := f.fromOffset >= 0, !since.IsZero()
	switch {
	case f.fromErrors != "":
		if f.topic != "" || byOffset || f.until != "" {
			errs = append(errs, errors.New("--from-errors takes no --topic, --from-offset or --until"))
		}
		if !strings.HasSuffix(f.fromErrors, ".error") {
			errs = append(errs, fmt.Errorf("--from-errors %q: want an error topic (<input>.error)", f.fromErrors))
		}
		for _, c := range f.categories {
			switch events.Category(c) {
			case events.CategoryDecode, events.CategoryValidation, events.CategoryBusiness, events.CategoryAuth,
				events.CategoryTransientExhausted, events.CategoryInternal:
			default:
				errs = append(errs, fmt.Errorf("--category %q: not an error category", c))
			}
		}
	case f.topic == "":
		errs = append(errs, errors.New("say what to replay: --topic with --from-offset or --since, or --from-errors"))
	case byOffset && byTime:
		errs = append(errs, errors.New("--from-offset and --since are exclusive"))
	case byOffset && f.partition < 0:
		errs = append(errs, errors.New("--from-offset needs --partition"))
	case !byOffset && !byTime:
		errs = append(errs, errors.New("--topic needs --from-offset or --since"))
	case f.toOffset >= 0 && f.toOffset <= f.fromOffset:
		errs = append(errs, fmt.Errorf("--to-offset %d is not after --from-offset %d", f.toOffset, f.fromOffset))
	}
	if len(f.categories) > 0 && f.fromErrors == "" {
		errs = append(errs, errors.New("--category goes with --from-errors"))
	}
	if f.rate < 0 {
		errs = append(errs, errors.New("--rate must not be negative"))
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
