package main

import (
	"strings"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// A partner that names things its own way (the simulator with another
// profile), and `loyalty-bridge replay` after an outage: configured to
// match through LOYALTY_BRIDGE_PARTNER_*, the guard finds the applied
// purchases and applies the lost ones; configured not to, every record is
// held (for --unrecognised-hold, then a retryable error again) and not
// one accrual is sent.
func TestReplayFollowsThePartnerProfile(t *testing.T) {
	other := partnerprofile.Profile{NotFoundCodes: []string{"TXN_NOT_FOUND"}, DuplicateCodes: []string{"TXN_DUPLICATE"},
		AccrualType: "EARN", RedemptionType: "BURN", AppliedStatuses: []string{"COMPLETED"}}
	matching := map[string]string{
		"LOYALTY_BRIDGE_PARTNER_NOT_FOUND_CODES":  "TXN_NOT_FOUND",
		"LOYALTY_BRIDGE_PARTNER_DUPLICATE_CODES":  "TXN_DUPLICATE",
		"LOYALTY_BRIDGE_PARTNER_ACCRUAL_TYPE":     "EARN",
		"LOYALTY_BRIDGE_PARTNER_REDEMPTION_TYPE":  "BURN",
		"LOYALTY_BRIDGE_PARTNER_APPLIED_STATUSES": "COMPLETED",
	}
	for _, match := range []bool{false, true} {
		name := map[bool]string{false: "not matching", true: "matching"}[match]
		t.Run(name, func(t *testing.T) {
			s := newOpsStack(t, sim.Options{Profile: other})
			if match {
				for k, v := range matching {
					s.envs[k] = v
				}
			}
			applied, lost := ids("pa", 4), ids("pl", 4)
			s.outage(t, func(c *config.Config) { c.Partner.Profile = other.WithDefaults() }, applied, lost)
			calls := s.st.Sim.TotalCalls(sim.EndpointAccrual)
			code, out, errs := s.cli(t, "replay", "--from-errors", s.topics.Purchase+".error", "--record-backoff", "1ms", "--rate", "200/s",
				"--unrecognised-hold", "200ms")
			if !match {
				if code != 1 || outcome(t, out, "error TRANSIENT_EXHAUSTED") != 8 || outcome(t, out, "APPLIED") != 0 {
					t.Errorf("replay with the simulator's defaults against another partner: exit %d\n%s\n%s", code, out, errs)
				}
				if got := s.st.Sim.TotalCalls(sim.EndpointAccrual) - calls; got != 0 {
					t.Errorf("%d accruals sent on unrecognised answers", got)
				}
				for _, want := range []string{`"field":"errorCode","answered":"TXN_NOT_FOUND"`, `"field":"transactionType","answered":"EARN"`} {
					if !strings.Contains(errs, want) {
						t.Errorf("no warning with %s:\n%s", want, errs)
					}
				}
				for _, id := range append(applied, lost...) {
					if e := s.st.Sim.Effects(id); e != map[bool]int{true: 1, false: 0}[strings.HasPrefix(id, "pa")] {
						t.Errorf("%s: %d effects", id, e)
					}
				}
				return
			}
			if code != 0 || outcome(t, out, "ALREADY_APPLIED") != len(applied) || outcome(t, out, "APPLIED") != len(lost) {
				t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
			}
			all, replayed := byKey(s.replies(t, s.topics.Purchase+".result", len(applied)+len(lost)))
			for _, id := range append(applied, lost...) {
				if s.st.Sim.Effects(id) != 1 || all[id] != 1 || replayed[id] != 1 {
					t.Errorf("%s: %d effects, %d results (%d replayed)", id, s.st.Sim.Effects(id), all[id], replayed[id])
				}
			}
		})
	}
}
