package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
)

// Log order decides between processes (package ledger's doc): two
// processes that both found no entry for a transaction (the live bridge
// and a replay over the same records) both write an intent, and the one
// whose intent is later in the ledger partition sees the other's before
// it sends anything:
//
//   - another process's settled entry below it: the record is answered
//     from that entry (ALREADY_APPLIED), as a settled Lookup is, nothing
//     sent;
//   - another process's intent below it: nothing is sent now. The
//     attempt ends with anotherWriter, which retry waits out (the intent's
//     time plus a call's time plus the apply window, in settleAt, no
//     attempt spent for the first maxHeeds of them), and the next attempt
//     is guarded: a lookup, ALREADY_APPLIED if that write was applied, a
//     fresh intent (which is checked the same way) if not.

// maxHeeds bounds the attempts that spend nothing of the record's budget
// because another process's intent came first. Two processes taking turns
// at one transaction whose writes are never applied could otherwise wait
// on each other without end; past it, each such attempt is spent, and the
// record ends as a retryable TRANSIENT_EXHAUSTED error event, nothing
// written twice.
const maxHeeds = 8

// heedRetry bounds one wait for the ledger partition to be read past the
// record's intent; past it, the record keeps waiting and says so.
const heedRetry = 10 * time.Second

// anotherWriter ends an attempt whose write was not sent because another
// process's intent of the transaction is earlier in the ledger: its write
// may land until until.
type anotherWriter struct {
	txID  string
	until time.Time
}

func (e *anotherWriter) Error() string {
	return fmt.Sprintf("bridge: %s: another process intended this transaction first; nothing sent, looked up once its write has settled (%s)",
		e.txID, e.until.UTC().Format(time.RFC3339Nano))
}

// intend makes the write's intent durable before the write is sent, and
// waits until the process has read the ledger partition up to it: what
// other processes wrote about the transaction below it comes back, for the
// caller to heed. slot is a refund's clawback slot.
func (lg *ledgered) intend(ctx context.Context, log *zap.Logger, slot string) (ledger.Heed, error) {
	if lg == nil {
		return ledger.Heed{}, nil
	}
	for tries := 1; ; tries++ {
		offset, err := lg.w.Intend(ctx, ledger.Entry{Kind: lg.kind, TransactionID: lg.id, ClawbackID: slot})
		if err != nil {
			return ledger.Heed{}, err
		}
		h, err := lg.w.HeedWithin(ctx, offset, heedRetry)
		switch {
		case err == nil || ctx.Err() != nil:
			return h, err
		case errors.Is(err, ledger.ErrLate) && (h.Settled != nil || h.Intent != nil):
			return h, nil // nothing is sent anyway
		case !errors.Is(err, ledger.ErrLate) && !errors.Is(err, context.DeadlineExceeded):
			return h, err
		}
		// Too late to send on this intent (its write must leave within
		// ledger.SendWithin of it, for others' waits to hold), or not
		// read back yet: nothing is sent, and a fresh intent is safe, as
		// waiting is for a ledger not readable.
		log.Warn("transaction ledger slow to read back the record's intent; intending again", zap.String("topic", lg.j.rec.Topic),
			zap.Int32("partition", lg.j.rec.Partition), zap.Int64("intent", offset), zap.Int("try", tries), zap.Error(err))
		if err := sleep(ctx, min(lg.backoff<<min(tries-1, 5), ledgerRetry)); err != nil {
			return ledger.Heed{}, err
		}
	}
}

// settledBy is when a write whose intent was made at at has landed or
// never will: it left within ledger.SendWithin of the intent (Heed sees
// to it), took at most a call's time, and lands within the apply window
// of its sending. The intent's writer's clock is trusted to agree with
// this one's well within the window.
func (b *Bridge) settledBy(at time.Time) time.Time {
	return at.Add(ledger.SendWithin + b.o.CallTimeout + b.o.Profile.Window())
}

// heed acts on what other processes wrote below the record's intent: nil
// when the write may be sent.
func (g *guardedPartner) heed(txID string, h ledger.Heed) error {
	switch {
	case h.Settled != nil:
		if m := g.b.o.Metrics; m != nil {
			m.LedgerAnswered.WithLabelValues(g.st.lg.j.rec.Topic).Inc()
		}
		g.b.log.Debug("another process settled this transaction first; answered from its ledger entry", zap.String("transactionId", txID))
		return &alreadyApplied{result: answered(g.st.lg.j, h.Settled)}
	case h.Intent != nil:
		g.st.guard = true
		if h.Intent.ClawbackID != "" {
			// The other's clawback is this refund's own, if it landed.
			g.st.ledgerSlot = h.Intent.ClawbackID
		}
		until := g.b.settledBy(h.Intent.At)
		g.st.settleAt = later(g.st.settleAt, until)
		g.b.log.Debug("another process intended this transaction first; nothing sent, looked up once its write has settled",
			zap.String("transactionId", txID), zap.Time("until", until))
		return &anotherWriter{txID: txID, until: until}
	}
	return nil
}

// heeded reports whether err ended an attempt for another process's intent
// (not this record's failure), counting it.
func heeded(st *recordState, err error) bool {
	var aw *anotherWriter
	if !errors.As(err, &aw) {
		return false
	}
	st.heeds++
	return st.heeds <= maxHeeds
}

// exhausted is the error a record whose budget ran out ends with: another
// process's intents, taking turns with this one's, are a retryable
// TRANSIENT_EXHAUSTED, nothing sent by this attempt.
func exhausted(err error) error {
	var aw *anotherWriter
	if errors.As(err, &aw) {
		return &recordFailure{cat: events.CategoryTransientExhausted, err: err}
	}
	return err
}
