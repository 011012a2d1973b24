package bridge

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// The clawbacks of one original accrual are redemptions in numbered slots,
// ClawbackID(original, 1), (original, 2), …, claimed in order. Counting the
// points in the filled slots is how a refund learns what earlier refunds of
// the same purchase took, with nothing but lookups by exact transactionId;
// the package doc states what this guarantees and under which assumptions.

// MaxClawbacks bounds the clawback slots of one original that a refund looks
// through (one lookup each). A refund of an original whose slots are all
// filled is a BUSINESS error event with reason CLAWBACK_LIMIT: it claws back
// nothing.
const MaxClawbacks = 64

// maxCollisions bounds how often one refund's write to a slot it found
// free is refused as a duplicate (another writer filled it first); past
// it, the refund ends as a retryable CLAWBACK_CONFLICT, nothing clawed
// back.
const maxCollisions = 8

// clawbackMark separates the original's transactionId from the slot number.
const clawbackMark = "~cb"

// ClawbackID is the partner transactionId of the k-th clawback (k ≥ 1) of
// the accrual original.
func ClawbackID(original string, k int) string { return original + clawbackMark + strconv.Itoa(k) }

// ClawbackSlot reads an id ClawbackID made: the original's transactionId
// and the slot k ≥ 1. ok is false for any other id.
func ClawbackSlot(id string) (original string, k int, ok bool) {
	i := strings.LastIndex(id, clawbackMark)
	if i <= 0 {
		return "", 0, false
	}
	k, err := strconv.Atoi(id[i+len(clawbackMark):])
	if err != nil || k < 1 || ClawbackID(id[:i], k) != id {
		return "", 0, false
	}
	return id[:i], k, true
}

// amountSlack is how far a slot's transactionAmount may be from a refund's
// amount and still be taken for that refund's: a partner may keep amounts
// in whole currency units. Wider only errs towards clawing back less.
const amountSlack = 0.5

// clawRequest is one refund's clawback.
type clawRequest struct {
	ev *events.PurchaseRefunded
	// earned is the original accrual's transactionPoint: the most all its
	// clawbacks together may take.
	earned int64
	// points is the refund's proportional share (> 0, at most earned).
	points int64
}

// clawBack redeems the refund's points, capped at what the original's
// earlier clawbacks left, in the original's first free clawback slot. It is
// the guard's business: the writes it makes may collide with another
// refund's, so it needs the record's state and the bridge's lanes.
func clawBack(ctx context.Context, p partner, ev *events.PurchaseRefunded, earned, points int64) (*events.LoyaltyResult, error) {
	g, ok := p.(*guardedPartner)
	if !ok {
		return nil, &recordFailure{cat: events.CategoryInternal,
			err: fmt.Errorf("refund %s: clawback outside the attempt policy", ev.TransactionID)}
	}
	return g.clawBack(ctx, clawRequest{ev: ev, earned: earned, points: points})
}

func (g *guardedPartner) clawBack(ctx context.Context, c clawRequest) (*events.LoyaltyResult, error) {
	ev := c.ev
	// The lane is held for this attempt's calls only, never across a
	// back-off: it is taken inside the circuit's admission, so a record
	// holding it while waiting for admission (or for the auth hold, or its
	// pipeline slot) would block another refund of the original that holds
	// the only half-open probe and waits for the lane. Letting it go after
	// an ambiguous write is safe under the guard's assumption (the package
	// doc, Refunds): by then the write has landed or never will, so another
	// refund sees the slot filled or free for good, and this record's next
	// attempt is guarded and recognises its own slot by looking it up.
	//
	// An ambiguous write may land up to the apply window after it
	// returned, so the lane also remembers until when its last one may
	// (lanes.settling): no refund of the original looks its slots up
	// before then, or it would take a slot about to be filled for free.
	// That wait is a timer, not a lock, so it cannot deadlock; it holds
	// the circuit's admission (a half-open probe included) for at most the
	// window.
	key := ev.LoyaltyID + "\x00" + ev.OriginalTransactionID
	var release func()
	for {
		if err := g.settled(ctx, g.b.lanes.settling(key)); err != nil {
			return nil, err
		}
		var err error
		if release, err = g.b.lanes.acquire(ctx, key); err != nil {
			return nil, err
		}
		if g.b.lanes.settling(key).IsZero() {
			break
		}
		release() // another refund's write went ambiguous meanwhile
	}
	defer release()

	// Whether the record needs to recognise its own clawback is the guard
	// flag's to say, as for every write: set when the record may have been
	// sent before (Fresh, below a previous owner's dispatch horizon;
	// replayed; or an earlier attempt's ambiguous write, which claim also
	// records in clawSlot). Then a slot that looks like its own is taken
	// for its own. A record never sent before has no clawback yet: every
	// slot it finds is another refund's, whatever it looks like.
	mayRepeat := g.st.guard || g.st.clawSlot != ""
	if mayRepeat && !g.st.legacyChecked {
		if r, err := g.legacyClawback(ctx, c); r != nil || err != nil {
			return r, err
		}
		g.st.legacyChecked = true
	}

	var claimed int64
	k, collisions := 1, 0
	for k <= MaxClawbacks {
		id := ClawbackID(ev.OriginalTransactionID, k)
		t, err := g.partner.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: ev.LoyaltyID, TransactionID: id})
		// Read through the partner profile like every lookup: an answer it
		// does not name (an unknown code, type or status) fails the attempt
		// as an *UnrecognisedAnswerError, which retry holds (metric and
		// warning) with nothing written, exactly as the guard does.
		v, err := loyalty.ClassifyLookup(g.b.o.Profile, partnerprofile.Redemption, t, err)
		switch v {
		case loyalty.LookupNotFound, loyalty.LookupMemberNotFound:
			n := min(c.points, c.earned-claimed)
			if n <= 0 {
				return g.capped(c, claimed), nil
			}
			r, taken, err := g.claim(ctx, c, id, n)
			if !taken {
				return r, err
			}
			// Someone else filled the slot since the lookup (the partner
			// refused this write as a duplicate): look again.
			if collisions++; collisions > maxCollisions {
				// Every write of this attempt was refused, so none of
				// them took effect; a replay later (guarded) may find
				// the slots settled. Retryable, not BUSINESS: the
				// partner did not judge this refund.
				return nil, &recordFailure{cat: events.CategoryTransientExhausted, reason: events.ReasonClawbackConflict,
					err: fmt.Errorf("refund %s: clawback slot %s: lost %d slots in a row to other writers, nothing clawed back: %w",
						ev.TransactionID, id, collisions, err)}
			}
			continue
		case loyalty.LookupOtherKind:
			return nil, &recordFailure{cat: events.CategoryBusiness, reason: events.ReasonClawbackConflict,
				err: fmt.Errorf("refund %s: clawback id %s names a %s, not a redemption: the original's clawbacks cannot be counted",
					ev.TransactionID, id, t.TransactionType)}
		case loyalty.LookupApplied, loyalty.LookupNotApplied:
		default:
			if m := g.b.o.Metrics; m != nil && v == loyalty.LookupUnrecognised {
				m.GuardLookups.WithLabelValues("unrecognised").Inc()
			}
			return nil, fmt.Errorf("refund %s: look up clawback %s: %w", ev.TransactionID, id, err)
		}
		// Points are counted only if they are a count: a negative
		// transactionPoint (a partner reporting redemptions negative) would
		// shrink claimed, and a sum past int64 would wrap it, so the cap
		// would not bind. Such an answer is not understood, and held like
		// any other, never guessed at.
		if t.TransactionPoint < 0 || t.TransactionPoint > math.MaxInt64-claimed {
			if m := g.b.o.Metrics; m != nil {
				m.GuardLookups.WithLabelValues("unrecognised").Inc()
			}
			return nil, fmt.Errorf("refund %s: look up clawback %s: %w", ev.TransactionID, id,
				&loyalty.UnrecognisedAnswerError{Op: "lookup-transaction", Ref: "tx=" + id, Field: loyalty.FieldTransactionPoint,
					Value: strconv.FormatInt(t.TransactionPoint, 10)})
		}
		// A slot whose redemption the partner reports not applied (a
		// failed status) is not this refund's clawback: it took no effect,
		// so the refund claws back in a later slot.
		if mayRepeat && v == loyalty.LookupApplied && g.ownSlot(c, t, id, claimed) {
			if m := g.b.o.Metrics; m != nil {
				m.GuardLookups.WithLabelValues("found").Inc()
			}
			g.b.log.Debug("clawback already applied", zap.String("transactionId", ev.TransactionID), zap.String("clawback", id))
			return clawbackResult(events.OutcomeAlreadyApplied, c, id, t.TransactionPoint, t.BitReference, t.RequestID, t.Timestamp), nil
		}
		// Counted whatever its status: a slot that exists cannot be
		// claimed again, and counting it errs towards clawing back less.
		claimed += t.TransactionPoint
		if claimed >= c.earned {
			return g.capped(c, claimed), nil
		}
		k++
	}
	return nil, &recordFailure{cat: events.CategoryBusiness, reason: events.ReasonClawbackLimit,
		err: fmt.Errorf("refund %s: original %s has %d clawbacks already, the most the bridge looks through; nothing clawed back",
			ev.TransactionID, ev.OriginalTransactionID, MaxClawbacks)}
}

// claim writes the clawback of n points into the free slot id. taken
// reports that the partner refused the write as a duplicate (another
// writer filled the slot first; err says how): nothing was applied, and
// the caller should look the slot up again.
//
// A success answer is this refund's clawback, applied, whatever it says:
// a usedPoint other than n is the partner's figure, reported as the
// result's usedPoint (points stays n, what was sent) and logged, never a
// reason to write another slot, which would claw back twice if the write
// had been applied. A partner that answers a repeated transactionId with
// the first write's answer (the simulator's return-original) makes the
// loser of a slot contested across processes take the winner's clawback
// for its own: it claws back less, never more.
func (g *guardedPartner) claim(ctx context.Context, c clawRequest, id string, n int64) (r *events.LoyaltyResult, taken bool, err error) {
	ev := c.ev
	req := loyalty.RedemptionRequest{TransactionID: id, LoyaltyID: ev.LoyaltyID,
		TransactionDate: g.b.o.Profile.RedemptionDate(ev.RefundDate), TransactionAmount: ev.RefundAmount, UsedPoint: n,
		TransactionDes: "refund " + ev.TransactionID + " of " + ev.OriginalTransactionID}
	res, err := sent(ctx, g, ev.TransactionID, id, func(ctx context.Context) (*loyalty.RedemptionResult, error) { return g.partner.Redeem(ctx, req) })
	// intend's own errors (another writer first, answered from its
	// entry, a ledger that refuses the intent) are neither a duplicate
	// nor ambiguous: returned as they are, below.
	switch {
	case err == nil:
		used := n
		if res.UsedPoint != 0 && res.UsedPoint != n {
			used = res.UsedPoint
			g.b.log.Warn("clawback answered with other points than sent; taken as this refund's clawback, the partner's figure reported as usedPoint",
				zap.String("transactionId", ev.TransactionID), zap.String("clawback", id), zap.Int64("sent", n), zap.Int64("answered", res.UsedPoint))
		}
		g.verify(ctx, c, id, res.BitReference)
		r := clawbackResult(events.OutcomeApplied, c, id, n, res.BitReference, res.RequestID, res.Timestamp)
		r.UsedPoint = ptr(used)
		return r, false, nil
	case loyalty.IsDuplicate(g.b.o.Profile, err):
		return nil, true, err
	case loyalty.IsAmbiguous(err):
		// The write may have been applied: the next attempt (guarded)
		// finds it in this slot, and takes it for its own if it fits.
		g.st.clawSlot, g.st.guard = id, true
		g.b.lanes.unsettled(ev.LoyaltyID+"\x00"+ev.OriginalTransactionID, g.unsettled())
	}
	return nil, false, err
}

// verify looks the slot just written up again: a partner that applies a
// repeated transactionId keeps two clawbacks in the slot when two
// processes wrote it at once (outside the package doc's assumption), and
// its lookup can show only one of them, so later refunds would count too
// little. Whichever writer sees the other's bitReference says so, loudly:
// the original's clawbacks may now exceed what it earned. It changes
// nothing else; a failed lookup is only logged.
func (g *guardedPartner) verify(ctx context.Context, c clawRequest, id, bitRef string) {
	t, err := g.partner.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: c.ev.LoyaltyID, TransactionID: id})
	v, err := loyalty.ClassifyLookup(g.b.o.Profile, partnerprofile.Redemption, t, err)
	switch {
	case v != loyalty.LookupApplied:
		g.b.log.Debug("clawback not verified", zap.String("transactionId", c.ev.TransactionID), zap.String("clawback", id),
			zap.Stringer("answer", v), zap.Error(err))
	case bitRef != "" && t.BitReference != "" && t.BitReference != bitRef:
		g.b.log.Error("clawback slot written twice: another process wrote it at the same time and the partner applied both; "+
			"the original's clawbacks may exceed what it earned (refunds of one original must not run in two processes at once "+
			"against a partner that applies a repeated transactionId)",
			zap.String("transactionId", c.ev.TransactionID), zap.String("original", c.ev.OriginalTransactionID),
			zap.String("clawback", id), zap.String("bitReference", bitRef), zap.String("found", t.BitReference))
	}
}

// ownSlot reports whether the filled slot id may be this refund's own
// clawback, for a record that may have been sent before: its amount is the
// refund's (within amountSlack) and its points are what the refund would
// have claimed there, behind the claimed points of the slots before it.
// That never misses the refund's own clawback. Two refunds of one original
// with equal amounts look alike, and such a twin's slot is taken for this
// refund's own: it errs towards clawing back less, and the result says so
// by naming the twin's slot in clawbackTransactionId. Nothing else of the
// partner's record is read: in particular not its transactionTime, which
// the spec does not say echoes the transactionDate sent.
func (g *guardedPartner) ownSlot(c clawRequest, t *loyalty.Transaction, id string, claimed int64) bool {
	if g.st.ledgerSlot != "" {
		// The ledger names the slot this refund's intent was for: its
		// own, whatever a twin's looks like.
		return id == g.st.ledgerSlot
	}
	if math.Abs(t.TransactionAmount-c.ev.RefundAmount) > amountSlack || t.TransactionPoint != min(c.points, c.earned-claimed) {
		return false
	}
	if g.st.clawSlot != id {
		g.b.log.Debug("clawback slot matched by amount and points", zap.String("transactionId", c.ev.TransactionID),
			zap.String("clawback", id), zap.String("written", g.st.clawSlot))
	}
	return true
}

// legacyClawback finds a clawback made before slots, under the refund's own
// id: ALREADY_APPLIED if there is one, (nil, nil) if not. Such clawbacks
// keep their refund idempotent; they are not counted for other refunds.
func (g *guardedPartner) legacyClawback(ctx context.Context, c clawRequest) (*events.LoyaltyResult, error) {
	err := g.lookup(ctx, c.ev.LoyaltyID, c.ev.TransactionID, partnerprofile.Redemption)
	var aa *alreadyApplied
	if errors.As(err, &aa) {
		r := aa.result
		r.ClawbackTransactionID, r.RequestedPoints = ptr(c.ev.TransactionID), ptr(c.points)
		return r, nil
	}
	return nil, err
}

// capped answers a refund whose original's earlier clawbacks took all it
// earned: nothing clawed back, NO_OP with points 0 below requestedPoints.
func (g *guardedPartner) capped(c clawRequest, claimed int64) *events.LoyaltyResult {
	g.b.log.Debug("refund capped: earlier refunds clawed back what the original earned", zap.String("transactionId", c.ev.TransactionID),
		zap.String("original", c.ev.OriginalTransactionID), zap.Int64("earned", c.earned), zap.Int64("clawedBack", claimed),
		zap.Int64("requested", c.points))
	return &events.LoyaltyResult{Outcome: events.OutcomeNoOp, LoyaltyID: &c.ev.LoyaltyID, UsedPoint: ptr(int64(0)),
		Points: ptr(int64(0)), RequestedPoints: ptr(c.points)}
}

func clawbackResult(o events.Outcome, c clawRequest, id string, points int64, bitRef, requestID, ts string) *events.LoyaltyResult {
	return &events.LoyaltyResult{Outcome: o, LoyaltyID: &c.ev.LoyaltyID, BitReference: optional(bitRef),
		UsedPoint: ptr(points), Points: ptr(points), RequestID: optional(requestID), APITimestamp: optional(ts),
		ClawbackTransactionID: ptr(id), RequestedPoints: ptr(c.points)}
}

// lanes serialises work by key within the process: one holder per key at
// a time. Entries live while someone holds or waits, so the map is bounded
// by the records in flight. The zero value is ready to use.
type lanes struct {
	mu sync.Mutex
	m  map[string]*lane
	// settle maps a lane's key to when its last ambiguous write settles
	// (the write's return plus the apply window). Entries are dropped once
	// past, so it holds at most the ambiguous clawbacks of one window.
	settle map[string]time.Time
}

// unsettled records that a write under key's lane went ambiguous and may
// be applied until until.
func (l *lanes) unsettled(key string, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for k, t := range l.settle {
		if !t.After(now) {
			delete(l.settle, k)
		}
	}
	if l.settle == nil {
		l.settle = map[string]time.Time{}
	}
	l.settle[key] = later(l.settle[key], until)
}

// settling returns when key's last ambiguous write settles, or the zero
// time when it has.
func (l *lanes) settling(key string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.settle[key]
	if ok && !t.After(time.Now()) {
		delete(l.settle, key)
		return time.Time{}
	}
	return t
}

type lane struct {
	held  chan struct{} // capacity 1: full while held
	users int           // holders and waiters
}

// acquire waits for key's lane (or ctx) and returns its release.
func (l *lanes) acquire(ctx context.Context, key string) (release func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*lane{}
	}
	ln := l.m[key]
	if ln == nil {
		ln = &lane{held: make(chan struct{}, 1)}
		l.m[key] = ln
	}
	ln.users++
	l.mu.Unlock()
	select {
	case ln.held <- struct{}{}:
		return func() { <-ln.held; l.leave(key, ln) }, nil
	case <-ctx.Done():
		l.leave(key, ln)
		return nil, ctx.Err()
	}
}

func (l *lanes) leave(key string, ln *lane) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ln.users--; ln.users == 0 {
		delete(l.m, key)
	}
}
