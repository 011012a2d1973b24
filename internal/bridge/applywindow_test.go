package bridge_test

import (
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// lateOnce makes the next write to endpoint late: answered 504 and applied
// delay later. The fault is switched off as soon as that write is pending,
// so that the record's retry is an ordinary write; done reports whether it
// was.
func (s *stack) lateOnce(endpoint string, delay time.Duration) (done func() bool) {
	s.sim.SetFaults(sim.Faults{LateApplyRate: 1, LateApplyDelay: delay, Endpoints: []string{endpoint}})
	switched := make(chan bool, 1)
	go func() {
		// Polling, with a deadline: the retry comes no sooner than a
		// back-off and a lookup after the 504.
		deadline := time.Now().Add(10 * time.Second)
		for s.sim.Counters().LatePending == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		s.sim.SetFaults(sim.Faults{})
		switched <- time.Now().Before(deadline)
	}()
	return func() bool {
		select {
		case ok := <-switched:
			return ok
		case <-time.After(10 * time.Second):
			return false
		}
	}
}

// The partner answers the first write 504 and applies it 300 ms later
// (issue 29, finding 1), and applies a repeated transactionId again, so
// the guard is the only protection. With --partner-apply-window above that
// delay the retry's lookup waits for the window and finds the late write:
// one effect. With a window below it, the lookup runs too soon, finds
// nothing, and the record is written twice: the negative case, which shows
// that the test can fail.
func TestApplyWindowSettlesBeforeLookup(t *testing.T) {
	const late = 300 * time.Millisecond
	for _, tc := range []struct {
		name    string
		window  time.Duration
		effects int
	}{
		{"window above the late delay", 600 * time.Millisecond, 1},
		{"window below the late delay (negative case)", 50 * time.Millisecond, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: sim.DuplicateApply},
				profile: partnerprofile.Profile{ApplyWindow: tc.window}})
			b := s.bridge(nil)
			pt, rt := topics.Purchase, topics.RefundRedemption
			settled := func(what, tx string, r reply, start time.Time, points int64) {
				t.Helper()
				s.sim.FlushLateApplies() // the negative case's late write lands now
				if got := s.sim.Effects(tx); got != tc.effects {
					t.Errorf("%s: %d effects of %s, want %d; ledger %v", what, got, tx, tc.effects, s.sim.Ledger())
				}
				if tc.effects == 1 {
					if r.outcome() != "ALREADY_APPLIED" {
						t.Errorf("%s: outcome %s (%s), want ALREADY_APPLIED", what, r.outcome(), r.detail())
					}
					if r.result != nil && r.result.Points != nil && *r.result.Points != points {
						t.Errorf("%s: points %d, want %d", what, *r.result.Points, points)
					}
					if took := time.Since(start); took < tc.window {
						t.Errorf("%s: answered after %s, inside the apply window %s", what, took, tc.window)
					}
				}
			}

			// Accrual: 100,000 VND earns 100 points.
			done := s.lateOnce(sim.EndpointAccrual, late)
			start := time.Now()
			r := s.handle(b, s.record(pt, purchase("aw-acc", 1, 100_000)), false)
			if !done() {
				t.Fatal("the accrual's late write never came")
			}
			settled("accrual", "aw-acc", r, start, 100)
			if m, _ := s.sim.Member(sim.MemberID(1)); int64(m.Balance) != sim.DefaultInitialBalance+100*int64(tc.effects) {
				t.Errorf("accrual: balance %v", m.Balance)
			}

			// Redemption of 40 points.
			done = s.lateOnce(sim.EndpointRedemption, late)
			start = time.Now()
			r = s.handle(b, s.record(rt, redemption("aw-red", 2, 40)), false)
			if !done() {
				t.Fatal("the redemption's late write never came")
			}
			settled("redemption", "aw-red", r, start, 40)
			if m, _ := s.sim.Member(sim.MemberID(2)); int64(m.Balance) != sim.DefaultInitialBalance-40*int64(tc.effects) {
				t.Errorf("redemption: balance %v", m.Balance)
			}

			// A refund's clawback slot: 30,000 of a 100,000 purchase is 30
			// points, written late into slot 1.
			s.handle(b, s.record(pt, purchase("aw-pur", 3, 100_000)), false)
			done = s.lateOnce(sim.EndpointRedemption, late)
			start = time.Now()
			r = s.handle(b, s.record(rt, refundOf("aw-ref", "aw-pur", 3, 30_000, refundBase)), false)
			if !done() {
				t.Fatal("the clawback's late write never came")
			}
			settled("clawback", bridge.ClawbackID("aw-pur", 1), r, start, 30)
			if got := s.clawed(3, 100); got != 30*int64(tc.effects) {
				t.Errorf("clawback: clawed back %d", got)
			}
		})
	}
}

// Two refunds of one original in one process: the first one's clawback
// write goes late (504, applied 300 ms later) and it lets go of the lane;
// the second must not take slot 1 for free meanwhile. It waits for the
// first's window, sees slot 1 filled, and claws back into slot 2: each
// slot holds one effect, and the cap holds.
func TestApplyWindowClawbackLaneWaits(t *testing.T) {
	s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: sim.DuplicateApply},
		profile: partnerprofile.Profile{ApplyWindow: 600 * time.Millisecond}})
	b := s.bridge(func(o *bridge.Options) { o.RecordAttempts = 1 }) // the first refund stops at its 504
	pt, rt := topics.Purchase, topics.RefundRedemption
	s.handle(b, s.record(pt, purchase("lw-pur", 4, 100_000)), false)
	done := s.lateOnce(sim.EndpointRedemption, 300*time.Millisecond)
	first := s.handle(b, s.record(rt, refundOf("lw-1", "lw-pur", 4, 30_000, refundBase)), false)
	if !done() {
		t.Fatal("the first clawback's late write never came")
	}
	if first.err == nil || first.err.Category != events.CategoryTransientExhausted {
		t.Fatalf("first refund: %s %s, want TRANSIENT_EXHAUSTED after its one attempt", first.outcome(), first.detail())
	}
	second := s.handle(b, s.record(rt, refundOf("lw-2", "lw-pur", 4, 50_000, refundBase.Add(time.Minute))), false)
	if second.outcome() != "APPLIED" || second.clawback() != bridge.ClawbackID("lw-pur", 2) {
		t.Errorf("second refund: %s into %q (%s), want APPLIED into slot 2", second.outcome(), second.clawback(), second.detail())
	}
	s.sim.FlushLateApplies()
	for k := 1; k <= 2; k++ {
		if got := s.sim.Effects(bridge.ClawbackID("lw-pur", k)); got != 1 {
			t.Errorf("slot %d: %d effects, want 1; ledger %v", k, got, s.sim.Ledger())
		}
	}
	if got := s.clawed(4, 100); got != 80 {
		t.Errorf("clawed back %d, want 80", got)
	}
}
