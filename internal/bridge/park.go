package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/parking"
)

// Parking (Options.ParkedTopic). Purchases and refunds are on different
// topics, so a refund may be read before its purchase was applied, and
// the partner's lookup then finds no original. Answered at once, the
// refund would be lost (a BUSINESS error is not replayed by default);
// waited for in place, it would stall its key, and in partition mode its
// partition, for minutes. So it is parked: its one output is the input
// record, unchanged, on the parked topic with the parking headers, and
// the pipeline commits the input past it like any answered record (in
// exactly-once mode, in the round's transaction). Nothing was written to
// the partner: the lookup of the original comes before any write, and no
// ledger intent was made.
//
// The bridge consumes the parked topic in the same group. A parked record
// waits until it is due (pipeline.Wait: its slot given back, its parked
// partition's commit point held, the input topics' not), then is handled
// exactly as its original, at its original position: the ledger entry,
// the guard and the reply (on the original topic's .result or .error,
// naming the original source) are the original's. Not found again, it is
// parked again (tries + 1, the next back-off), until OriginalWait has
// passed since it was first parked: then it is a TRANSIENT_EXHAUSTED
// error event, retryable (replay --from-errors takes it), reason
// ORIGINAL_NOT_FOUND, saying how long it waited and how often it looked.
// A parked record whose headers cannot be read is an INTERNAL error event
// on the refund topic's .error, reason PARKED_RECORD_INVALID, naming the
// parked record's own position: never a guess at where it came from.

// ReasonParkedRecordInvalid is the reason of the error event that answers
// a parked record whose parking headers are missing or malformed, or that
// is no refund.
const ReasonParkedRecordInvalid = "PARKED_RECORD_INVALID"

// isParked reports whether rec is a record of the parked topic.
func (b *Bridge) isParked(rec *kgo.Record) bool {
	return b.o.ParkedTopic != "" && rec.Topic == b.o.ParkedTopic
}

// parse reads a parked record's headers; only refunds' topic is parked.
func (b *Bridge) parse(rec *kgo.Record) (*parking.Parked, error) {
	return parking.Parse(rec, b.topics.RefundRedemption)
}

// unpark makes j, a parked record, its original once it is due: it waits
// until then, holding no slot. A record whose headers cannot be read
// stays as it is, answered on the refund topic's error topic.
func (b *Bridge) unpark(ctx context.Context, j *job) error {
	p, err := b.parse(j.rec)
	if err != nil {
		j.home = b.topics.RefundRedemption
		return err
	}
	j.rec, j.parked = p.Original, p
	if err := sleep(ctx, p.Due.Sub(b.now())); err != nil {
		return err
	}
	// The record's latency counts from when it was due, not from when
	// the pipeline took it to wait.
	j.start = b.now()
	return nil
}

// park is j's output when its original was not found (cause): the record
// parked, or parked again, or, once OriginalWait has passed since it was
// first parked, a retryable error event.
func (b *Bridge) park(j *job, cause error) ([]*kgo.Record, error) {
	now := b.now()
	first, tries := now, 1
	if j.parked != nil {
		first, tries = j.parked.First, j.parked.Tries+1
	}
	deadline := first.Add(b.o.OriginalWait)
	if !now.Before(deadline) {
		return b.giveUp(j, cause, fmt.Sprintf("waited %s for it, looked %d times (--original-wait %s)",
			now.Sub(first).Round(time.Millisecond), tries, b.o.OriginalWait))
	}
	// The last try is at the deadline, not a back-off past it.
	due := now.Add(parking.Backoff(b.o.ParkBackoff, tries))
	if due.After(deadline) {
		due = deadline
	}
	rec := parking.Park(b.o.ParkedTopic, j.rec, first, due, tries)
	if n := recordBytes(rec); n > b.o.MaxOutputBytes {
		return b.giveUp(j, cause, fmt.Sprintf("not parked: %d bytes with its headers, over %d", n, b.o.MaxOutputBytes))
	}
	if m := b.o.Metrics; m != nil {
		m.RefundsParked.Inc()
	}
	b.log.Debug("refund parked: original not found yet", zap.String("transactionId", j.st.id),
		zap.String("topic", j.rec.Topic), zap.Int32("partition", j.rec.Partition), zap.Int64("offset", j.rec.Offset),
		zap.Int("tries", tries), zap.Time("due", due))
	return []*kgo.Record{rec}, nil
}

// giveUp answers a refund whose original was not found with a retryable
// TRANSIENT_EXHAUSTED error event: a later replay may find the purchase.
func (b *Bridge) giveUp(j *job, cause error, note string) ([]*kgo.Record, error) {
	if m := b.o.Metrics; m != nil {
		m.RefundsGivenUp.Inc()
	}
	b.log.Warn("refund given up: its original was not found", zap.String("transactionId", j.st.id),
		zap.String("topic", j.rec.Topic), zap.Int32("partition", j.rec.Partition), zap.Int64("offset", j.rec.Offset),
		zap.String("why", note))
	return b.failure(j, events.CategoryTransientExhausted, events.ReasonOriginalNotFound, fmt.Errorf("%w; %s", cause, note))
}
