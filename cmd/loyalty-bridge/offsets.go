package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
)

func offsetsCommand() command {
	return command{summary: "show a group's committed offsets, end offsets and lag; reset them (offsets reset)", run: runOffsets}
}

const offsetsUsage = `usage: loyalty-bridge offsets [--group G] [--topic T]... [kafka flags]
       loyalty-bridge offsets reset --group G --topic T (--to-time TIME | --to-offset N | --to-earliest | --to-latest)
                                    [--partition P] [--force] [kafka flags]

Without a subcommand: committed offset, end offset and lag per partition of
the group (default loyalty-bridge) on the given topics (default: the input
topics). reset moves the group's committed offsets; it refuses while the
group has live members (stop the bridges first) unless --force. TIME is
RFC 3339 or a duration ago (90m). Kafka connection flags and environment are
those of run.

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
	cfg, b := config.Define(fs)
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
	force := fs.Bool("force", false, "reset: even while the group has live members")
	fs.Usage = func() {
		fmt.Fprint(e.stderr, offsetsUsage)
		fs.PrintDefaults()
	}
	if err := b.ParseWithFile(args, e.lookup, "config"); err != nil {
		return &exitError{code: 2, err: err}
	}
	if err := cfg.ValidateKafka(); err != nil {
		return &exitError{code: 2, err: err}
	}
	if len(topics) == 0 {
		topics = cfg.Topics().Inputs()
	}
	kopts, err := cfg.KafkaOpts()
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
		return showOffsets(ctx, e.stdout, adm, cfg.Group, topics)
	}

	chosen := 0
	for _, set := range []bool{*toTime != "", *toOffset >= 0, *toEarliest, *toLatest} {
		if set {
			chosen++
		}
	}
	if chosen != 1 || len(topics) != 1 {
		return &exitError{code: 2, err: errors.New("reset needs one --topic and exactly one of --to-time, --to-offset, --to-earliest, --to-latest")}
	}
	topic := topics[0]
	groups, err := adm.DescribeGroups(ctx, cfg.Group)
	if err != nil {
		return fmt.Errorf("describe group %s: %w", cfg.Group, err)
	}
	if g, ok := groups[cfg.Group]; ok && len(g.Members) > 0 && !*force {
		return fmt.Errorf("group %s has %d live members: stop them first, or use --force", cfg.Group, len(g.Members))
	}
	var listed kadm.ListedOffsets
	switch {
	case *toTime != "":
		t, err := parseWhen(*toTime, time.Now())
		if err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--to-time: %w", err)}
		}
		listed, err = adm.ListOffsetsAfterMilli(ctx, t.UnixMilli(), topic)
		if err != nil {
			return err
		}
	case *toEarliest:
		if listed, err = adm.ListStartOffsets(ctx, topic); err != nil {
			return err
		}
	default:
		if listed, err = adm.ListEndOffsets(ctx, topic); err != nil {
			return err
		}
	}
	if err := listed.Error(); err != nil {
		return fmt.Errorf("offsets of %s: %w", topic, err)
	}
	to := kadm.Offsets{}
	n := 0
	listed.Each(func(l kadm.ListedOffset) {
		if *partition >= 0 && l.Partition != int32(*partition) {
			return
		}
		at := l.Offset
		if *toOffset >= 0 {
			at = min(*toOffset, l.Offset) // l is the end: no offset past it
		}
		to.Add(kadm.Offset{Topic: topic, Partition: l.Partition, At: at, LeaderEpoch: -1})
		n++
	})
	if n == 0 {
		return &exitError{code: 2, err: fmt.Errorf("topic %s has no partition %d", topic, *partition)}
	}
	resp, err := adm.CommitOffsets(ctx, cfg.Group, to)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if err := resp.Error(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	fmt.Fprintf(e.stdout, "group %s: %d partitions of %s reset\n", cfg.Group, n, topic)
	return showOffsets(ctx, e.stdout, adm, cfg.Group, []string{topic})
}

func showOffsets(ctx context.Context, w io.Writer, adm *kadm.Client, group string, topics []string) error {
	committed, err := adm.FetchOffsetsForTopics(ctx, group, topics...)
	if err != nil {
		return fmt.Errorf("committed offsets of %s: %w", group, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("end offsets: %w", err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("end offsets: %w", err)
	}
	type row struct {
		topic               string
		partition           int32
		committed, end, lag int64
	}
	var rows []row
	ends.Each(func(l kadm.ListedOffset) {
		r := row{topic: l.Topic, partition: l.Partition, committed: -1, end: l.Offset, lag: l.Offset}
		if c, ok := committed.Lookup(l.Topic, l.Partition); ok && c.Err == nil && c.At >= 0 {
			r.committed, r.lag = c.At, l.Offset-c.At
		}
		rows = append(rows, r)
	})
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].topic != rows[j].topic {
			return rows[i].topic < rows[j].topic
		}
		return rows[i].partition < rows[j].partition
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
	fmt.Fprintf(w, "%-*s  %9s  %12s  %12s  %10d\n", width, "total ("+group+")", "", "", "", total)
	return nil
}
