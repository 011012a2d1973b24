package bridge_test

import (
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// otherPartner names nothing the simulator names by default.
var otherPartner = partnerprofile.Profile{NotFoundCodes: []string{"TXN_NOT_FOUND"}, MemberNotFoundCodes: []string{"NO_SUCH_MEMBER"},
	DuplicateCodes: []string{"TXN_DUPLICATE"},
	AccrualType:    "EARN", RedemptionType: "BURN", AppliedStatuses: []string{"COMPLETED"},
	RedemptionDateFormat: partnerprofile.DateEpochMillis}

// A simulator answering with another partner's codes, types and status,
// and a bridge configured to match: the guard (fresh, duplicate answers,
// replay) and refunds work as against the default profile, one effect per
// transaction.
func TestProfileMatching(t *testing.T) {
	s := newStack(t, stackOpts{sim: sim.Options{Profile: otherPartner}})
	b := s.bridge(func(o *bridge.Options) { o.Profile = otherPartner })
	pt, rt := topics.Purchase, topics.RefundRedemption

	// Fresh (guarded): looked up, not found by TXN_NOT_FOUND, applied.
	if r := s.handle(b, s.record(pt, purchase("m-1", 1, 10_000)), true); r.outcome() != "APPLIED" {
		t.Fatalf("fresh new: %s (%s)", r.outcome(), r.detail())
	}
	// Fresh again: found as an EARN with status COMPLETED.
	if r := s.handle(b, s.record(pt, purchase("m-1", 1, 10_000)), true); r.outcome() != "ALREADY_APPLIED" {
		t.Errorf("fresh applied: %s (%s)", r.outcome(), r.detail())
	}
	// Unguarded repeat: TXN_DUPLICATE is the duplicate answer, looked up.
	if r := s.handle(b, s.record(pt, purchase("m-1", 1, 10_000)), false); r.outcome() != "ALREADY_APPLIED" {
		t.Errorf("duplicate: %s (%s)", r.outcome(), r.detail())
	}
	if r := s.handle(b, s.record(rt, redemption("m-2", 1, 3)), true); r.outcome() != "APPLIED" {
		t.Errorf("redemption: %s (%s)", r.outcome(), r.detail())
	}
	if r := s.handle(b, s.record(rt, redemption("m-2", 1, 3)), false); r.outcome() != "ALREADY_APPLIED" {
		t.Errorf("redemption repeated: %s (%s)", r.outcome(), r.detail())
	}
	// A refund finds the original as an EARN and claws back half of it.
	r := s.handle(b, s.record(rt, refundOf("m-f", "m-1", 1, 5000, time.Now())), false)
	if r.outcome() != "APPLIED" || r.result.UsedPoint == nil || *r.result.UsedPoint != 5 {
		t.Errorf("refund: %s %+v (%s)", r.outcome(), r.result, r.detail())
	}
	// The original's id found as a BURN: the partner (the simulator) keys
	// by id and type, so an accrual may be beside it, unseen. Held, then
	// a retryable error; nothing clawed back on a guess.
	shortHold := s.bridge(func(o *bridge.Options) { o.Profile, o.UnrecognisedHold = otherPartner, 50*time.Millisecond })
	if r := s.handle(shortHold, s.record(rt, refundOf("m-g", "m-2", 1, 500, time.Now())), false); r.outcome() != "error TRANSIENT_EXHAUSTED UNRECOGNISED_ANSWER" ||
		!r.err.Retryable || !strings.Contains(r.detail(), "other kind") {
		t.Errorf("refund of a redemption: %s (%s)", r.outcome(), r.detail())
	}
	// Told the partner keys by id alone, the BURN is all there is.
	byID := otherPartner
	byID.TransactionKey = partnerprofile.KeyID
	if r := s.handle(s.bridge(func(o *bridge.Options) { o.Profile = byID }), s.record(rt, refundOf("m-g", "m-2", 1, 500, time.Now())), false); r.outcome() != "error BUSINESS ORIGINAL_NOT_FOUND" {
		t.Errorf("refund of a redemption, keyed by id: %s (%s)", r.outcome(), r.detail())
	}
	// An unknown member, guarded or not: the lookup's NO_SUCH_MEMBER found
	// nothing, and the write is refused as it is unguarded (BUSINESS, one
	// attempt), not held as an answer the profile does not name.
	for _, fresh := range []bool{false, true} {
		r := s.handle(b, s.record(pt, purchase("m-nobody", 9999, 10_000)), fresh)
		if r.outcome() != "error BUSINESS" || r.err.APIErrorCode == nil || *r.err.APIErrorCode != "NO_SUCH_MEMBER" || r.err.Retryable {
			t.Errorf("unknown member, fresh %v: %s %+v", fresh, r.outcome(), r.err)
		}
	}
	// A refund for an unknown member: the partner's refusal, not
	// ORIGINAL_NOT_FOUND.
	if r := s.handle(b, s.record(rt, refundOf("m-h", "m-1", 9999, 500, time.Now())), false); r.outcome() != "error BUSINESS" ||
		r.err.APIErrorCode == nil || *r.err.APIErrorCode != "NO_SUCH_MEMBER" {
		t.Errorf("refund for an unknown member: %s %+v", r.outcome(), r.err)
	}
	// Replay guards everything: applied ones are found, a new one applied.
	replay := s.bridge(func(o *bridge.Options) { o.Profile, o.Replay = otherPartner, true })
	for _, tc := range []struct {
		topic string
		ev    events.Event
		want  string
	}{
		{pt, purchase("m-1", 1, 10_000), "ALREADY_APPLIED"},
		{rt, redemption("m-2", 1, 3), "ALREADY_APPLIED"},
		{rt, refundOf("m-f", "m-1", 1, 5000, time.Now()), "ALREADY_APPLIED"},
		{pt, purchase("m-3", 1, 10_000), "APPLIED"},
	} {
		if r := s.handle(replay, s.record(tc.topic, tc.ev), false); r.outcome() != tc.want || r.header("replayed") != "true" {
			t.Errorf("replay %s: %s, want %s (%s)", tc.ev.ID(), r.outcome(), tc.want, r.detail())
		}
	}
	for _, id := range []string{"m-1", "m-2", bridge.ClawbackID("m-1", 1), "m-3"} {
		if e := s.sim.Effects(id); e != 1 {
			t.Errorf("%s: %d effects", id, e)
		}
	}
	if n := value(t, s.metrics.UnrecognisedAnswers.WithLabelValues("errorCode")) +
		value(t, s.metrics.UnrecognisedAnswers.WithLabelValues("transactionType")) +
		value(t, s.metrics.UnrecognisedAnswers.WithLabelValues("status")); n != 0 {
		t.Errorf("%v unrecognised answers", n)
	}
}

// A bridge whose profile does not match the partner's never guesses: a
// lookup answer it does not recognise holds the record (here for a short
// --unrecognised-hold, then TRANSIENT_EXHAUSTED UNRECOGNISED_ANSWER,
// retryable), with a metric and a warning naming the field and value, and
// no write is sent.
func TestProfileNotMatching(t *testing.T) {
	s := newStack(t, stackOpts{sim: sim.Options{Profile: otherPartner}})
	pt, rt := topics.Purchase, topics.RefundRedemption
	// Applied without a lookup (an unguarded first write), so that there
	// is something to find.
	if r := s.handle(s.bridge(nil), s.record(pt, purchase("n-1", 1, 10_000)), false); r.outcome() != "APPLIED" {
		t.Fatalf("setup: %s (%s)", r.outcome(), r.detail())
	}
	// A clawback in the original's first slot, for a refund to scan.
	if r := s.handle(s.bridge(func(o *bridge.Options) { o.Profile = otherPartner }), s.record(rt, refundOf("n-g", "n-1", 1, 1000, time.Now())), false); r.outcome() != "APPLIED" {
		t.Fatalf("setup: %s (%s)", r.outcome(), r.detail())
	}
	matchingBut := func(mod func(*partnerprofile.Profile)) partnerprofile.Profile {
		p := otherPartner
		mod(&p)
		return p
	}
	for _, tc := range []struct {
		name    string
		profile partnerprofile.Profile
		topic   string
		ev      events.Event
		field   string
		value   string
		ep      string // the write that must not be sent
	}{
		// The simulator's own codes, types and status: the default profile.
		{"not-found code", partnerprofile.Profile{}, pt, purchase("n-2", 1, 10_000), "errorCode", "TXN_NOT_FOUND", sim.EndpointAccrual},
		{"accrual type", partnerprofile.Profile{}, pt, purchase("n-1", 1, 10_000), "transactionType", "EARN", sim.EndpointAccrual},
		{"refund's original type", partnerprofile.Profile{}, rt, refundOf("n-f", "n-1", 1, 5000, time.Now()), "transactionType", "EARN", sim.EndpointRedemption},
		{"status", matchingBut(func(p *partnerprofile.Profile) { p.AppliedStatuses = []string{"SUCCESS"} }),
			pt, purchase("n-1", 1, 10_000), "status", "COMPLETED", sim.EndpointAccrual},
		{"refund's original status", matchingBut(func(p *partnerprofile.Profile) { p.AppliedStatuses = []string{"SUCCESS"} }),
			rt, refundOf("n-f", "n-1", 1, 5000, time.Now()), "status", "COMPLETED", sim.EndpointRedemption},
		// The original is read, the clawback slot it finds is not: a refund
		// scanning its original's slots is held as the guard is.
		{"refund's clawback slot type", matchingBut(func(p *partnerprofile.Profile) { p.RedemptionType = partnerprofile.DefaultRedemptionType }),
			rt, refundOf("n-h", "n-1", 1, 5000, time.Now()), "transactionType", "BURN", sim.EndpointRedemption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replay := s.bridge(func(o *bridge.Options) {
				o.Profile, o.Replay, o.UnrecognisedHold = tc.profile, true, 100*time.Millisecond
			})
			writes := s.sim.TotalCalls(tc.ep)
			effects := s.sim.Effects(tc.ev.ID())
			before := value(t, s.metrics.UnrecognisedAnswers.WithLabelValues(tc.field))
			r := s.handle(replay, s.record(tc.topic, tc.ev), false)
			if r.outcome() != "error TRANSIENT_EXHAUSTED UNRECOGNISED_ANSWER" || !r.err.Retryable || r.err.Attempts < 2 {
				t.Fatalf("%s, want a retryable TRANSIENT_EXHAUSTED UNRECOGNISED_ANSWER after a hold of several attempts: %+v", r.outcome(), r.err)
			}
			if !strings.Contains(r.detail(), tc.field) || !strings.Contains(r.detail(), tc.value) {
				t.Errorf("detail does not name %s %s: %s", tc.field, tc.value, r.detail())
			}
			if got := s.sim.TotalCalls(tc.ep) - writes; got != 0 {
				t.Errorf("%d %s calls sent", got, tc.ep)
			}
			if e := s.sim.Effects(tc.ev.ID()); e != effects {
				t.Errorf("%s: effects %d → %d", tc.ev.ID(), effects, e)
			}
			if got := value(t, s.metrics.UnrecognisedAnswers.WithLabelValues(tc.field)) - before; got != float64(r.err.Attempts) {
				t.Errorf("unrecognised_answers_total{field=%q} +%v, want +%d, one per attempt", tc.field, got, r.err.Attempts)
			}
			if want := `"field":"` + tc.field + `","answered":"` + tc.value + `"`; !strings.Contains(s.logs.String(), want) {
				t.Errorf("no log line with %s", want)
			}
		})
	}
	// The setup's clawback is the only redemption applied.
	if n := s.sim.Calls(sim.EndpointRedemption, 200); n != 1 {
		t.Errorf("%d redemptions applied, want the setup's 1", n)
	}
}
