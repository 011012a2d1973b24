package bridge

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
)

// The transaction ledger (Options.Ledger, package ledger) is the bridge's
// own memory of what it sent. For an accrual, a redemption or a refund,
// Handle asks it first:
//
//   - settled: the record is answered from the entry, without a call
//     (ALREADY_APPLIED, or the NO_OP a capped refund got): a producer's
//     duplicate, a record redone after offsets were reset, a replay;
//   - an intent without an outcome: the record is guarded, and a refund
//     knows its own clawback slot exactly (the intent names it);
//   - nothing: the other rules decide (Fresh, replayed, ambiguous).
//
// Every write's intent is durable in Kafka before the write is sent, and
// the settled entry is one of the record's outputs, acknowledged before
// its offset is committed (in exactly-once mode, in its transaction).
// Within the process, the records of one transaction take turns (a lane
// per kind and transactionId), so that two copies in flight at once (the
// unordered mode, or two keys) see each other's entries. Between
// processes (a replay beside the live bridge), log order decides
// (order.go): a write is sent only once its intent has been read back
// with nothing of another process's below it.

// ledgerKind is the ledger's kind of a money event.
func ledgerKind(ev events.Event) (ledger.Kind, bool) {
	switch ev.(type) {
	case *events.PurchaseCompleted:
		return ledger.Accrual, true
	case *events.RedemptionRequested:
		return ledger.Redemption, true
	case *events.PurchaseRefunded:
		return ledger.Refund, true
	}
	return 0, false
}

// ledgerRetry bounds the wait between two tries at reading the ledger
// while Kafka does not answer.
const ledgerRetry = 5 * time.Second

// ledgered is j's view of the ledger: nil without one, or for an event
// that writes nothing.
type ledgered struct {
	l    *ledger.Ledger
	j    *job
	kind ledger.Kind
	id   string
	// w watches the transaction's entries that other processes write
	// while the record is handled (order.go).
	w       *ledger.Watch
	backoff time.Duration // between tries at an intent read back slowly
	release func()
}

// consult takes the transaction's lane and reads its entry, waiting out a
// Kafka that does not answer. A settled entry is returned for Handle to
// answer with; an intent guards the record.
func (b *Bridge) consult(ctx context.Context, j *job, m pipeline.Meta) (*ledgered, *ledger.Entry, error) {
	kind, ok := ledgerKind(j.ev)
	if b.o.Ledger == nil || !ok {
		return nil, nil, nil
	}
	lg := &ledgered{l: b.o.Ledger, j: j, kind: kind, id: j.ev.ID(), backoff: b.o.RetryBackoff}
	release, err := b.lanes.acquire(ctx, "ledger\x00"+ledger.Key(kind, lg.id))
	if err != nil {
		return nil, nil, err
	}
	lg.release = release
	for tries := 0; ; tries++ {
		e, w, err := lg.l.Watch(ctx, j.rec, m.Assignment, kind, lg.id)
		if err == nil {
			lg.w = w
			lg.release = func() { w.Close(); release() }
			if e != nil && e.State == ledger.Intent {
				// Sent before, outcome unknown: look before writing, and
				// a refund's slot is the one its intent names.
				j.st.guard, j.st.ledgerSlot = true, e.ClawbackID
				// No lookup before its write has landed or never will.
				if s := b.settledBy(e.At); s.After(j.st.settleAt) {
					j.st.settleAt = s
				}
			}
			if e == nil && lg.l.Covers(j.rec) {
				// Never sent by any member: nothing to look for, and
				// no slot a refund could take for its own.
				j.st.guard = false
			}
			return lg, e, nil
		}
		if ctx.Err() != nil {
			release()
			return nil, nil, ctx.Err()
		}
		b.log.Warn("transaction ledger not readable; record waits", zap.String("topic", j.rec.Topic),
			zap.Int32("partition", j.rec.Partition), zap.Int("try", tries+1), zap.Error(err))
		if err := sleep(ctx, min(b.o.RetryBackoff<<min(tries, 5), ledgerRetry)); err != nil {
			release()
			return nil, nil, err
		}
	}
}

// settle is the ledger record of r, j's result.
func (lg *ledgered) settle(r *events.LoyaltyResult) (*kgo.Record, error) {
	e := ledger.Entry{Kind: lg.kind, TransactionID: lg.id, Outcome: string(r.Outcome), Points: r.Points,
		UsedPoint: r.UsedPoint, RequestedPoints: r.RequestedPoints}
	if r.ClawbackTransactionID != nil {
		e.ClawbackID = *r.ClawbackTransactionID
	}
	for _, f := range []struct {
		to   *string
		from *string
	}{{&e.BitReference, r.BitReference}, {&e.RequestID, r.RequestID}, {&e.APITimestamp, r.APITimestamp}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	return lg.l.Settle(lg.j.rec, e)
}

// answered is the result of a record whose transaction the ledger has
// settled: what was applied then, ALREADY_APPLIED (a refund capped to
// nothing stays NO_OP: nothing was applied).
func answered(j *job, e *ledger.Entry) *events.LoyaltyResult {
	out := events.Outcome(e.Outcome)
	if out == events.OutcomeApplied {
		out = events.OutcomeAlreadyApplied
	}
	r := &events.LoyaltyResult{Outcome: out, Points: e.Points, UsedPoint: e.UsedPoint, RequestedPoints: e.RequestedPoints,
		BitReference: optional(e.BitReference), RequestID: optional(e.RequestID), APITimestamp: optional(e.APITimestamp),
		ClawbackTransactionID: optional(e.ClawbackID)}
	switch ev := j.ev.(type) {
	case *events.PurchaseCompleted:
		r.LoyaltyID = &ev.LoyaltyID
	case *events.RedemptionRequested:
		r.LoyaltyID = &ev.LoyaltyID
	case *events.PurchaseRefunded:
		r.LoyaltyID = &ev.LoyaltyID
	}
	return r
}
