package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/progress"
	"github.com/loyalty-bridge/loyalty-bridge/internal/reconcile"
)

func reconcileCommand() command {
	return command{summary: "compare the replies of a time window with the partner's records (lookup-transaction-id)", run: runReconcile}
}

const reconcileUsage = `usage: loyalty-bridge reconcile --since TIME [--until TIME] [--topic T]... [--concurrency N] [--rate N/s] [--json] [connection and --partner-* flags of run]

Reads the result and error topics (T.result, T.error) of the input topics
(default: the purchase and refund-redemption topics) for the replies
written from --since up to --until (default: now), and asks the partner's
lookup-transaction-id about each accrual, redemption and refund
transaction once. It reports:

  MISSING            a result says APPLIED or ALREADY_APPLIED, the partner has no such transaction
  NOT_APPLIED        a result says APPLIED or ALREADY_APPLIED, the partner has it with a failed
                     status (--partner-failed-statuses): recorded, but it took no effect
  DIFFERS            the partner's points, amount or bitReference differ from the result's
                     (or from the amount and usedPoint of the input record it answers)
  ERROR_BUT_APPLIED  only error events answer the transaction, and the partner has it applied
  CLAWBACK_OVER_EARNED
                     the applied clawback slots of an original (<original>~cb1, ~cb2, ...)
                     took more points than it earned (for each original a refund result names)
  SHARED_CLAWBACK    the results of two or more refunds name one clawbackTransactionId: one
                     clawback stands for several refunds (too little, or a slot written twice)
  UNRECOGNISED       an answer the partner profile does not name (a status, a transactionType,
                     an error code): reported, never taken for applied or not found
  UNCHECKED          no answer (retries exhausted, credentials refused, an answer that does not
                     read), or no loyaltyId to ask with

Answers are read through the partner profile, as the bridge's guard reads
them: the --partner-* flags, LOYALTY_BRIDGE_PARTNER_* and the --config keys
of run (defaults: the simulator's names). Give reconcile the profile the
bridge runs with.

A transaction with a result is judged by its results (its earlier error
events, such as a failure a replay then fixed, say nothing more). A
refund's clawback is looked up by its result's clawbackTransactionId
(older results: by their bitReference, else by the refund's
transactionId). Member commands
(onboard, link, unlink) are out of scope: they have no transaction to look
up. NO_OP refunds wrote nothing and are skipped.

It writes nothing: no replies, no commits, no partner writes. It reads
with its own client (no consumer group). Lookups run --concurrency at once
and start at no more than --rate per second: the live bridge shares the
partner API. Progress goes to stderr (a bar on a terminal); the table, or
with --json the report, goes to stdout.

Exit status 0 when every transaction agrees with the partner; 1 on any
finding (a mismatch, an unrecognised answer, a transaction not checked)
or a failure; 2 for usage errors (nothing was looked up).

TIME is RFC 3339 (2026-11-23T10:00:00Z) or a duration ago (90m).
--rate is lookups per second (N or N/s) or per minute (N/m).

Examples:
  loyalty-bridge reconcile --since 24h
  loyalty-bridge reconcile --since 2026-11-23T00:00:00Z --until 2026-11-24T00:00:00Z --topic loyalty.purchase --json

Flags:
`

func runReconcile(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	b := flagenv.New(fs, config.EnvPrefix)
	var cfg struct {
		Kafka    config.Kafka
		Registry config.Registry
		Topics   config.Topics
		API      config.API
		Partner  config.Partner
	}
	cfg.Kafka.Define(b)
	cfg.Registry.Define(b)
	cfg.Topics.Define(b)
	cfg.API.Define(b, "api-")
	// The partner profile, as run's: what a lookup answer means (codes,
	// transaction types, statuses) is read as the bridge's guard reads it.
	cfg.Partner.Define(b, config.EnvPrefix)
	cfg.Partner.DefineLegacy(b)
	config.DefineFile(b)
	b.All()
	// The request's flags come from the command line only.
	var topics []string
	fs.Func("topic", "input topic whose replies to reconcile (repeatable; default: the purchase and refund-redemption topics)", func(s string) error {
		topics = append(topics, s)
		return nil
	})
	since := fs.String("since", "", "first reply time (RFC 3339 or a duration ago, e.g. 24h; required)")
	until := fs.String("until", "", "time to stop before (default: now)")
	concurrency := fs.Int("concurrency", reconcile.DefaultConcurrency, "lookups in progress at once")
	maxTx := fs.Int("max-transactions", reconcile.DefaultMaxTransactions, "transactions one run holds in memory; a window with more fails before any lookup")
	rateFlag := fs.String("rate", "", "lookups started per second, N or N/s, or per minute, N/m (default: no bound)")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of a table")
	fs.Usage = func() {
		fmt.Fprint(e.stderr, reconcileUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, func() error { return b.ParseWithFile(args, e.lookup, "config") }); err != nil {
		return err
	}
	now := time.Now()
	q, rate, err := reconcileRequest(cfg.Topics.Build(), topics, *since, *until, *rateFlag, *concurrency, now)
	err = errors.Join(err, cfg.Kafka.Validate(), cfg.Registry.Validate(), cfg.Topics.Validate(), cfg.API.Validate(), cfg.Partner.Validate())
	if *maxTx < 1 {
		err = errors.Join(err, fmt.Errorf("--max-transactions %d: must be at least 1", *maxTx))
	}
	if fs.NArg() > 0 {
		err = errors.Join(err, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	for _, w := range b.Warnings() {
		fmt.Fprintln(e.stderr, "warning:", w)
	}

	kopts, err := cfg.Kafka.Build()
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	reg, err := cfg.Registry.Build()
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	cd, err := codec.New(ctx, codec.Options{Registry: reg, Topics: cfg.Topics.Build()})
	if err != nil {
		return err
	}
	profile := cfg.Partner.Build()
	stack, err := cfg.API.Build(config.BuildOptions{MaxConns: *concurrency, Profile: profile})
	if err != nil {
		return usageIf[*config.SettingError](err)
	}
	defer stack.Close()
	prog := progress.New(e.stderr, "transactions looked up", now)
	done, planned := 0, 0
	r, err := reconcile.New(reconcile.Options{Kafka: kopts, Codec: cd, Partner: stack.Client, Profile: profile,
		Concurrency: *concurrency, Rate: rate, MaxTransactions: *maxTx,
		Progress: func(d, p int) {
			done, planned = d, p
			prog.Show(d, p)
		}})
	if err != nil {
		return err
	}
	rep, err := r.Run(ctx, q)
	if planned > 0 {
		prog.Finish(done, planned)
	}
	if rep != nil && (err == nil || ctx.Err() != nil) {
		if *asJSON {
			if werr := printJSON(e.stdout, rep); werr != nil {
				return werr
			}
		} else {
			fmt.Fprint(e.stdout, rep.Table())
		}
	}
	switch {
	case err != nil:
		return err
	case !rep.OK():
		return errors.New(rep.Problem())
	}
	return nil
}

// reconcileRequest reads the request's flags, every problem at once, each
// naming its flag.
func reconcileRequest(ts codec.Topics, topics []string, since, until, rateFlag string, concurrency int, now time.Time) (reconcile.Request, float64, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	ts = ts.WithDefaults()
	q := reconcile.Request{Inputs: topics}
	if len(q.Inputs) == 0 {
		q.Inputs = []string{ts.Purchase, ts.RefundRedemption}
	}
	for _, t := range q.Inputs {
		switch {
		case t == ts.MemberOnboarding:
			bad("--topic %s: member commands (onboard, link, unlink) are out of scope: they have no transaction to look up", t)
		case !slices.Contains(ts.Inputs(), t):
			bad("--topic %q: not an input topic (%s, %s)", t, ts.Purchase, ts.RefundRedemption)
		}
	}
	var err error
	if since == "" {
		bad("--since is required (RFC 3339, or a duration ago such as 24h)")
	} else if q.Since, err = config.ParseWhen(since, now); err != nil {
		bad("--since: %w", err)
	} else if q.Since.After(now) {
		bad("--since %s is in the future (now %s)", q.Since.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	if q.Until, err = config.ParseWhen(until, now); err != nil {
		bad("--until: %w", err)
	} else if !q.Until.IsZero() && !q.Since.IsZero() && !q.Until.After(q.Since) {
		bad("--until %s is not after --since %s", q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339))
	}
	if concurrency < 1 {
		bad("--concurrency %d: must be at least 1", concurrency)
	}
	rate, err := config.ParseRate(rateFlag)
	if err != nil {
		bad("--rate: %w", err)
	}
	if len(errs) > 0 {
		return q, 0, errors.Join(errs...)
	}
	q.Inputs = slices.Compact(slices.Sorted(slices.Values(q.Inputs)))
	return q, rate, nil
}
