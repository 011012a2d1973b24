package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/parking"
)

// maxOriginalWait bounds --original-wait: a parked refund holds a
// goroutine and a buffered record while it waits, and a week is what the
// parked topic keeps by default.
const maxOriginalWait = 24 * time.Hour

// DefaultParkedTopic is --parked-topic when it is not given, named after
// the consumer group as DefaultLedgerTopic is.
func DefaultParkedTopic(group string) string { return group + ".parked" }

// Parking is where refunds whose original purchase the partner does not
// know yet wait (package parking): the parked topic, how long a refund
// waits for its original, and how often it looks again.
type Parking struct {
	Topic             string // "" until Validate: then <group>.parked
	OriginalWait      time.Duration
	Backoff           time.Duration
	ReplicationFactor int
}

// Define defines the section's flags on b's flag set and binds them.
func (p *Parking) Define(b *flagenv.Binder) {
	fs := b.FlagSet()
	fs.StringVar(&p.Topic, "parked-topic", "", "where a refund whose original purchase the partner does not know yet waits, consumed by the same group (at-least-once delivery only: exactly-once and replay answer such a refund at once, a retryable ORIGINAL_NOT_FOUND); created at start-up when missing with the refund topic's partition count and delete retention (default <group>.parked)")
	fs.DurationVar(&p.OriginalWait, "original-wait", parking.DefaultOriginalWait, "how long a parked refund keeps looking for its original purchase, from when it was first parked; then it is a retryable TRANSIENT_EXHAUSTED error event, reason ORIGINAL_NOT_FOUND")
	fs.DurationVar(&p.Backoff, "park-backoff", parking.DefaultBackoff, fmt.Sprintf("the first wait before a parked refund looks again; it doubles, capped at %s", parking.MaxBackoff))
	fs.IntVar(&p.ReplicationFactor, "parked-replication-factor", -1, "replicas of the parked topic when the bridge creates it (-1: the brokers' default.replication.factor)")
}

// validate reports every problem of the section. group is --group, the
// default topic's prefix; inputs are the input topics, which the parked
// topic may not be.
func (p *Parking) validate(group string, inputs []string) error {
	var errs []error
	if p.Topic == "" && group != "" {
		p.Topic = DefaultParkedTopic(group)
	}
	if err := checkTopicName(p.Topic); err != nil {
		errs = append(errs, fmt.Errorf("--parked-topic: %w", err))
	}
	for _, in := range inputs {
		if p.Topic == in {
			errs = append(errs, fmt.Errorf("--parked-topic %s: is an input topic", p.Topic))
		}
	}
	if p.OriginalWait <= 0 || p.OriginalWait > maxOriginalWait {
		errs = append(errs, fmt.Errorf("--original-wait %s: want more than 0 and at most %s", p.OriginalWait, maxOriginalWait))
	}
	if p.Backoff <= 0 || p.Backoff > parking.MaxBackoff {
		errs = append(errs, fmt.Errorf("--park-backoff %s: want more than 0 and at most %s", p.Backoff, parking.MaxBackoff))
	}
	if p.ReplicationFactor == 0 || p.ReplicationFactor < -1 || p.ReplicationFactor > 32767 {
		errs = append(errs, fmt.Errorf("--parked-replication-factor %d: want -1 or 1 to 32767", p.ReplicationFactor))
	}
	return errors.Join(errs...)
}
