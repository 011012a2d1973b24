package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
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

Progress goes to stderr, a line every 2 s (a bar on a terminal) saying
what the records wait for when something holds them (the circuit open, the
credentials refused, calls waiting out a Retry-After); the summary by
outcome goes to stdout. A replay against a partner that is still down
waits: --max-wait gives up when no record has finished for that long,
--fail-fast as soon as the partner is known to be failing ("still failing,
replay later", exit 1).

Exit status 1
when something was not replayed: an error event refused or whose original
differs from its source, a source record no longer retained (and not
replayed from a trusted original), a replay that ended in a retryable error
again (TRANSIENT_EXHAUSTED, AUTH, INTERNAL), an output Kafka did not take,
an interruption; 2 for usage errors, a window that cannot match what the
topic holds among them (a --since in the future or after its last record,
a --from-offset or --to-offset past a partition's end, a partition it does
not have: the message says what the topic holds), and nothing is replayed.

Examples:
  loyalty-bridge replay --from-errors loyalty.purchase.error --category TRANSIENT_EXHAUSTED --rate 50/s
  loyalty-bridge replay --topic loyalty.purchase --partition 3 \
    --since 2026-11-23T10:00:00Z --until 2026-11-23T10:20:00Z --dry-run

Flags:
`

func runReplay(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	cfg, b := config.DefineWith(fs, config.Defaults{MaxInFlight: replay.DefaultMaxInFlight, LogLevel: "warn"})
	var q replay.Request
	q.Define(fs)
	fs.Usage = func() {
		fmt.Fprint(e.stderr, replayUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, func() error { return b.ParseWithFile(args, e.lookup, "config") }); err != nil {
		return err
	}
	err := q.Validate(cfg.Topics.Build().Inputs(), time.Now())
	if q.DryRun { // calls nothing: the partner API settings do not matter
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

	log, err := cfg.Ops.Build(e.stderr)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if cfg.Ledger.Dir != "" && cfg.Ledger.On && !q.DryRun {
		// A store of its own, removed when it ends: the live bridge
		// holds --ledger-dir's (one process at a time), and a replay
		// reads each partition once, so a checkpoint would serve
		// nothing; but a window that does not fit the live bridge's
		// memory does not fit a replay's either.
		dir, err := ledger.ReplayDir(cfg.Ledger.Dir, log.Named("ledger"))
		if err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--ledger-dir %s: %w", cfg.Ledger.Dir, err)}
		}
		defer os.RemoveAll(dir)
		cfg.Ledger.Dir = dir
	}
	deps, err := service.Connect(ctx, cfg, service.Options{NoAPI: q.DryRun, Warnings: b.Warnings(), Logger: log, ClientOpts: e.kafka})
	if err != nil {
		return usageIf[*config.SettingError](err)
	}
	defer deps.Close()
	prog := progress.New(e.stderr, "records replayed", time.Now())
	opts := replay.Options{Kafka: deps.KafkaOpts, Codec: deps.Codec, Out: e.stdout,
		MaxInFlight: cfg.Processing.MaxInFlight, Mode: cfg.Processing.Ordering, MaxBuffered: cfg.Processing.MaxBuffered,
		DrainTimeout: cfg.Processing.DrainTimeout, Inputs: cfg.Topics.Build().Inputs(), Logger: deps.Log.Named("replay")}
	q.Apply(&opts)
	if !q.DryRun { // a dry run's lines are its progress
		opts.Tick, opts.WaitingFor = e.tick, deps.WaitingFor
		opts.Progress = func(p replay.Progress) {
			if p.Tick {
				prog.Tick(p.Done, p.Planned, p.Note())
			} else {
				prog.Update(p.Done, p.Planned)
			}
		}
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
	sum, err := r.Replay(ctx, &q, e.stderr)
	if err = usageIf[*replay.RequestError](err); err != nil && sum == nil {
		return err
	}
	if sum != nil {
		if q.DryRun {
			fmt.Fprintln(e.stdout)
		} else if sum.Planned > 0 {
			prog.Finish(sum.Records, sum.Planned)
		}
		fmt.Fprint(e.stdout, sum.Table())
	}
	switch {
	case err != nil:
		return err
	case sum.GaveUp != "":
		return errors.New(sum.StillFailing())
	case !sum.OK():
		return errors.New("not everything was replayed (see the summary)")
	}
	return nil
}
