package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/offsets"
)

func offsetsCommand() command {
	return command{summary: "show a group's committed offsets, end offsets and lag; reset them (offsets reset)", run: runOffsets}
}

const offsetsUsage = `usage: loyalty-bridge offsets [--group G] [--topic T]... [kafka flags]
       loyalty-bridge offsets reset [--group G] --topic T (--to-time TIME | --to-offset N | --to-earliest | --to-latest)
                                    [--partition P] [--force] [kafka flags]

Without a subcommand: the group's state and members, then per partition the
committed offset, the end offset and the lag, of the group (default
loyalty-bridge) on the given topics (default: the input topics).

reset moves the group's committed offsets of one topic (or one partition of
it) and shows the result. It refuses while the group has live members: stop
the bridges first, or they keep committing their own positions. --force
skips that check (for members that are gone but not yet expired), but Kafka
itself accepts a reset only from outside an empty group, and says so.
--to-time takes the first offset at or after TIME (the end if none);
--to-offset is kept within the partition's log start and end. Reprocessing
what is behind the committed offsets by moving them back is cruder than
'loyalty-bridge replay', which leaves the group alone.

TIME is RFC 3339 or a duration ago (90m). Kafka connection flags and
environment are those of run.

Examples:
  loyalty-bridge offsets --group loyalty-bridge
  loyalty-bridge offsets reset --group loyalty-bridge --topic loyalty.purchase --partition 3 --to-time 2026-11-23T10:00:00Z

Flags:
`

func runOffsets(ctx context.Context, e env, args []string) error {
	resetMode := len(args) > 0 && args[0] == "reset"
	if resetMode {
		args = args[1:]
	}
	fs := flag.NewFlagSet("offsets", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	b := flagenv.New(fs, config.EnvPrefix)
	var cfg struct {
		Kafka  config.Kafka
		Topics config.Topics
		Group  config.Group
	}
	cfg.Kafka.Define(b)
	cfg.Group.Define(b)
	cfg.Topics.Define(b)
	config.DefineFile(b)
	b.All()
	var topics []string
	fs.Func("topic", "topic (repeatable; default: the input topics)", func(s string) error {
		topics = append(topics, s)
		return nil
	})
	partition := fs.Int("partition", -1, "reset: only this partition")
	toTime := fs.String("to-time", "", "reset: to the first offset at or after TIME")
	toOffset := fs.Int64("to-offset", -1, "reset: to this offset")
	toEarliest := fs.Bool("to-earliest", false, "reset: to the log start")
	toLatest := fs.Bool("to-latest", false, "reset: to the end (skip everything not yet processed)")
	force := fs.Bool("force", false, "reset: skip the live-member check")
	fs.Usage = func() {
		fmt.Fprint(e.stderr, offsetsUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, func() error { return b.ParseWithFile(args, e.lookup, "config") }); err != nil {
		return err
	}
	var errs []error
	fs.Visit(func(f *flag.Flag) { // a negative value given is not "not given"
		if (f.Name == "to-offset" || f.Name == "partition") && strings.HasPrefix(f.Value.String(), "-") {
			errs = append(errs, fmt.Errorf("--%s %s: must be 0 or more", f.Name, f.Value))
		}
	})
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	errs = append(errs, cfg.Kafka.Validate(), cfg.Group.Validate(), cfg.Topics.Validate())
	var targets []offsets.Target
	at, atErr := config.ParseWhen(*toTime, time.Now())
	if *toTime != "" {
		targets = append(targets, offsets.ToTime(at))
	}
	if *toOffset >= 0 {
		targets = append(targets, offsets.ToOffset(*toOffset))
	}
	if *toEarliest {
		targets = append(targets, offsets.ToEarliest())
	}
	if *toLatest {
		targets = append(targets, offsets.ToLatest())
	}
	if resetMode {
		if len(targets) != 1 {
			errs = append(errs, errors.New("reset needs exactly one of --to-time, --to-offset, --to-earliest, --to-latest"))
		}
		if len(topics) != 1 {
			errs = append(errs, errors.New("reset needs one --topic"))
		}
		if atErr != nil {
			errs = append(errs, fmt.Errorf("--to-time: %w", atErr))
		}
	} else if *partition >= 0 || len(targets) > 0 || *force {
		errs = append(errs, errors.New("--partition, --to-* and --force go with 'offsets reset'"))
	}
	if err := errors.Join(errs...); err != nil {
		return &exitError{code: 2, err: err}
	}
	for _, w := range b.Warnings() {
		fmt.Fprintln(e.stderr, "warning:", w)
	}
	if len(topics) == 0 {
		topics = cfg.Topics.Build().Inputs()
	}
	cl, err := kafkaClient(&cfg.Kafka)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	group := cfg.Group.Name
	if !resetMode {
		return usageIf[*offsets.NoGroupError](offsets.Show(ctx, adm, e.stdout, group, topics))
	}
	if err := offsets.Idle(ctx, adm, group); err != nil {
		var live *offsets.LiveMembersError
		if !errors.As(err, &live) {
			return err
		}
		if !*force {
			return fmt.Errorf("%w: stop them first; --force skips this check", err)
		}
		fmt.Fprintf(e.stderr, "warning: %v; trying anyway (--force)\n", err)
	}
	moves, err := offsets.Reset(ctx, adm, group, topics[0], int32(*partition), targets[0])
	if err != nil {
		return usageIf[*offsets.NoPartitionError](err)
	}
	for _, m := range moves {
		if m.Clamped {
			fmt.Fprintf(e.stderr, "partition %d: --to-offset %d is outside [%d, %d]: %d\n", m.Partition, *toOffset, m.Start, m.End, m.To)
		}
	}
	offsets.PrintMoves(e.stdout, group, topics[0], moves)
	fmt.Fprintln(e.stdout)
	return offsets.Show(ctx, adm, e.stdout, group, topics[:1])
}
