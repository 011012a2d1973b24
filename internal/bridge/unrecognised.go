package bridge

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
)

// DefaultUnrecognisedHold is the default of Options.UnrecognisedHold.
// Fifteen minutes is time for whoever the alert pages to read the warning,
// fix the --partner-* setting and restart (the held record is not
// committed, so the restarted bridge reads its answer again), and for a
// status the profile does not name that is only a partner's passing state
// (a pending transaction) to settle; beyond it, a held record's key and
// its partition's commit point have waited long enough that a retryable
// error event, replayable once fixed, serves better than more waiting.
const DefaultUnrecognisedHold = 15 * time.Minute

// maxHeldBackoff caps the back-off between a held record's lookups: an
// answer that changes (a fixed profile needs a restart, but a partner's
// pending status settles) is seen within a minute, and a held record
// costs at most one lookup a minute.
const maxHeldBackoff = time.Minute

// holdUnrecognised puts st in the unrecognised hold after an attempt
// failed on err, a partner answer the profile does not name: it counts and
// reports the answer, and returns how long to wait before the next
// attempt, or, once UnrecognisedHold has passed since the record's first
// such answer, the record's TRANSIENT_EXHAUSTED UNRECOGNISED_ANSWER error
// (retryable). The attempt spent no budget: nothing was written, and
// what failed was the bridge's reading, not the partner or the record.
func (b *Bridge) holdUnrecognised(st *recordState, err error) (time.Duration, error) {
	now := time.Now()
	if b.now != nil {
		now = b.now()
	}
	st.free++
	if st.heldSince.IsZero() {
		st.heldSince = now
	}
	if !st.held {
		st.held = true
		b.heldUnrecognised.Add(1)
		if m := b.o.Metrics; m != nil {
			m.HeldUnrecognised.Inc()
		}
	}
	b.unrecognised(st, err, now)
	left := st.heldSince.Add(b.o.UnrecognisedHold).Sub(now)
	if left <= 0 {
		return 0, &recordFailure{cat: events.CategoryTransientExhausted, reason: events.ReasonUnrecognisedAnswer,
			err: fmt.Errorf("held %s on partner answers not in the partner profile, nothing written while held (check the --partner-* settings, then replay): %w",
				b.o.UnrecognisedHold, err)}
	}
	d := b.o.RetryBackoff << min(st.heldTries, 16)
	if d <= 0 || d > maxHeldBackoff {
		d = maxHeldBackoff
	}
	st.heldTries++
	// Half fixed, half jittered: held records that met the same answer
	// together do not ask again together.
	d = d/2 + rand.N(d/2+1)
	return min(d, left), nil
}

// release takes st out of the unrecognised hold, if it is in it: its
// attempt got another answer, or the record is done. Safe to call again.
func (b *Bridge) release(st *recordState) {
	if !st.held {
		return
	}
	st.held = false
	b.heldUnrecognised.Add(-1)
	if m := b.o.Metrics; m != nil {
		m.HeldUnrecognised.Dec()
	}
}

// HeldUnrecognised is how many records are held now on partner answers
// the partner profile does not name (readiness shows it). Safe for
// concurrent use.
func (b *Bridge) HeldUnrecognised() int64 { return b.heldUnrecognised.Load() }

// ErrHeldUnrecognised is the readiness failure while records are held on
// answers the profile does not name.
var ErrHeldUnrecognised = errors.New("records held: partner answers not in the partner profile (see the bridge's warnings; check the --partner-* settings)")

// Health is the unrecognised hold's readiness: ErrHeldUnrecognised
// (wrapped, with the count) while any record is held, else nil.
func (b *Bridge) Health() error {
	if n := b.HeldUnrecognised(); n > 0 {
		return fmt.Errorf("%d %w", n, ErrHeldUnrecognised)
	}
	return nil
}

// unrecognised reports a partner answer the profile does not name: a
// metric by field, and a warning naming the field and value (a code, type
// or status, never personal data), at most one per field and value each
// warnEvery, so that a thousand held records asking every minute do not
// flood the log.
func (b *Bridge) unrecognised(st *recordState, err error, now time.Time) {
	var ue *loyalty.UnrecognisedAnswerError
	if !errors.As(err, &ue) {
		return
	}
	if m := b.o.Metrics; m != nil {
		m.UnrecognisedAnswers.WithLabelValues(ue.Field).Inc()
	}
	if !b.warned.allow(ue.Field+"\x00"+ue.Value, now) {
		b.log.Debug("partner answer not in the partner profile; record held", zap.String("transactionId", st.id),
			zap.String("field", ue.Field), zap.String("answered", ue.Value))
		return
	}
	msg := "partner answer not in the partner profile; record held, nothing written (check the --partner-* settings)"
	if ue.Field == loyalty.FieldSharedID {
		msg = "lookup found the transactionId as a transaction of the other kind; record held, nothing written (an accrual and a redemption share the id; if the partner keys transactions by id alone, set --partner-transaction-key id)"
	}
	b.log.Warn(msg, zap.String("transactionId", st.id), zap.String("endpoint", ue.Op), zap.String("field", ue.Field),
		zap.String("answered", ue.Value), zap.Int64("held", b.HeldUnrecognised()), zap.Duration("hold", b.o.UnrecognisedHold))
}

// warnEvery is how often the warning for one field and value is logged.
const warnEvery = time.Minute

// maxWarnKeys bounds the field and value pairs remembered: the values are
// the partner's, so their number is not ours to bound.
const maxWarnKeys = 64

// warnLimit allows one line per key each warnEvery. The zero value is
// ready; safe for concurrent use.
type warnLimit struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (w *warnLimit) allow(key string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.last[key]; ok && now.Sub(t) < warnEvery {
		return false
	}
	if w.last == nil {
		w.last = map[string]time.Time{}
	}
	if len(w.last) >= maxWarnKeys {
		for k, t := range w.last {
			if now.Sub(t) >= warnEvery {
				delete(w.last, k)
			}
		}
		if len(w.last) >= maxWarnKeys {
			// As many distinct answers in a minute: the first ones said
			// it; the metric counts the rest.
			return false
		}
	}
	w.last[key] = now
	return true
}
