package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
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
	if err := b.ParseWithFile(args, e.lookup, "config"); err != nil {
		return &exitError{code: 2, err: err}
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	errs = append(errs, cfg.Kafka.Validate(), cfg.Group.Validate(), cfg.Topics.Validate())
	var at time.Time
	if resetMode {
		chosen := 0
		for _, set := range []bool{*toTime != "", *toOffset >= 0, *toEarliest, *toLatest} {
			if set {
				chosen++
			}
		}
		if chosen != 1 {
			errs = append(errs, errors.New("reset needs exactly one of --to-time, --to-offset, --to-earliest, --to-latest"))
		}
		if len(topics) != 1 {
			errs = append(errs, errors.New("reset needs one --topic"))
		}
		var err error
		if at, err = parseWhen(*toTime, time.Now()); err != nil {
			errs = append(errs, fmt.Errorf("--to-time: %w", err))
		}
	} else if *partition >= 0 || *toTime != "" || *toOffset >= 0 || *toEarliest || *toLatest || *force {
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
	kopts, err := cfg.Kafka.Build()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if !resetMode {
		return showOffsets(ctx, e.stdout, adm, cfg.Group.Name, topics)
	}

	topic := topics[0]
	g, err := describeGroup(ctx, adm, cfg.Group.Name)
	if err != nil {
		return err
	}
	if len(g.Members) > 0 {
		if !*force {
			return fmt.Errorf("group %s has %s (%s): stop them first; --force skips this check",
				cfg.Group.Name, plural(len(g.Members), "live member"), memberList(g.Members))
		}
		fmt.Fprintf(e.stderr, "warning: group %s has %s (%s); trying anyway (--force)\n",
			cfg.Group.Name, plural(len(g.Members), "live member"), memberList(g.Members))
	}

	starts, err := listed(adm.ListStartOffsets(ctx, topic))
	if err != nil {
		return fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	ends, err := listed(adm.ListEndOffsets(ctx, topic))
	if err != nil {
		return fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	var target kadm.ListedOffsets
	switch {
	case *toTime != "":
		if target, err = listed(adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), topic)); err != nil {
			return fmt.Errorf("offsets of %s at %s: %w", topic, at.Format(time.RFC3339), err)
		}
	case *toEarliest:
		target = starts
	default:
		target = ends
	}
	before, err := adm.FetchOffsetsForTopics(ctx, cfg.Group.Name, topic)
	if err != nil {
		return fmt.Errorf("committed offsets of %s: %w", cfg.Group.Name, err)
	}
	to := kadm.Offsets{}
	var notes []string
	target.Each(func(l kadm.ListedOffset) {
		if *partition >= 0 && l.Partition != int32(*partition) {
			return
		}
		off := l.Offset
		if *toOffset >= 0 {
			s, _ := starts.Lookup(topic, l.Partition)
			e, _ := ends.Lookup(topic, l.Partition)
			off = min(max(*toOffset, s.Offset), e.Offset)
			if off != *toOffset {
				notes = append(notes, fmt.Sprintf("partition %d: --to-offset %d is outside [%d, %d]: %d", l.Partition, *toOffset, s.Offset, e.Offset, off))
			}
		}
		to.Add(kadm.Offset{Topic: topic, Partition: l.Partition, At: off, LeaderEpoch: -1})
	})
	if len(to) == 0 {
		return &exitError{code: 2, err: fmt.Errorf("topic %s has no partition %d", topic, *partition)}
	}
	resp, err := adm.CommitOffsets(ctx, cfg.Group.Name, to)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress) {
			return fmt.Errorf("the broker refused the reset: group %s is not empty (%w); stop its members, or wait for crashed ones to expire (session timeout)", cfg.Group.Name, err)
		}
		return fmt.Errorf("commit: %w", err)
	}
	for _, n := range notes {
		fmt.Fprintln(e.stderr, n)
	}
	fmt.Fprintf(e.stdout, "group %s: %s reset\n", cfg.Group.Name, topic)
	for _, o := range to.Sorted() {
		was := "-"
		if c, ok := before.Lookup(topic, o.Partition); ok && c.Err == nil && c.At >= 0 {
			was = fmt.Sprint(c.At)
		}
		fmt.Fprintf(e.stdout, "  partition %d: %s -> %d\n", o.Partition, was, o.At)
	}
	fmt.Fprintln(e.stdout)
	return showOffsets(ctx, e.stdout, adm, cfg.Group.Name, []string{topic})
}

// listed passes on a listing's first partition error as its error.
func listed(l kadm.ListedOffsets, err error) (kadm.ListedOffsets, error) {
	if err == nil {
		err = l.Error()
	}
	return l, err
}

func describeGroup(ctx context.Context, adm *kadm.Client, group string) (kadm.DescribedGroup, error) {
	gs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return kadm.DescribedGroup{}, fmt.Errorf("describe group %s: %w", group, err)
	}
	g := gs[group]
	if g.Err != nil && !errors.Is(g.Err, kerr.GroupIDNotFound) {
		return g, fmt.Errorf("describe group %s: %w", group, g.Err)
	}
	return g, nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func memberList(ms []kadm.DescribedGroupMember) string {
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		names = append(names, m.ClientID+"@"+strings.TrimPrefix(m.ClientHost, "/"))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func showOffsets(ctx context.Context, w io.Writer, adm *kadm.Client, group string, topics []string) error {
	g, err := describeGroup(ctx, adm, group)
	if err != nil {
		return err
	}
	committed, err := adm.FetchOffsetsForTopics(ctx, group, topics...)
	if err != nil {
		return fmt.Errorf("committed offsets of %s: %w", group, err)
	}
	if err := committed.Error(); err != nil {
		return fmt.Errorf("committed offsets of %s: %w", group, err)
	}
	ends, err := listed(adm.ListEndOffsets(ctx, topics...))
	if err != nil {
		return fmt.Errorf("end offsets: %w", err)
	}
	state := g.State
	if state == "" || state == "Dead" {
		state = "unknown to the cluster (never committed, or expired)"
	}
	fmt.Fprintf(w, "group %s: %s, %s", group, state, plural(len(g.Members), "member"))
	if len(g.Members) > 0 {
		fmt.Fprintf(w, " (%s)", memberList(g.Members))
	}
	fmt.Fprintln(w)

	type row struct {
		topic               string
		partition           int32
		committed, end, lag int64
	}
	var rows []row
	ends.Each(func(l kadm.ListedOffset) {
		r := row{topic: l.Topic, partition: l.Partition, committed: -1, end: l.Offset, lag: l.Offset}
		if c, ok := committed.Lookup(l.Topic, l.Partition); ok && c.Err == nil && c.At >= 0 {
			r.committed, r.lag = c.At, max(0, l.Offset-c.At)
		}
		rows = append(rows, r)
	})
	slices.SortFunc(rows, func(a, b row) int {
		if a.topic != b.topic {
			return strings.Compare(a.topic, b.topic)
		}
		return int(a.partition - b.partition)
	})
	width := len("TOPIC")
	for _, r := range rows {
		width = max(width, len(r.topic))
	}
	fmt.Fprintf(w, "%-*s  %9s  %12s  %12s  %10s\n", width, "TOPIC", "PARTITION", "COMMITTED", "END", "LAG")
	var total int64
	for _, r := range rows {
		c := "-"
		if r.committed >= 0 {
			c = fmt.Sprint(r.committed)
		}
		fmt.Fprintf(w, "%-*s  %9d  %12s  %12d  %10d\n", width, r.topic, r.partition, c, r.end, r.lag)
		total += r.lag
	}
	fmt.Fprintf(w, "%-*s  %9s  %12s  %12s  %10d\n", width, "total", "", "", "", total)
	return nil
}
