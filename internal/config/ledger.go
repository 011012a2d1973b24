package config

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
)

// minDedupWindow bounds --dedup-window from below: entries are trusted
// only for records younger than the window less ledger.DefaultSkew.
const minDedupWindow = time.Hour

// DefaultLedgerTopic is --ledger-topic when it is not given: named after
// the consumer group, so that each deployment has its own. loyalty-bench
// reads it to prepare and delete the topic of the bridge it runs.
func DefaultLedgerTopic(group string) string { return group + ".ledger" }

// Ledger is the transaction ledger (package ledger): on or off, its topic
// and how long it remembers.
type Ledger struct {
	On                bool
	Topic             string // "" until Validate: then <group>.ledger
	Window            time.Duration
	ReplicationFactor int
	// Dir keeps the entries on disk under it (ledger.Options.Dir); ""
	// keeps them in memory.
	Dir string
}

// Define defines the section's flags on b's flag set and binds them.
func (l *Ledger) Define(b *flagenv.Binder) {
	fs := b.FlagSet()
	fs.BoolVar(&l.On, "ledger", true, "keep the transaction ledger: an intent in Kafka before every accrual, redemption and clawback is sent, and its outcome after, so that a duplicate event, a record redone after an offsets reset or a replay is answered without a second write (false: the partner lookups alone guard)")
	fs.StringVar(&l.Topic, "ledger-topic", "", "the ledger's compacted topic, created at start-up when missing with as many partitions as the input topic that has most (default <group>.ledger)")
	fs.DurationVar(&l.Window, "dedup-window", ledger.DefaultWindow, "how long the ledger remembers a transaction (the ledger topic's retention.ms): copies of one event further apart than this are not recognised as one")
	fs.IntVar(&l.ReplicationFactor, "ledger-replication-factor", -1, "replicas of the ledger topic when the bridge creates it (-1: the brokers' default.replication.factor)")
	fs.StringVar(&l.Dir, "ledger-dir", "", "keep the ledger's entries on disk in this directory (created when missing; one process's at a time), with a checkpoint of what was read, so that a restart or a partition assigned again reads only what was written since: for partitions whose window does not fit in memory (empty: in memory, each partition read from the topic's start when assigned)")
}

// Validate reports every problem of the section. group is --group, the
// default topic's prefix.
func (l *Ledger) validate(group string) error {
	var errs []error
	if l.Topic == "" && group != "" {
		l.Topic = DefaultLedgerTopic(group)
	}
	if l.On {
		if l.Window < minDedupWindow {
			errs = append(errs, fmt.Errorf("--dedup-window %s: must be at least %s", l.Window, minDedupWindow))
		}
		if err := checkTopicName(l.Topic); err != nil {
			errs = append(errs, fmt.Errorf("--ledger-topic: %w", err))
		}
		if l.ReplicationFactor == 0 || l.ReplicationFactor < -1 || l.ReplicationFactor > 32767 {
			errs = append(errs, fmt.Errorf("--ledger-replication-factor %d: want -1 or 1 to 32767", l.ReplicationFactor))
		}
		if l.Dir != "" {
			if err := checkWritableDir(l.Dir); err != nil {
				errs = append(errs, fmt.Errorf("--ledger-dir %s: %w", l.Dir, err))
			}
		}
	}
	return errors.Join(errs...)
}

// checkWritableDir makes dir when missing and writes a file in it: a
// volume not mounted, read-only or owned by another user is reported at
// start-up, naming the flag, not at the first assignment.
func checkWritableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".writable-*")
	if err != nil {
		return err
	}
	return errors.Join(f.Close(), os.Remove(f.Name()))
}
