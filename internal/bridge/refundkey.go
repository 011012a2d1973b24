package bridge

import (
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// The cap on an original's clawbacks (doc.go, Refunds) is guaranteed only
// while one process at a time handles the refunds of one original, against
// a partner that applies a repeated transactionId. Kafka gives that when
// every refund of an original lands in one partition: records keyed by the
// refund's loyaltyId, or by its originalTransactionId, as long as a
// producer keys all refunds one way. A refund keyed otherwise (its own
// transactionId, a random value, a null key, which producers spread
// round-robin) may be handled in one member while another refund of the
// same original is handled in another, and both may claim one slot.

// RefundKeyCheck is what the bridge does with a PurchaseRefunded whose
// record key is neither its loyaltyId nor its originalTransactionId.
type RefundKeyCheck string

const (
	// RefundKeyRefuse answers such a refund with a VALIDATION error event,
	// reason REFUND_KEY, retryable, without calling the partner: nothing is
	// lost (a replay handles it, in one process), and nothing can be clawed
	// back twice by it. The default.
	RefundKeyRefuse RefundKeyCheck = "refuse"
	// RefundKeyWarn handles it as any refund, counts it
	// (loyalty_bridge_refund_key_mismatches_total) and logs the first one
	// at warn level. Safe only against a partner that rejects a repeated
	// transactionId, or with a single bridge process: against one that
	// applies duplicates, two members may claim one clawback slot, and the
	// original's clawbacks may exceed what it earned.
	RefundKeyWarn RefundKeyCheck = "warn"
)

// DefaultRefundKeyCheck is the default of Options.RefundKeyCheck.
const DefaultRefundKeyCheck = RefundKeyRefuse

// ParseRefundKeyCheck reads "refuse" or "warn".
func ParseRefundKeyCheck(s string) (RefundKeyCheck, error) {
	switch c := RefundKeyCheck(strings.ToLower(strings.TrimSpace(s))); c {
	case RefundKeyRefuse, RefundKeyWarn:
		return c, nil
	}
	return "", fmt.Errorf("%q: want %s or %s", s, RefundKeyRefuse, RefundKeyWarn)
}

func (c RefundKeyCheck) String() string { return string(c) }

// RefundKeyError is a refund whose record key does not keep the refunds
// of its original in one process. It names the rule and the keys
// accepted, never the key itself: a producer keying by something else
// may key by a phone number or an e-mail address.
type RefundKeyError struct {
	// TransactionID is the refund's, OriginalTransactionID its original's.
	TransactionID, OriginalTransactionID string
	// Key says what the key was, in the bridge's words: "null", "empty",
	// "the refund's own transactionId" or "another value of n bytes".
	Key string
}

func (e *RefundKeyError) Error() string {
	return fmt.Sprintf("refund %s: record key is %s, not the refund's loyaltyId or its originalTransactionId %s: "+
		"the cap on an original's clawbacks holds only while one process handles the refunds of one original, "+
		"so refunds must be keyed by loyaltyId (or all by originalTransactionId); nothing was called "+
		"(fix the producer's key, then replay this record: a replay handles its records in one process)",
		e.TransactionID, e.Key, e.OriginalTransactionID)
}

// checkRefundKey checks the record key of a refund against what the
// clawback cap needs (RefundKeyCheck). A replay is not checked: it handles
// every record it replays in this one process, whatever their keys, and is
// how a refused refund comes back.
func (b *Bridge) checkRefundKey(j *job) error {
	ev, ok := j.ev.(*events.PurchaseRefunded)
	if !ok || b.o.Replay {
		return nil
	}
	key := j.rec.Key
	if len(key) > 0 && (string(key) == ev.LoyaltyID || string(key) == ev.OriginalTransactionID) {
		return nil
	}
	err := &RefundKeyError{TransactionID: ev.TransactionID, OriginalTransactionID: ev.OriginalTransactionID, Key: describeKey(key, ev)}
	action := "refused"
	if b.o.RefundKeyCheck == RefundKeyWarn {
		action = "warned"
	}
	if m := b.o.Metrics; m != nil {
		m.RefundKeyMismatches.WithLabelValues(j.rec.Topic, action).Inc()
	}
	// A misconfigured producer sends many: the first says so, the rest
	// are counted (and at debug, each record).
	lvl := zap.DebugLevel
	if b.refundKeySeen.CompareAndSwap(false, true) {
		lvl = zap.WarnLevel
	}
	b.log.Log(lvl, "refund keyed otherwise than by loyaltyId or originalTransactionId; the clawback cap needs one process per original "+
		"(further ones counted in loyalty_bridge_refund_key_mismatches_total)",
		zap.String("action", action), zap.String("transactionId", ev.TransactionID), zap.String("key", err.Key),
		zap.String("topic", j.rec.Topic), zap.Int32("partition", j.rec.Partition), zap.Int64("offset", j.rec.Offset))
	if action == "warned" {
		return nil
	}
	return err
}

// describeKey says what a key is without showing it.
func describeKey(key []byte, ev *events.PurchaseRefunded) string {
	switch {
	case key == nil:
		return "null"
	case len(key) == 0:
		return "empty"
	case string(key) == ev.TransactionID:
		return "the refund's own transactionId"
	}
	return fmt.Sprintf("another value of %d bytes", len(key))
}

func isRefundKeyError(err error) bool {
	var ke *RefundKeyError
	return errors.As(err, &ke)
}
