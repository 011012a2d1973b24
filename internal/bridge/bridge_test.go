package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/circuit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// Every event type, every outcome and every error category that input
// alone can cause, through the pipeline and Kafka: asserted on the decoded
// reply records (topic, key, headers, fields); no personal data in any
// output or log line; metrics counted.
func TestEveryOutcomeAndCategory(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(func(o *bridge.Options) { o.Enrich = true; o.IncludeOriginal = true })
	out := s.follow()
	p := s.producer()
	s.start(memberOpts{bridge: b})
	pt, rt, mt := topics.Purchase, topics.RefundRedemption, topics.MemberOnboarding

	corr := kgo.RecordHeader{Key: "correlation-id", Value: []byte("corr-1")}
	trace := kgo.RecordHeader{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}
	other := kgo.RecordHeader{Key: "x-private", Value: []byte("not copied")}
	badSign := "not-a-jwt"
	signed := redemption("r-2", 2, 1)
	signed.Sign = &badSign
	link := func(id string, unlink bool) events.Event {
		if unlink {
			return &events.MemberUnlinkRequested{TransactionID: id, LoyaltyID: sim.MemberID(3), PartnerMemberID: "pm-3"}
		}
		return &events.MemberLinkRequested{TransactionID: id, LoyaltyID: sim.MemberID(3), PartnerMemberID: "pm-3"}
	}
	// Phase 1. Records of one key are answered in order (o-1 before o-2,
	// the link commands in turn).
	p.send(pt, sim.MemberID(1), purchase("p-1", 1, 200_000), corr, trace, other)
	p.send(rt, sim.MemberID(2), redemption("r-1", 2, 30))
	p.send(rt, sim.MemberID(2), signed)
	p.send(mt, "ext-o-1", onboarding("o-1", "ext-o-1"))
	p.send(mt, "ext-o-1", onboarding("o-2", "ext-o-1")) // enrolled already: refused
	for i, id := range []string{"l-1", "l-2", "u-1", "u-2"} {
		p.send(mt, sim.MemberID(3), link(id, i >= 2))
	}
	p.send(pt, sim.MemberID(9999), purchase("p-nobody", 9999, 10))
	p.send(pt, sim.MemberID(1), purchase("p-bad", 1, -5))
	p.raw(pt, "junk", []byte("\x00\x00\x00\x7fjunk"))
	p.raw(pt, "junk", []byte("random bytes"))
	p.flush()
	phase1 := []string{"p-1", "r-1", "r-2", "o-1", "o-2", "l-1", "l-2", "u-1", "u-2", "p-nobody", "p-bad"}
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		if c := out.count(); c < len(phase1)+2 {
			return false, fmt.Sprintf("%d of %d replies", c, len(phase1)+2)
		}
		return true, ""
	})
	// Phase 2, refunds of p-1 (another topic, so only after its answer).
	p.send(rt, sim.MemberID(1), &events.PurchaseRefunded{TransactionID: "f-1", OriginalTransactionID: "p-1", LoyaltyID: sim.MemberID(1), RefundAmount: 100_000, RefundDate: time.Now()})
	p.send(rt, sim.MemberID(1), &events.PurchaseRefunded{TransactionID: "f-2", OriginalTransactionID: "p-1", LoyaltyID: sim.MemberID(1), RefundAmount: 1, RefundDate: time.Now()})
	p.send(rt, sim.MemberID(1), &events.PurchaseRefunded{TransactionID: "f-3", OriginalTransactionID: "never", LoyaltyID: sim.MemberID(1), RefundAmount: 10, RefundDate: time.Now()})
	p.flush()
	out.waitAll(t, []string{"f-1", "f-2", "f-3"}, 30*time.Second)

	one := func(key string) reply {
		t.Helper()
		rs := out.get(key)
		if len(rs) != 1 {
			t.Fatalf("%s: %d replies, want 1", key, len(rs))
		}
		return rs[0]
	}
	res, errT := topics.ResultTopic, topics.ErrorTopic
	cases := []struct {
		key, topic, outcome, eventType string
		check                          func(r reply)
	}{
		{"p-1", res(pt), "APPLIED", "PurchaseCompleted", func(r reply) {
			if r.header("correlation-id") != "corr-1" || r.header("traceparent") != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" || r.header("x-private") != "" {
				t.Errorf("p-1: headers %v", r.rec.Headers)
			}
			x := r.result
			if x.BitReference == nil || x.SponsorID == nil || x.RequestID == nil || x.APITimestamp == nil || *x.LoyaltyID != sim.MemberID(1) ||
				x.Attempts != 1 || x.ProcessedAt.IsZero() || x.LatencyMs < 0 {
				t.Errorf("p-1: %+v", x)
			}
		}},
		{"r-1", res(rt), "APPLIED", "RedemptionRequested", func(r reply) {
			if x := r.result; x.UsedPoint == nil || *x.UsedPoint != 30 || x.BitReference == nil || x.RequestID == nil {
				t.Errorf("r-1 (signed by the bridge): %+v", x)
			}
		}},
		{"r-2", errT(rt), "error BUSINESS", "RedemptionRequested", func(r reply) {
			x := r.err
			if x.APIErrorCode == nil || *x.APIErrorCode != "INVALID_SIGN" || x.HTTPStatus == nil || *x.HTTPStatus != 400 ||
				x.APIStatusCode == nil || *x.APIStatusCode != 400 || x.APIMessage == nil || x.APIErrorMessage == nil || x.Retryable {
				t.Errorf("r-2 (sign passed through, refused): %+v", x)
			}
		}},
		{"o-1", res(mt), "ONBOARDED", "MemberOnboardRequested", func(r reply) {
			if x := r.result; x.MemberCode == nil || x.CreatedAt == nil || x.LoyaltyID == nil || *x.LoyaltyID != *x.MemberCode {
				t.Errorf("o-1: %+v", x)
			}
		}},
		{"o-2", errT(mt), "error BUSINESS", "MemberOnboardRequested", func(r reply) {
			x := r.err
			if x.APIErrorCode == nil || *x.APIErrorCode != "0001" || x.APIErrorName == nil || *x.APIErrorName != "BAD_REQUEST" ||
				x.APIStatusCode == nil || *x.APIStatusCode != 400 || x.ResultURL != nil || x.APIMessage != nil || x.APIErrorMessage != nil {
				t.Errorf("o-2 (refused onboarding: the partner's codes, none of its text): %+v", x)
			}
		}},
		{"l-1", res(mt), "LINKED", "MemberLinkRequested", func(r reply) {
			x := r.result
			if x.StateChanged == nil || !*x.StateChanged || *x.LinkState != events.LinkStateLinked || x.APIErrorCode != nil ||
				x.TierClass == nil || x.MemberStatus == nil || x.EKYCStatus == nil {
				t.Errorf("l-1 (enriched): %+v", x)
			}
		}},
		{"l-2", res(mt), "ALREADY_LINKED", "MemberLinkRequested", func(r reply) {
			x := r.result
			if x.StateChanged == nil || *x.StateChanged || *x.LinkState != events.LinkStateLinked || x.APIErrorCode == nil || *x.APIErrorCode != "MEMBER_IS_LINKED" {
				t.Errorf("l-2: %+v", x)
			}
		}},
		{"u-1", res(mt), "UNLINKED", "MemberUnlinkRequested", func(r reply) {
			if x := r.result; x.StateChanged == nil || !*x.StateChanged || *x.LinkState != events.LinkStateNotLinked {
				t.Errorf("u-1: %+v", x)
			}
		}},
		{"u-2", res(mt), "NOT_LINKED", "MemberUnlinkRequested", func(r reply) {
			x := r.result
			if x.StateChanged == nil || *x.StateChanged || *x.LinkState != events.LinkStateNotLinked || x.APIErrorCode == nil || *x.APIErrorCode != "MEMBER_IS_NOT_LINKED_YET" {
				t.Errorf("u-2: %+v", x)
			}
		}},
		{"p-nobody", errT(pt), "error BUSINESS", "PurchaseCompleted", func(r reply) {
			if x := r.err; x.APIErrorCode == nil || *x.APIErrorCode != "MEMBER_NOT_FOUND" || x.Attempts != 1 {
				t.Errorf("p-nobody: %+v", x)
			}
		}},
		{"p-bad", errT(pt), "error VALIDATION", "PurchaseCompleted", func(r reply) {
			if x := r.err; !strings.Contains(x.Detail, "amount") || x.Retryable || x.Attempts != 0 || x.HTTPStatus != nil {
				t.Errorf("p-bad: %+v", x)
			}
		}},
		{"f-1", res(rt), "APPLIED", "PurchaseRefunded", func(r reply) {
			// 200,000 VND earned 200 points; half refunded claws back 100.
			if x := r.result; x.UsedPoint == nil || *x.UsedPoint != 100 || x.Attempts != 1 {
				t.Errorf("f-1: %+v", x)
			}
		}},
		{"f-2", res(rt), "NO_OP", "PurchaseRefunded", func(r reply) {
			if x := r.result; x.UsedPoint == nil || *x.UsedPoint != 0 || s.sim.Effects("f-2") != 0 {
				t.Errorf("f-2: %+v, effects %d", x, s.sim.Effects("f-2"))
			}
		}},
		{"f-3", errT(rt), "error BUSINESS ORIGINAL_NOT_FOUND", "PurchaseRefunded", func(r reply) {
			// Not parked here: the purchase may come later, so a replay
			// later may find it (issue 29, finding 6).
			if !r.err.Retryable {
				t.Error("f-3: ORIGINAL_NOT_FOUND not retryable")
			}
		}},
	}
	for _, c := range cases {
		r := one(c.key)
		if r.outcome() != c.outcome {
			t.Errorf("%s: %s, want %s (%s)", c.key, r.outcome(), c.outcome, r.detail())
			continue
		}
		if r.rec.Topic != c.topic {
			t.Errorf("%s: on %s, want %s", c.key, r.rec.Topic, c.topic)
		}
		wantPart, wantOff := r.header("source-partition"), r.header("source-offset")
		var src string
		if r.result != nil {
			src = fmt.Sprintf("%d/%d", r.result.Source.Partition, r.result.Source.Offset)
			if r.result.TransactionID != c.key || string(r.result.EventType) != c.eventType {
				t.Errorf("%s: transactionId %s eventType %s", c.key, r.result.TransactionID, r.result.EventType)
			}
		} else {
			src = fmt.Sprintf("%d/%d", r.err.Source.Partition, r.err.Source.Offset)
			if r.err.TransactionID != c.key || r.err.EventType == nil || string(*r.err.EventType) != c.eventType ||
				r.err.Source.Timestamp.IsZero() || len(r.err.OriginalValue) == 0 || len(r.err.OriginalKey) == 0 {
				t.Errorf("%s: error event fields %+v", c.key, r.err)
			}
		}
		if src != wantPart+"/"+wantOff {
			t.Errorf("%s: headers say %s/%s, event %s", c.key, wantPart, wantOff, src)
		}
		if r.header("event-type") != c.eventType || r.header("source-topic") == "" || r.header("attempts") == "" || r.header("replayed") != "" {
			t.Errorf("%s: headers %v", c.key, r.rec.Headers)
		}
		if c.check != nil {
			c.check(r)
		}
	}

	// Undecodable records: keyed by their position, original carried.
	var decodeKinds []string
	for _, r := range out.all() {
		if r.err == nil || r.err.Category != events.CategoryDecode {
			continue
		}
		decodeKinds = append(decodeKinds, *r.err.Reason)
		want := fmt.Sprintf("%s/%s/%s", pt, r.header("source-partition"), r.header("source-offset"))
		if string(r.rec.Key) != want || r.err.TransactionID != want || r.header("event-type") != "unknown" ||
			string(r.err.OriginalKey) != "junk" || r.err.EventType != nil || r.rec.Topic != errT(pt) {
			t.Errorf("decode error: key %s %+v", r.rec.Key, r.err)
		}
	}
	if strings.Join(decodeKinds, ",") != "UNKNOWN_SCHEMA_ID,WRONG_MAGIC" && strings.Join(decodeKinds, ",") != "WRONG_MAGIC,UNKNOWN_SCHEMA_ID" {
		t.Errorf("decode errors %v", decodeKinds)
	}
	if e := s.sim.Effects("r-2") + s.sim.Effects("p-nobody") + s.sim.Effects("f-3"); e != 0 {
		t.Errorf("%d effects of refused records", e)
	}

	m := s.metrics
	for _, c := range []struct {
		got  float64
		want float64
		name string
	}{
		{value(t, m.RecordsCompleted.WithLabelValues(pt, "APPLIED")), 1, "purchase APPLIED"},
		{value(t, m.RecordsCompleted.WithLabelValues(pt, "error")), 4, "purchase errors"},
		{value(t, m.ErrorEvents.WithLabelValues(pt, "DECODE")), 2, "DECODE"},
		{value(t, m.ErrorEvents.WithLabelValues(pt, "VALIDATION")), 1, "VALIDATION"},
		{value(t, m.ErrorEvents.WithLabelValues(rt, "BUSINESS")), 2, "refund-redemption BUSINESS"},
		{value(t, m.RecordsCompleted.WithLabelValues(rt, "NO_OP")), 1, "NO_OP"},
		{value(t, m.RecordsCompleted.WithLabelValues(mt, "ALREADY_LINKED")), 1, "ALREADY_LINKED"},
	} {
		if c.got != c.want {
			t.Errorf("metric %s = %v, want %v", c.name, c.got, c.want)
		}
	}
	s.noPII(t, out.all())
}

// Failures that need the API to misbehave, handled directly: AUTH,
// TRANSIENT_EXHAUSTED, INTERNAL from Fallback (which fails on no content),
// an ambiguous onboarding, and the PII-strict and replay switches.
func TestFailureCategories(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(func(o *bridge.Options) { o.RecordAttempts = 2 })
	pt, mt := topics.Purchase, topics.MemberOnboarding

	s.sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{403: 1}, Endpoints: []string{sim.EndpointAccrual}})
	r := s.handle(b, s.record(pt, purchase("a-1", 1, 10)), false)
	if r.outcome() != "error AUTH" || !r.err.Retryable || r.err.HTTPStatus == nil || *r.err.HTTPStatus != 403 || r.err.Attempts != 1 {
		t.Errorf("403: %s %+v", r.outcome(), r.err)
	}

	s.sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, Endpoints: []string{sim.EndpointAccrual}})
	r = s.handle(b, s.record(pt, purchase("x-1", 1, 10)), false)
	if r.outcome() != "error TRANSIENT_EXHAUSTED" || !r.err.Retryable || r.err.Attempts != 2 || r.header("attempts") != "2" {
		t.Errorf("503: %s %+v", r.outcome(), r.err)
	}

	// Onboarding has no idempotency key: an ambiguous failure is reported
	// at once, never re-sent.
	s.sim.SetFaults(sim.Faults{ApplyThen500Rate: 1, Endpoints: []string{sim.EndpointOnboard}})
	calls := s.sim.TotalCalls(sim.EndpointOnboard)
	r = s.handle(b, s.record(mt, onboarding("ob-1", "ext-ob-1")), false)
	if r.outcome() != "error TRANSIENT_EXHAUSTED" || !r.err.Retryable || s.sim.TotalCalls(sim.EndpointOnboard)-calls != 1 ||
		!strings.Contains(r.err.Detail, "ext-ob-1") {
		t.Errorf("ambiguous onboarding: %s, %d calls, %+v", r.outcome(), s.sim.TotalCalls(sim.EndpointOnboard)-calls, r.err)
	}
	s.sim.SetFaults(sim.Faults{})

	for _, c := range []struct {
		name      string
		rec       *kgo.Record
		cause     error
		key       string
		retryable bool
	}{
		{"produce failure", s.record(pt, purchase("i-1", 1, 10)), fmt.Errorf("boom: %w", pipeline.ErrProduce), "i-1", true},
		{"handler bug", s.record(pt, purchase("i-2", 1, 10)), errors.New("bug"), "i-2", false},
		{"garbage", &kgo.Record{Topic: pt, Partition: 2, Offset: 7, Value: []byte{0, 0, 0}}, errors.New("bug"), pt + "/2/7", false},
		{"no value, no cause", &kgo.Record{Topic: pt, Partition: 2, Offset: 8}, nil, pt + "/2/8", false},
	} {
		out, err := b.Fallback(c.rec, c.cause)
		if err != nil || len(out) != 1 {
			t.Errorf("Fallback(%s): %d outputs, %v", c.name, len(out), err)
			continue
		}
		r := s.decode(out[0])
		if r.outcome() != "error INTERNAL" || string(r.rec.Key) != c.key || r.err.Retryable != c.retryable {
			t.Errorf("Fallback(%s): %s key %s retryable %v", c.name, r.outcome(), r.rec.Key, r.err.Retryable)
		}
	}
	if _, err := b.Fallback(&kgo.Record{Topic: "not.ours", Value: []byte("x")}, errors.New("bug")); err == nil {
		t.Error("Fallback of a topic without an error topic: no error")
	}

	strict := s.bridge(func(o *bridge.Options) { o.Replay = true })
	r = s.handle(strict, s.record(pt, purchase("s-1", 1, -1)), false)
	if r.outcome() != "error VALIDATION" || r.err.OriginalValue != nil || r.err.OriginalKey != nil || r.header("replayed") != "true" {
		t.Errorf("PII-strict replay: %s %+v %v", r.outcome(), r.err, r.rec.Headers)
	}
	s.noPII(t, nil)
}

// Redemptions without a sign: signed by Options.Signer; without it by the
// client's own signer; with neither, a VALIDATION error naming sign.
func TestRedemptionSigning(t *testing.T) {
	for _, c := range []struct {
		name                       string
		bridgeSigner, clientSigner bool
		want                       string
	}{
		{"bridge signer", true, false, "APPLIED"},
		{"client signer", false, true, "APPLIED"},
		{"no signer", false, false, "error VALIDATION"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStack(t, stackOpts{clientSigner: c.clientSigner})
			b := s.bridge(func(o *bridge.Options) {
				if !c.bridgeSigner {
					o.Signer = nil
				}
			})
			r := s.handle(b, s.record(topics.RefundRedemption, redemption("sg-1", 1, 5)), false)
			if r.outcome() != c.want {
				t.Fatalf("%s (%s)", r.outcome(), r.detail())
			}
			if r.err != nil && (!strings.Contains(r.err.Detail, "sign") || s.sim.TotalCalls(sim.EndpointRedemption) != 0) {
				t.Errorf("detail %q, %d calls", r.err.Detail, s.sim.TotalCalls(sim.EndpointRedemption))
			}
		})
	}
}

// The idempotency guard, under both duplicate policies: an ambiguous
// failure (applied, then answered 500), a Fresh record and a replayed one
// of an applied transaction all end ALREADY_APPLIED with exactly one effect;
// an unguarded duplicate is recognised as the partner answers it.
func TestGuard(t *testing.T) {
	for _, policy := range []sim.DuplicatePolicy{sim.DuplicateReject, sim.DuplicateReturnOriginal} {
		t.Run(policy.String(), func(t *testing.T) {
			s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: policy}})
			b := s.bridge(nil)
			pt, rt := topics.Purchase, topics.RefundRedemption

			s.sim.SetFaults(sim.Faults{ApplyThen500Rate: 1, Endpoints: []string{sim.EndpointAccrual, sim.EndpointRedemption}})
			rs := []reply{
				s.handle(b, s.record(pt, purchase("g-1", 1, 5000)), false),
				s.handle(b, s.record(rt, redemption("g-2", 1, 3)), false),
			}
			// A refund's clawback is a guarded redemption too.
			s.sim.SetFaults(sim.Faults{})
			s.handle(b, s.record(pt, purchase("g-p", 1, 10_000)), false)
			s.sim.SetFaults(sim.Faults{ApplyThen500Rate: 1, Endpoints: []string{sim.EndpointRedemption}})
			rs = append(rs, s.handle(b, s.record(rt, &events.PurchaseRefunded{TransactionID: "g-f", OriginalTransactionID: "g-p",
				LoyaltyID: sim.MemberID(1), RefundAmount: 5000, RefundDate: time.Now()}), false))
			s.sim.SetFaults(sim.Faults{})
			for _, r := range rs {
				if r.outcome() != "ALREADY_APPLIED" || r.result.BitReference == nil || r.result.Points == nil || r.result.Attempts != 2 {
					t.Errorf("after apply-then-500: %s %+v (%s)", r.outcome(), r.result, r.detail())
				}
			}
			if pts := rs[2].result.Points; pts == nil || *pts != 5 {
				t.Errorf("refund ALREADY_APPLIED points %v, want 5", pts)
			}
			if c := rs[2].result.ClawbackTransactionID; c == nil || *c != bridge.ClawbackID("g-p", 1) {
				t.Errorf("refund's clawback %v, want %s", c, bridge.ClawbackID("g-p", 1))
			}
			for _, id := range []string{"g-1", "g-2", bridge.ClawbackID("g-p", 1)} {
				if e := s.sim.Effects(id); e != 1 {
					t.Errorf("%s: %d effects", id, e)
				}
			}

			// Fresh and replayed records of applied transactions: looked up, not re-sent.
			calls := s.sim.TotalCalls(sim.EndpointAccrual)
			if r := s.handle(b, s.record(pt, purchase("g-1", 1, 5000)), true); r.outcome() != "ALREADY_APPLIED" {
				t.Errorf("fresh: %s", r.outcome())
			}
			replay := s.bridge(func(o *bridge.Options) { o.Replay = true })
			r := s.handle(replay, s.record(pt, purchase("g-1", 1, 5000)), false)
			if r.outcome() != "ALREADY_APPLIED" || r.header("replayed") != "true" {
				t.Errorf("replay: %s replayed=%q", r.outcome(), r.header("replayed"))
			}
			if got := s.sim.TotalCalls(sim.EndpointAccrual); got != calls {
				t.Errorf("guarded records re-sent the accrual: %d calls", got-calls)
			}
			// A fresh record never applied: looked up, then applied once.
			if r := s.handle(b, s.record(pt, purchase("g-3", 1, 5000)), true); r.outcome() != "APPLIED" || s.sim.Effects("g-3") != 1 {
				t.Errorf("fresh new: %s effects %d", r.outcome(), s.sim.Effects("g-3"))
			}
			// Unguarded duplicate: the partner's answer decides how it is found.
			r = s.handle(b, s.record(pt, purchase("g-3", 1, 5000)), false)
			want := "ALREADY_APPLIED"
			if policy == sim.DuplicateReturnOriginal {
				want = "APPLIED" // the partner returned the original and applied nothing
			}
			if r.outcome() != want || s.sim.Effects("g-3") != 1 {
				t.Errorf("duplicate: %s, want %s; effects %d", r.outcome(), want, s.sim.Effects("g-3"))
			}
			if f := value(t, s.metrics.GuardLookups.WithLabelValues("found")); f < 5 {
				t.Errorf("guard lookups found = %v", f)
			}
			if f := value(t, s.metrics.AlreadyApplied.WithLabelValues(pt)); f < 3 {
				t.Errorf("already applied (purchase) = %v", f)
			}
		})
	}
}

// After an ambiguous write, a guard lookup that fails is a failed attempt:
// the write is never sent again blind, and the budget ends the record
// TRANSIENT_EXHAUSTED (retryable).
func TestGuardNeverWritesBlind(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(func(o *bridge.Options) { o.RecordAttempts = 3 })
	s.sim.SetFaults(sim.Faults{ApplyThen500Rate: 1, Endpoints: []string{sim.EndpointAccrual}})
	s.failLookups.Store(true)
	r := s.handle(b, s.record(topics.Purchase, purchase("nb-1", 1, 5000)), false)
	if r.outcome() != "error TRANSIENT_EXHAUSTED" || !r.err.Retryable || r.err.Attempts != 3 {
		t.Errorf("%s %+v", r.outcome(), r.err)
	}
	if c := s.sim.TotalCalls(sim.EndpointAccrual); c != 1 {
		t.Errorf("accrual sent %d times", c)
	}
	// Replayed later, once the API is well: found, not re-applied.
	s.failLookups.Store(false)
	s.sim.SetFaults(sim.Faults{})
	if r := s.handle(s.bridge(func(o *bridge.Options) { o.Replay = true }), s.record(topics.Purchase, purchase("nb-1", 1, 5000)), false); r.outcome() != "ALREADY_APPLIED" ||
		s.sim.Effects("nb-1") != 1 {
		t.Errorf("replay: %s, effects %d", r.outcome(), s.sim.Effects("nb-1"))
	}
}

// Business errors are answers from a healthy API: a run of them does not
// open the circuit (with the breaker's default failure test), while API
// failures do.
func TestCircuitHearsOnlyAPIFailures(t *testing.T) {
	s := newStack(t, stackOpts{})
	br := s.breaker(3, time.Minute)
	b := s.bridge(func(o *bridge.Options) { o.Breaker = br; o.RecordAttempts = 1 })
	for i := range 10 {
		if r := s.handle(b, s.record(topics.Purchase, purchase(fmt.Sprintf("cb-%d", i), 9999, 10)), false); r.outcome() != "error BUSINESS" {
			t.Fatalf("%s", r.outcome())
		}
		if st := br.State(); st != circuit.Closed {
			t.Fatalf("circuit %s after %d business errors", st, i+1)
		}
	}
	s.sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{500: 1}, Endpoints: []string{sim.EndpointAccrual}})
	for i := range 3 {
		s.handle(b, s.record(topics.Purchase, purchase(fmt.Sprintf("cf-%d", i), 1, 10)), false)
	}
	if st := br.State(); st != circuit.Open {
		t.Fatalf("circuit %s after API failures", st)
	}
	for _, err := range []error{nil, context.Canceled, &loyalty.BusinessError{}, &loyalty.AuthError{}} {
		if loyalty.IsAPIFailure(err) {
			t.Errorf("IsAPIFailure(%T) = true", err)
		}
	}
	if !loyalty.IsAPIFailure(fmt.Errorf("x: %w", &loyalty.TransientError{})) {
		t.Error("IsAPIFailure(transient) = false")
	}
}

// A record whose context ends mid-call is abandoned, not answered: the
// next owner redoes it.
func TestAbandonedOnCancel(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(nil)
	s.sim.SetFaults(sim.Faults{HangRate: 1, Endpoints: []string{sim.EndpointAccrual}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	rec := s.record(topics.Purchase, purchase("c-1", 1, 10))
	go func() {
		out, err := b.Handle(ctx, rec, pipeline.Meta{})
		if len(out) != 0 {
			err = fmt.Errorf("%d outputs", len(out))
		}
		done <- err
	}()
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		if s.sim.TotalCalls(sim.EndpointAccrual) == 0 {
			return false, "no accrual call"
		}
		return true, ""
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Handle after cancel: %v", err)
	}
}

// Per-record lines are debug: an info-level log has one line per state
// change, not per record.
func TestPerRecordLogsAreDebug(t *testing.T) {
	s := newStack(t, stackOpts{})
	buf := &testkit.SyncBuffer{}
	b := s.bridge(func(o *bridge.Options) {
		o.Logger = zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(buf), zap.InfoLevel))
	})
	s.handle(b, s.record(topics.Purchase, purchase("d-1", 1, -1)), false)
	s.handle(b, &kgo.Record{Topic: topics.Purchase, Value: []byte("x")}, false)
	s.handle(b, s.record(topics.Purchase, purchase("d-2", 1, 10)), false)
	s.handle(b, s.record(topics.Purchase, purchase("d-3", 9999, 10)), false)
	if out := buf.String(); out != "" {
		t.Fatalf("info lines for single records:\n%s", out)
	}
}

// New reports every problem of its options together.
func TestNewChecksOptions(t *testing.T) {
	_, err := bridge.New(bridge.Options{RecordAttempts: -1, RetryBackoff: -time.Second,
		Profile: partnerprofile.Profile{AccrualType: "T", RedemptionType: "T"}})
	for _, want := range []string{"Client", "Codec", "RecordAttempts", "RetryBackoff", `Profile: accrual and redemption have the same transactionType "T"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v; want a problem naming %s", err, want)
		}
	}
	s := newStack(t, stackOpts{})
	_, err = bridge.New(bridge.Options{Client: s.client, Codec: s.codec, Topics: codec.Topics{Purchase: "other.purchase"}})
	if err == nil || !strings.Contains(err.Error(), "other.purchase.error") {
		t.Errorf("New with topics the codec lacks: %v", err)
	}
	b := s.bridge(nil)
	if got := strings.Join(b.Inputs(), ","); got != strings.Join(topics.Inputs(), ",") {
		t.Errorf("Inputs %s", got)
	}
}

// value reads a counter.
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A record that keeps probing a down API (half-open attempts that fail)
// does not spend its budget on them: it is held, not exhausted, and
// applied once the API is back.
func TestProbesDoNotSpendBudget(t *testing.T) {
	s := newStack(t, stackOpts{})
	br := s.breaker(1, 20*time.Millisecond)
	b := s.bridge(func(o *bridge.Options) { o.Breaker = br; o.RecordAttempts = 2 })
	s.sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, Endpoints: []string{sim.EndpointAccrual}})
	done := make(chan reply, 1)
	go func() { done <- s.handle(b, s.record(topics.Purchase, purchase("pr-1", 1, 10)), false) }()
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		select {
		case r := <-done:
			t.Fatalf("finished during the outage: %s (%s)", r.outcome(), r.detail())
		default:
		}
		// Each attempt is up to two HTTP calls (the client's own retry).
		if c := s.sim.TotalCalls(sim.EndpointAccrual); c < 12 {
			return false, fmt.Sprintf("%d accrual calls", c)
		}
		return true, ""
	})
	s.sim.SetFaults(sim.Faults{})
	select {
	case r := <-done:
		if r.outcome() != "APPLIED" || s.sim.Effects("pr-1") != 1 {
			t.Fatalf("%s (%s)", r.outcome(), r.detail())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("record never finished")
	}
}
