package bridge_test

// The money paths that a mutation review found untested (issue 33): each
// test here fails when its branch is broken on purpose, over the simulator
// and the real client.

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// A write answered duplicate whose lookup says the transaction was not
// applied (not found, or found with a failed status) is the partner's
// refusal, reported as an error: never ALREADY_APPLIED, which would mark
// an accrual or redemption done that took no effect.
func TestDuplicateNotAppliedByLookupIsNoResult(t *testing.T) {
	pt, rt := topics.Purchase, topics.RefundRedemption
	t.Run("not found", func(t *testing.T) {
		s := newStack(t, stackOpts{})
		b := s.bridge(func(o *bridge.Options) { o.RecordAttempts = 2 })
		first := []reply{
			s.handle(b, s.record(pt, purchase("dn-1", 1, 5000)), false),
			s.handle(b, s.record(rt, redemption("dn-2", 1, 3)), false),
		}
		for _, r := range first {
			if r.outcome() != "APPLIED" {
				t.Fatalf("first write: %s (%s)", r.outcome(), r.detail())
			}
		}
		// A lagging replica: the partner refuses the repeat as a duplicate,
		// and its lookup does not see the first one.
		s.sim.SetFaults(sim.Faults{LookupLag: 24 * time.Hour})
		for _, r := range []reply{
			s.handle(b, s.record(pt, purchase("dn-1", 1, 5000)), false),
			s.handle(b, s.record(rt, redemption("dn-2", 1, 3)), false),
		} {
			if r.result != nil || r.err == nil || r.err.Category != events.CategoryBusiness {
				t.Errorf("duplicate not found by lookup: %s %+v, want a BUSINESS error", r.outcome(), r.result)
			}
		}
		if got := s.sim.Calls(sim.EndpointLookup, http.StatusBadRequest); got != 2 {
			t.Errorf("%d lookups answered not found, want 2 (one per duplicate answer)", got)
		}
	})
	t.Run("failed status", func(t *testing.T) {
		s := newStack(t, stackOpts{profile: partnerprofile.Profile{FailedStatuses: []string{"FAILED"}}})
		b := s.bridge(func(o *bridge.Options) { o.RecordAttempts = 2 })
		s.answerTx.Store(&txCanned{canned{"/point-accrual", http.StatusBadRequest,
			`{"statusCode":400,"message":"Bad Request","errors":{"code":"` + sim.CodeDuplicateTransaction + `","message":"duplicate"}}`}, "df-1"})
		s.answer.Store(&canned{"/lookup-transaction-id", http.StatusOK, `{"statusCode":200,"message":"SUCCESS","data":{` +
			`"transactionPoint":5,"transactionAmount":5000,"transactionType":"` + partnerprofile.DefaultAccrualType + `",` +
			`"transactionId":"df-1","bitReference":"B-1","status":"FAILED"}}`})
		r := s.handle(b, s.record(pt, purchase("df-1", 1, 5000)), false)
		if r.result != nil || r.err == nil || r.err.Category != events.CategoryBusiness {
			t.Errorf("duplicate found FAILED: %s %+v (%s), want a BUSINESS error", r.outcome(), r.result, r.detail())
		}
	})
}

// A write answered duplicate whose lookup then fails guards the next
// attempt: it looks up before writing, so the write is sent once however
// often the lookup fails.
func TestDuplicateThenFailedLookupGuardsTheNextAttempt(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(func(o *bridge.Options) { o.RecordAttempts = 3 })
	if r := s.handle(b, s.record(topics.Purchase, purchase("dl-1", 1, 5000)), false); r.outcome() != "APPLIED" {
		t.Fatalf("first write: %s (%s)", r.outcome(), r.detail())
	}
	s.failLookups.Store(true)
	r := s.handle(b, s.record(topics.Purchase, purchase("dl-1", 1, 5000)), false)
	if r.outcome() != "error TRANSIENT_EXHAUSTED" || !r.err.Retryable || r.err.Attempts != 3 {
		t.Errorf("%s %+v, want TRANSIENT_EXHAUSTED after 3 attempts", r.outcome(), r.err)
	}
	if got := s.sim.Calls(sim.EndpointAccrual, http.StatusBadRequest); got != 1 {
		t.Errorf("the repeat was written %d times, want once (later attempts look up first)", got)
	}
	if e := s.sim.Effects("dl-1"); e != 1 {
		t.Errorf("%d effects", e)
	}
}

// A clawback made before slots, under the refund's own id, is found by a
// refund that may have been sent before: ALREADY_APPLIED naming it, and
// no slot written, so the refund never claws back twice.
func TestLegacyClawbackFound(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(nil)
	member := sim.MemberID(2)
	plant := func(kind, id string, points int64, amount float64) {
		t.Helper()
		if _, err := s.sim.EditTransaction(id, sim.TransactionEdit{Kind: kind, LoyaltyID: member, Points: &points, Amount: &amount}); err != nil {
			t.Fatal(err)
		}
	}
	plant(sim.TypeAccrual, "lg-p", 100, 100_000)
	plant(sim.TypeRedemption, "lg-r", 25, 25_000)
	ev := refundOf("lg-r", "lg-p", 2, 25_000, refundBase)
	replay := s.bridge(func(o *bridge.Options) { o.Replay = true })
	for _, r := range []reply{s.handle(b, s.record(topics.RefundRedemption, ev), true), s.handle(replay, s.record(topics.RefundRedemption, ev), false)} {
		res := r.result
		if r.outcome() != "ALREADY_APPLIED" || r.points() != 25 || r.clawback() != "lg-r" || res.RequestedPoints == nil || *res.RequestedPoints != 25 {
			t.Errorf("%s points %d clawback %q %+v (%s), want ALREADY_APPLIED 25 at lg-r", r.outcome(), r.points(), r.clawback(), res, r.detail())
		}
	}
	if c := s.sim.TotalCalls(sim.EndpointRedemption); c != 0 {
		t.Errorf("%d clawbacks written", c)
	}
	if e := s.sim.Effects(bridge.ClawbackID("lg-p", 1)); e != 0 {
		t.Errorf("slot 1 written: %d effects", e)
	}
}

// A filled slot with the points the refund would have claimed there but
// another amount is another refund's clawback, not this one's: a refund
// that may repeat counts it and claws back in the next slot.
func TestClawbackSlotOfAnotherAmountIsNotOwn(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(nil)
	member := sim.MemberID(3)
	plant := func(kind, id string, points int64, amount float64) {
		t.Helper()
		if _, err := s.sim.EditTransaction(id, sim.TransactionEdit{Kind: kind, LoyaltyID: member, Points: &points, Amount: &amount}); err != nil {
			t.Fatal(err)
		}
	}
	plant(sim.TypeAccrual, "os-p", 100, 100_000)
	// 25 points, what a 25,000 refund claims in slot 1; the amount of
	// another refund, 2 away (beyond the slack of a partner keeping
	// whole units).
	plant(sim.TypeRedemption, bridge.ClawbackID("os-p", 1), 25, 25_002)
	r := s.handle(b, s.record(topics.RefundRedemption, refundOf("os-r", "os-p", 3, 25_000, refundBase)), true)
	if r.outcome() != "APPLIED" || r.points() != 25 || r.clawback() != bridge.ClawbackID("os-p", 2) {
		t.Errorf("%s points %d clawback %q (%s), want APPLIED 25 in slot 2", r.outcome(), r.points(), r.clawback(), r.detail())
	}
	// Within the slack, the same slot is the refund's own.
	plant(sim.TypeAccrual, "os-q", 100, 100_000)
	plant(sim.TypeRedemption, bridge.ClawbackID("os-q", 1), 25, 25_000.4)
	r = s.handle(b, s.record(topics.RefundRedemption, refundOf("os-s", "os-q", 3, 25_000, refundBase)), true)
	if r.outcome() != "ALREADY_APPLIED" || r.points() != 25 || r.clawback() != bridge.ClawbackID("os-q", 1) {
		t.Errorf("within the slack: %s points %d clawback %q (%s), want ALREADY_APPLIED in slot 1", r.outcome(), r.points(), r.clawback(), r.detail())
	}
}

// A refund claws back round(points × refund / amount) of its original,
// at most what the original earned: shares that do not divide evenly
// round to the nearest point, and requestedPoints says what was asked.
func TestProportionalRefundRoundsAndCaps(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(nil)
	for i, tc := range []struct {
		name              string
		earned            int64
		amount, refund    float64
		points, requested int64
		outcome           string
	}{
		{"rounds up past a half", 100, 100_000, 25_700, 26, 26, "APPLIED"},
		{"rounds down below a half", 100, 100_000, 25_400, 25, 25, "APPLIED"},
		{"a third", 10, 30_000, 20_000, 7, 7, "APPLIED"},
		{"more than the purchase: capped at what it earned", 40, 40_000, 90_000, 40, 40, "APPLIED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			member := 10 + i
			orig := fmt.Sprintf("pp-%d", i)
			earned, amount := tc.earned, tc.amount
			if _, err := s.sim.EditTransaction(orig, sim.TransactionEdit{Kind: sim.TypeAccrual, LoyaltyID: sim.MemberID(member), Points: &earned, Amount: &amount}); err != nil {
				t.Fatal(err)
			}
			r := s.handle(b, s.record(topics.RefundRedemption, refundOf(fmt.Sprintf("pr-%d", i), orig, member, tc.refund, refundBase)), false)
			if r.outcome() != tc.outcome || r.points() != tc.points || r.result.RequestedPoints == nil || *r.result.RequestedPoints != tc.requested {
				t.Errorf("%s points %d %+v (%s), want %s %d of %d", r.outcome(), r.points(), r.result, r.detail(), tc.outcome, tc.points, tc.requested)
			}
			if got := s.clawed(member, 0); got != tc.points {
				t.Errorf("member lost %d points, want %d", got, tc.points)
			}
		})
	}
}

// An ALREADY_APPLIED redemption reports its usedPoint, as an APPLIED one
// does: what the member was charged.
func TestAlreadyAppliedRedemptionCarriesUsedPoint(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(nil)
	rt := topics.RefundRedemption
	if r := s.handle(b, s.record(rt, redemption("au-1", 1, 7)), false); r.outcome() != "APPLIED" {
		t.Fatalf("first: %s (%s)", r.outcome(), r.detail())
	}
	replay := s.bridge(func(o *bridge.Options) { o.Replay = true })
	for name, r := range map[string]reply{
		"fresh":              s.handle(b, s.record(rt, redemption("au-1", 1, 7)), true),
		"replayed":           s.handle(replay, s.record(rt, redemption("au-1", 1, 7)), false),
		"duplicate answered": s.handle(b, s.record(rt, redemption("au-1", 1, 7)), false),
	} {
		if r.outcome() != "ALREADY_APPLIED" || r.result.UsedPoint == nil || *r.result.UsedPoint != 7 {
			t.Errorf("%s: %s %+v (%s), want ALREADY_APPLIED with usedPoint 7", name, r.outcome(), r.result, r.detail())
		}
	}
	// An accrual's has none: it charged nothing.
	pt := topics.Purchase
	s.handle(b, s.record(pt, purchase("au-2", 1, 5000)), false)
	if r := s.handle(b, s.record(pt, purchase("au-2", 1, 5000)), true); r.outcome() != "ALREADY_APPLIED" || r.result.UsedPoint != nil {
		t.Errorf("accrual: %s %+v", r.outcome(), r.result)
	}
}
