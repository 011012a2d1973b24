package chaos

import (
	"fmt"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// badPartner is a partner as bad as the spec allows, on top of the chaos's
// own API faults: it applies some accruals and redemptions after answering
// them 504 (the gateway timed out before the backend committed), and its
// lookups lag its writes. Both are properties of the partner, not passing
// faults: they stay in force through the 429 bursts and after the other
// faults end, until every member has stopped.
type badPartner struct {
	// lateRate and lateDelay: sim.Faults.LateApplyRate and LateApplyDelay.
	lateRate  float64
	lateDelay time.Duration
	// lookupLag: sim.Faults.LookupLag.
	lookupLag time.Duration
}

// chaosBadPartner: 4% of the writes land 300 ms after their 504, and a
// lookup sees a transaction 300 ms after it applied, so a lookup sees a
// late write 600 ms after its 504; the members' apply window
// (chaosApplyWindow, 1 s) leaves 400 ms for a timer that fires late on a
// busy machine.
var chaosBadPartner = badPartner{lateRate: 0.04, lateDelay: 300 * time.Millisecond, lookupLag: 300 * time.Millisecond}

// TestChaosBadPartner runs the chaos against a partner that applies a
// repeated transactionId again, applies writes late and lags its lookups
// (issue 29, item 3): the guard must wait out the apply window after an
// ambiguous answer before it trusts a not-found, and the takeover wait and
// the lease must count the window too.
func TestChaosBadPartner(t *testing.T) {
	bad := chaosBadPartner
	runChaos(t, false, sim.DuplicateApply, &bad)
}

// TestChaosBadPartnerExactlyOnce is TestChaosBadPartner with --delivery
// exactly-once, where every aborted round's records are taken again.
func TestChaosBadPartnerExactlyOnce(t *testing.T) {
	bad := chaosBadPartner
	runChaos(t, true, sim.DuplicateApply, &bad)
}

// configure refuses an apply window that a late write, seen through the
// lagging lookups, could outlast: the run would then test a partner
// outside the bridge's stated assumption, not the bridge.
func (b *badPartner) configure(t *testing.T, cfg *config.Config) {
	t.Helper()
	if b == nil {
		return
	}
	if w := cfg.Partner.Profile.ApplyWindow; w <= b.lateDelay+b.lookupLag {
		t.Fatalf("apply window %v: a late write is seen %v after its 504 (delay %v + lookup lag %v); the window must exceed it",
			w, b.lateDelay+b.lookupLag, b.lateDelay, b.lookupLag)
	}
}

// with returns f with the partner's own misbehaviour added.
func (b *badPartner) with(f sim.Faults) sim.Faults {
	if b == nil {
		return f
	}
	f.LateApplyRate, f.LateApplyDelay, f.LookupLag = b.lateRate, b.lateDelay, b.lookupLag
	return f
}

// badPartnerReport is what the partner did, counted once every member has
// stopped and the late writes still pending have landed.
type badPartnerReport struct {
	landed, pending, dropped int // late writes
	answered504              int // accrual and redemption answers 504
	lookups                  int // lookups answered (found or not)
	overOne                  map[string]int
}

// settle lands the late writes still pending, so that none lands after the
// checks, and counts what the partner did. Every member must have stopped:
// a running one could send a write after it.
func (b *badPartner) settle(s *sim.Server) badPartnerReport {
	s.FlushLateApplies()
	c := s.Counters()
	r := badPartnerReport{landed: c.LateLanded, pending: c.LatePending, dropped: c.LateDropped,
		answered504: s.Calls(sim.EndpointAccrual, 504) + s.Calls(sim.EndpointRedemption, 504),
		overOne:     s.EffectsOver(1)}
	for status, n := range c.Calls[sim.EndpointLookup] {
		if status != 0 {
			r.lookups += n
		}
	}
	return r
}

// failures lists what did not hold: late writes must have landed (a run
// in which the fault never happened tests nothing), none may be left
// pending or dropped, and no transactionId in the partner's whole ledger
// (which would hold clawback slots, had the traffic refunds) may have
// applied more than once.
func (r badPartnerReport) failures(bad *badPartner) []string {
	var fs []string
	if bad != nil && r.landed == 0 {
		fs = append(fs, "no late write landed: the run did not test late applies")
	}
	if bad != nil && r.lookups == 0 {
		fs = append(fs, "no lookup was answered: the run did not test the lookup lag")
	}
	if r.pending != 0 || r.dropped != 0 {
		fs = append(fs, fmt.Sprintf("late writes pending %d, dropped %d after the flush", r.pending, r.dropped))
	}
	if len(r.overOne) > 0 {
		fs = append(fs, fmt.Sprintf("transactionIds applied more than once at the partner: %v", r.overOne))
	}
	return fs
}
