package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// The clawbacks of one original live in its slots, <original>~cb1, ~cb2,
// … (bridge.ClawbackID), and together they must not take more than the
// original earned. Each refund result is checked on its own by judge; what
// no single result shows is the sum over the slots, and one slot named by
// the results of two refunds. Both are checked here, per original named by
// the window's refund results.

// maxNamed bounds the refunds a finding's detail names; the rest are
// counted.
const maxNamed = 4

// original is an original accrual whose clawback slots the window's refund
// results name.
type original struct {
	input     string // the input topic of the refunds
	id        string
	loyaltyID string
	at        events.Position // the first result naming one of its slots
	lastSlot  int             // the highest slot a result names
	// refunds are, by slot id, the refunds whose results name it, with
	// the position of each one's first such result.
	refunds  map[string]map[string]events.Position
	findings []Finding
}

// originals gathers, from the refund results of list, the originals their
// clawbackTransactionIds name. A result written before that field names
// none.
func originals(list []*item) []*original {
	byID := map[[2]string]*original{}
	for _, it := range list {
		if it.typ != events.TypePurchaseRefunded {
			continue
		}
		for _, rp := range it.results {
			o, k, ok := bridge.ClawbackSlot(rp.clawbackID)
			if !ok {
				continue
			}
			key := [2]string{it.input, o}
			og := byID[key]
			if og == nil {
				og = &original{input: it.input, id: o, at: rp.at, refunds: map[string]map[string]events.Position{}}
				byID[key] = og
			}
			if og.loyaltyID == "" {
				og.loyaltyID = it.loyaltyID()
			}
			if rp.at.Compare(og.at) < 0 {
				og.at = rp.at
			}
			og.lastSlot = max(og.lastSlot, k)
			named := og.refunds[rp.clawbackID]
			if named == nil {
				named = map[string]events.Position{}
				og.refunds[rp.clawbackID] = named
			}
			if at, ok := named[it.id]; !ok || rp.at.Compare(at) < 0 {
				named[it.id] = rp.at
			}
		}
	}
	return slices.SortedFunc(maps.Values(byID), func(a, b *original) int {
		return cmp.Or(cmp.Compare(a.input, b.input), cmp.Compare(a.id, b.id))
	})
}

func (og *original) add(kind FindingKind, id string, at events.Position, format string, args ...any) {
	og.findings = append(og.findings, Finding{Kind: kind, Topic: og.input, TransactionID: id, EventType: events.TypePurchaseRefunded,
		Reply: at.String(), Detail: fmt.Sprintf(format, args...)})
}

// shared reports each slot that the results of more than one refund name:
// one clawback standing for several refunds. Either a refund took an
// equal-amount twin's clawback for its own (it clawed back nothing of its
// own: too little), or two refunds claimed the slot at once at a partner
// that applies a repeated transactionId (both applied, one shown: too
// much). Which, only the partner's own records say.
func (og *original) shared() {
	for _, slot := range slices.Sorted(maps.Keys(og.refunds)) {
		named := og.refunds[slot]
		if len(named) < 2 {
			continue
		}
		ids := slices.Sorted(maps.Keys(named))
		og.add(SharedClawback, slot, named[ids[1]],
			"clawbackTransactionId named by the results of %d refunds (%s): one clawback stands for several refunds; "+
				"either a refund took another's equal clawback for its own and clawed back nothing (too little), "+
				"or both wrote the slot at once at a partner that applies a repeated transactionId (too much)",
			len(ids), names(ids))
	}
}

// names lists ids, at most maxNamed of them, the rest counted.
func names(ids []string) string {
	var b strings.Builder
	for i, id := range ids {
		if i == maxNamed {
			fmt.Fprintf(&b, " and %d more", len(ids)-maxNamed)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(id)
	}
	return b.String()
}

// clawbacks checks the originals of list: shared slots, then the sum of
// each original's applied slots against what it earned, one original at a
// time per lookup slot (Options.Concurrency), the lookups under limiter.
// Report.Originals is the originals it looked up; when ctx ends, the rest
// are Interrupted.
func (r *Reconciler) clawbacks(ctx context.Context, list []*item, limiter *rate.Limiter, rep *Report) error {
	ogs := originals(list)
	var mu sync.Mutex
	done := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.o.Concurrency)
	for _, og := range ogs {
		og.shared()
	}
	for _, og := range ogs {
		if og.loyaltyID == "" {
			og.add(Unchecked, og.id, og.at, "clawbacks not summed: no loyaltyId to ask the partner with")
			continue
		}
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := r.sum(gctx, og, limiter); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			done++
			return nil
		})
	}
	err := g.Wait()
	// An original whose accrual's result is in the window was looked up
	// already: that it could not be read is said once, for it.
	said := map[[2]string]bool{}
	for _, f := range rep.Findings {
		said[[2]string{string(f.Kind), f.TransactionID}] = true
	}
	for _, og := range ogs {
		for _, f := range og.findings {
			if (f.Kind == Unchecked || f.Kind == NotRecognised) && said[[2]string{string(f.Kind), f.TransactionID}] {
				continue
			}
			rep.Findings = append(rep.Findings, f)
		}
	}
	rep.Originals = done
	if ctx.Err() != nil {
		rep.Interrupted += len(ogs) - done
		return ctx.Err()
	}
	return err
}

// sum looks og up, then its slots from the first until one is not found
// past the last any result names (at most bridge.MaxClawbacks), and adds
// the points of those applied: a slot with a failed status took no
// effect. It reports their sum over what og earned (an original the
// partner does not hold applied earned nothing), or why it could not tell.
// The error is only ctx's.
func (r *Reconciler) sum(ctx context.Context, og *original, limiter *rate.Limiter) error {
	lookup := func(id string, kind partnerprofile.Kind) (loyalty.LookupVerdict, *loyalty.Transaction, error) {
		if limiter != nil {
			if err := limiter.Wait(ctx); err != nil {
				return loyalty.LookupFailed, nil, err
			}
		}
		t, _, err := r.o.Partner.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: og.loyaltyID, TransactionID: id})
		if ctx.Err() != nil {
			return loyalty.LookupFailed, nil, ctx.Err()
		}
		v, err := loyalty.ClassifyLookup(r.o.Profile, kind, t, err)
		return v, t, err
	}
	// cannot reports an answer that stops the sum, and whether it did.
	cannot := func(id string, v loyalty.LookupVerdict, err error) bool {
		switch v {
		case loyalty.LookupFailed:
			og.add(Unchecked, og.id, og.at, "clawbacks not summed: lookup of %s failed: %v", id, err)
		case loyalty.LookupUnrecognised:
			og.add(NotRecognised, og.id, og.at, "clawbacks not summed: the partner's answer for %s is not in the partner profile (%s)", id, describe(err))
		default:
			return false
		}
		return true
	}

	v, t, err := lookup(og.id, partnerprofile.Accrual)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if cannot(og.id, v, err) {
		return nil
	}
	var earned int64
	note := ""
	if v == loyalty.LookupApplied {
		earned = t.TransactionPoint
	} else {
		note = fmt.Sprintf(" (the partner holds no applied accrual %s: %s)", og.id, v)
	}

	var took int64
	var slots strings.Builder
	n := 0
	for k := 1; k <= bridge.MaxClawbacks; k++ {
		id := bridge.ClawbackID(og.id, k)
		v, t, err := lookup(id, partnerprofile.Redemption)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if cannot(id, v, err) {
			return nil
		}
		if v != loyalty.LookupApplied {
			if k >= og.lastSlot && (v == loyalty.LookupNotFound || v == loyalty.LookupMemberNotFound) {
				break // the bridge fills slots in order: none past here
			}
			continue // took no effect, or not a clawback (judge reports the slot a result names)
		}
		if t.TransactionPoint < 0 || t.TransactionPoint > math.MaxInt64-took {
			og.add(NotRecognised, og.id, og.at, "clawbacks not summed: %s has transactionPoint %d, not a count of points", id, t.TransactionPoint)
			return nil
		}
		took += t.TransactionPoint
		if n++; n <= 2*maxNamed {
			if n > 1 {
				slots.WriteString(", ")
			}
			fmt.Fprintf(&slots, "%s %d", id, t.TransactionPoint)
		}
	}
	if n > 2*maxNamed {
		fmt.Fprintf(&slots, " and %d more", n-2*maxNamed)
	}
	if took > earned {
		og.add(ClawbackOverEarned, og.id, og.at, "original earned %d points%s; its clawbacks took %d (%s): %d more than it earned",
			earned, note, took, slots.String(), took-earned)
	}
	return nil
}
