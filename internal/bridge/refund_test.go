package bridge_test

// Refunds against the simulator over HTTP: whatever the order, concurrency,
// replays and the partner's duplicate policy, the clawbacks of one purchase
// never take more than it earned. The simulator's balances are the judge:
// a member touched by nothing else has InitialBalance + earned − clawed.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

var refundBase = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

func refundOf(id, original string, member int, amount float64, at time.Time) *events.PurchaseRefunded {
	return &events.PurchaseRefunded{TransactionID: id, OriginalTransactionID: original, LoyaltyID: sim.MemberID(member),
		RefundAmount: amount, RefundDate: at}
}

// clawed is what the member lost to clawbacks, given what it earned; the
// member must have had no other transaction.
func (s *stack) clawed(member int, earned int64) int64 {
	s.t.Helper()
	m, ok := s.sim.Member(sim.MemberID(member))
	if !ok {
		s.t.Fatalf("member %d unknown", member)
	}
	return sim.DefaultInitialBalance + earned - int64(m.Balance)
}

// points is a refund result's clawed-back points (usedPoint and points
// must agree), or -1 for anything else.
func (r reply) points() int64 {
	if r.result == nil || r.result.Points == nil || r.result.UsedPoint == nil || *r.result.Points != *r.result.UsedPoint {
		return -1
	}
	return *r.result.Points
}

func (r reply) clawback() string {
	if r.result == nil || r.result.ClawbackTransactionID == nil {
		return ""
	}
	return *r.result.ClawbackTransactionID
}

var policies = []sim.DuplicatePolicy{sim.DuplicateReject, sim.DuplicateReturnOriginal, sim.DuplicateApply}

func TestPartialRefunds(t *testing.T) {
	for _, policy := range policies {
		t.Run(policy.String(), func(t *testing.T) {
			s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: policy}})
			b := s.bridge(nil)
			pt, rt := topics.Purchase, topics.RefundRedemption
			if r := s.handle(b, s.record(pt, purchase("pr-1", 3, 100_000)), false); r.outcome() != "APPLIED" {
				t.Fatalf("purchase: %s (%s)", r.outcome(), r.detail())
			}

			// 50% + 30% + 40% + 10% of the purchase: the third is capped at
			// the 20 points left, the fourth finds nothing left.
			steps := []struct {
				ev        *events.PurchaseRefunded
				outcome   string
				points    int64
				requested int64
				clawback  string
			}{
				{refundOf("rf-1", "pr-1", 3, 50_000, refundBase), "APPLIED", 50, 50, bridge.ClawbackID("pr-1", 1)},
				{refundOf("rf-2", "pr-1", 3, 30_000, refundBase.Add(time.Minute)), "APPLIED", 30, 30, bridge.ClawbackID("pr-1", 2)},
				{refundOf("rf-3", "pr-1", 3, 40_000, refundBase.Add(2*time.Minute)), "APPLIED", 20, 40, bridge.ClawbackID("pr-1", 3)},
				{refundOf("rf-4", "pr-1", 3, 10_000, refundBase.Add(3*time.Minute)), "NO_OP", 0, 10, ""},
			}
			check := func(when string, r reply, outcome string, points, requested int64, clawback string) {
				t.Helper()
				if r.outcome() != outcome || r.points() != points || r.result.RequestedPoints == nil ||
					*r.result.RequestedPoints != requested || r.clawback() != clawback || string(r.rec.Key) != r.result.TransactionID {
					t.Errorf("%s %s: %s points %d clawback %q %+v (%s), want %s %d of %d at %q", when, r.rec.Key, r.outcome(), r.points(),
						r.clawback(), r.result, r.detail(), outcome, points, requested, clawback)
				}
			}
			for _, st := range steps {
				check("live", s.handle(b, s.record(rt, st.ev), false), st.outcome, st.points, st.requested, st.clawback)
			}
			if got := s.clawed(3, 100); got != 100 {
				t.Errorf("clawed back %d of 100 earned", got)
			}

			// Replayed, and fresh after a new owner took the partition:
			// each finds its own clawback, nothing is written.
			writes := s.sim.TotalCalls(sim.EndpointRedemption)
			replay := s.bridge(func(o *bridge.Options) { o.Replay = true })
			for _, st := range steps {
				outcome := "ALREADY_APPLIED"
				if st.outcome == "NO_OP" {
					outcome = "NO_OP"
				}
				check("replayed", s.handle(replay, s.record(rt, st.ev), false), outcome, st.points, st.requested, st.clawback)
				check("fresh", s.handle(b, s.record(rt, st.ev), true), outcome, st.points, st.requested, st.clawback)
			}
			if got := s.sim.TotalCalls(sim.EndpointRedemption); got != writes {
				t.Errorf("replayed refunds wrote %d clawbacks", got-writes)
			}

			// Two refunds of equal amounts on different dates are two
			// clawbacks; replayed, neither claws back again.
			s.handle(b, s.record(pt, purchase("pr-2", 4, 100_000)), false)
			twins := []*events.PurchaseRefunded{refundOf("tw-1", "pr-2", 4, 30_000, refundBase), refundOf("tw-2", "pr-2", 4, 30_000, refundBase.Add(time.Minute))}
			for i, ev := range twins {
				check("twin", s.handle(b, s.record(rt, ev), false), "APPLIED", 30, 30, bridge.ClawbackID("pr-2", i+1))
			}
			for _, ev := range twins {
				if r := s.handle(replay, s.record(rt, ev), false); r.outcome() != "ALREADY_APPLIED" || r.points() != 30 {
					t.Errorf("replayed twin %s: %s %d", ev.TransactionID, r.outcome(), r.points())
				}
			}
			if got := s.clawed(4, 100); got != 60 {
				t.Errorf("twins clawed back %d, want 60", got)
			}

			// Applied, then answered 500: the retry finds its own slot.
			s.handle(b, s.record(pt, purchase("pr-3", 5, 100_000)), false)
			s.sim.SetFaults(sim.Faults{ApplyThen500Rate: 1, Endpoints: []string{sim.EndpointRedemption}})
			r := s.handle(b, s.record(rt, refundOf("am-1", "pr-3", 5, 40_000, refundBase)), false)
			s.sim.SetFaults(sim.Faults{})
			check("ambiguous", r, "ALREADY_APPLIED", 40, 40, bridge.ClawbackID("pr-3", 1))
			if r.result != nil && r.result.Attempts != 2 {
				t.Errorf("ambiguous: %d attempts", r.result.Attempts)
			}
			if got := s.clawed(5, 100); got != 40 {
				t.Errorf("ambiguous clawback took %d, want 40", got)
			}

			if over := s.sim.EffectsOver(1); len(over) > 0 {
				t.Errorf("transactions applied more than once: %v", over)
			}
		})
	}
}

// concurrentRefunds sends n refunds of one 100-point purchase of member,
// asking for far more than it earned, through the bridges at once (each
// bridge stands for a process), and checks that the clawbacks took exactly
// what was earned and that the results say so.
func concurrentRefunds(t *testing.T, s *stack, bridges []*bridge.Bridge, member, n int) {
	t.Helper()
	orig := fmt.Sprintf("pc-%d", member)
	if r := s.handle(bridges[0], s.record(topics.Purchase, purchase(orig, member, 100_000)), false); r.outcome() != "APPLIED" {
		t.Fatalf("purchase: %s", r.outcome())
	}
	outs := make([]*kgo.Record, n)
	var wg sync.WaitGroup
	for i := range n {
		ev := refundOf(fmt.Sprintf("%s-r%d", orig, i), orig, member, float64(10_000+5_000*(i%3)), refundBase.Add(time.Duration(i)*time.Second))
		rec := s.record(topics.RefundRedemption, ev)
		b := bridges[i%len(bridges)]
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := b.Handle(ctx, rec, pipeline.Meta{})
			if err != nil || len(out) != 1 {
				t.Errorf("%s: %d outputs, %v", ev.TransactionID, len(out), err)
				return
			}
			outs[i] = out[0]
		})
	}
	wg.Wait()
	var reported int64
	for _, o := range outs {
		if o == nil {
			continue
		}
		r := s.decode(o)
		switch p := r.points(); {
		case p < 0 || r.outcome() != "APPLIED" && r.outcome() != "NO_OP":
			t.Errorf("%s: %s %+v (%s)", r.rec.Key, r.outcome(), r.result, r.detail())
		default:
			reported += p
		}
	}
	if got := s.clawed(member, 100); got != 100 || reported != 100 {
		t.Errorf("%d refunds asking for ~%d points of 100 earned: clawed back %d, results report %d", n, n*15, got, reported)
	}
}

// Many partial refunds of one purchase at once (unordered mode, other keys,
// several partitions of one process): the original's lane serialises them,
// so the cap holds whatever the partner does with a repeated id.
func TestConcurrentPartialRefunds(t *testing.T) {
	for _, policy := range policies {
		t.Run(policy.String(), func(t *testing.T) {
			s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: policy}})
			concurrentRefunds(t, s, []*bridge.Bridge{s.bridge(nil)}, 6, 24)
			if over := s.sim.EffectsOver(1); len(over) > 0 {
				t.Errorf("transactions applied more than once: %v", over)
			}
		})
	}
}

// Three processes claiming slots of one original at once: the partner's
// duplicate rejection settles each contested slot, and the loser moves on
// (the assumption the package doc states for refunds of one original in
// several processes at once).
func TestConcurrentPartialRefundsAcrossProcesses(t *testing.T) {
	s := newStack(t, stackOpts{})
	concurrentRefunds(t, s, []*bridge.Bridge{s.bridge(nil), s.bridge(nil), s.bridge(nil)}, 7, 24)
}

// Over kfake: refunds keyed by their own ids (spread over partitions) in
// unordered mode, with every refund handled a second time, guarded, beside
// the live pipeline (as a replay would): in the same process against a
// partner that applies a repeated transactionId again, and in another
// process against a partner that rejects it.
func TestRefundsThroughThePipeline(t *testing.T) {
	for _, tc := range []struct {
		policy       sim.DuplicatePolicy
		ownProcess   bool // the replay runs in a bridge of its own
		originals, n int
	}{
		{sim.DuplicateApply, false, 3, 12},
		{sim.DuplicateReject, true, 3, 12},
	} {
		t.Run(fmt.Sprintf("%s/replay-own-process=%v", tc.policy, tc.ownProcess), func(t *testing.T) {
			s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: tc.policy}})
			live := s.bridge(nil)
			replay := live
			if tc.ownProcess {
				replay = s.bridge(func(o *bridge.Options) { o.Replay = true })
			}
			out := s.follow()
			p := s.producer()
			var buys, refunds []string
			var recs []*events.PurchaseRefunded
			for o := range tc.originals {
				buy := purchase(fmt.Sprintf("pp-%d", o), 10+o, 100_000)
				p.send(topics.Purchase, buy.LoyaltyID, buy)
				buys = append(buys, buy.TransactionID)
			}
			p.flush()
			s.start(memberOpts{bridge: live, maxInFlight: 16, mode: ordering.Unordered})
			out.waitAll(t, buys, time.Minute)
			rnd := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
			for i := range tc.originals * tc.n {
				o := i % tc.originals
				ev := refundOf(fmt.Sprintf("pp-%d-r%d", o, i), fmt.Sprintf("pp-%d", o), 10+o, float64(10_000+5_000*rnd.IntN(3)),
					refundBase.Add(time.Duration(i)*time.Second))
				p.send(topics.RefundRedemption, ev.LoyaltyID, ev)
				refunds, recs = append(refunds, ev.TransactionID), append(recs, ev)
			}
			p.flush()
			// The replay, beside the live pipeline: the same refunds,
			// guarded, through the same or another bridge.
			var wg sync.WaitGroup
			for _, ev := range recs {
				rec := s.record(topics.RefundRedemption, ev)
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					if _, err := replay.Handle(ctx, rec, pipeline.Meta{Fresh: true}); err != nil {
						t.Errorf("replay %s: %v", ev.TransactionID, err)
					}
				})
			}
			wg.Wait()
			out.waitAll(t, refunds, time.Minute)
			for o := range tc.originals {
				if got := s.clawed(10+o, 100); got != 100 {
					t.Errorf("original pp-%d: clawed back %d of 100 earned", o, got)
				}
			}
			var reported int64
			for _, id := range refunds {
				rs := out.get(id)
				if len(rs) != 1 || rs[0].points() < 0 {
					t.Errorf("%s: %d replies, first %s (%s)", id, len(rs), rs[0].outcome(), rs[0].detail())
					continue
				}
				reported += rs[0].points()
			}
			if want := int64(100 * tc.originals); reported > want {
				t.Errorf("live results report %d points clawed back, more than the %d earned", reported, want)
			}
			if over := s.sim.EffectsOver(1); len(over) > 0 {
				t.Errorf("transactions applied more than once: %v", over)
			}
		})
	}
}

// Outside the guarantee: two processes refund one original at the same
// moment against a partner that applies a repeated transactionId again.
// Both find the first slot free (the front below lets neither write it
// until both have looked), both write it, and the partner applies both:
// the original loses more than it earned, and nothing the partner offers
// could have settled it. What is asserted is that it does not go
// unnoticed: the verifying lookup of the writer that sees the other's
// bitReference logs an error naming the original.
func TestRefundRaceAcrossProcessesIsNamed(t *testing.T) {
	s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: sim.DuplicateApply}})
	const member, orig = 7, "race-p"
	slot := bridge.ClawbackID(orig, 1)
	c := s.lookedUpTogether(t, slot)
	bs := []*bridge.Bridge{s.bridge(func(o *bridge.Options) { o.Client = c }), s.bridge(func(o *bridge.Options) { o.Client = c })}
	if r := s.handle(bs[0], s.record(topics.Purchase, purchase(orig, member, 100_000)), false); r.outcome() != "APPLIED" {
		t.Fatalf("purchase: %s (%s)", r.outcome(), r.detail())
	}
	var wg sync.WaitGroup
	replies := make([]reply, len(bs))
	for i, b := range bs {
		rec := s.record(topics.RefundRedemption, refundOf(fmt.Sprintf("race-r%d", i), orig, member, 60_000, refundBase.Add(time.Duration(i)*time.Second)))
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := b.Handle(ctx, rec, pipeline.Meta{})
			if err != nil || len(out) != 1 {
				t.Errorf("refund %d: %d outputs, %v", i, len(out), err)
				return
			}
			replies[i] = s.decode(out[0])
		})
	}
	wg.Wait()
	for i, r := range replies {
		if r.rec != nil && (r.outcome() != "APPLIED" || r.clawback() != slot || r.points() != 60) {
			t.Errorf("refund %d: %s points %d clawback %q (%s), want APPLIED 60 in %s", i, r.outcome(), r.points(), r.clawback(), r.detail(), slot)
		}
	}
	if e := s.sim.Effects(slot); e != 2 {
		t.Fatalf("slot %s applied %d times, want 2: the race did not happen", slot, e)
	}
	if got := s.clawed(member, 100); got != 120 {
		t.Errorf("clawed back %d of 100 earned, want 120 (both writes applied)", got)
	}
	named := 0
	for line := range strings.Lines(s.logs.String()) {
		if strings.Contains(line, `"level":"error"`) && strings.Contains(line, "written twice") && strings.Contains(line, `"original":"`+orig+`"`) {
			named++
		}
	}
	if named != 1 {
		t.Errorf("%d error lines name the over-clawed original, want 1", named)
	}
}

// lookedUpTogether is a loyalty client for the stack's partner whose
// writes of transactionId tx wait until tx has been looked up twice (at
// most 10 s): two processes that each look a slot up before writing it
// both find it free.
func (s *stack) lookedUpTogether(t *testing.T, tx string) *loyalty.Client {
	t.Helper()
	both := make(chan struct{})
	var lookups atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		ours := bytes.Contains(body, []byte(`"transactionId":"`+tx+`"`))
		if ours && strings.Contains(r.URL.Path, "redemption") {
			select {
			case <-both:
			case <-time.After(10 * time.Second):
			case <-r.Context().Done():
				return
			}
		}
		s.sim.ServeHTTP(w, r)
		if ours && strings.HasSuffix(r.URL.Path, "/lookup-transaction-id") && lookups.Add(1) == 2 {
			close(both)
		}
	}))
	hc, err := loyalty.NewHTTPClient(loyalty.TransportOptions{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hc.CloseIdleConnections() })
	t.Cleanup(srv.Close)
	c, err := loyalty.New(loyalty.Options{BaseURL: srv.URL, HTTPClient: hc, Timeout: 15 * time.Second, Logger: s.log, Tokens: s.tokens,
		Profile: s.profile, Retry: loyalty.RetryPolicy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A member killed while refunds are in flight, with nothing committed (as
// after kill -9): its successor sees every refund again, guards the ones
// the dead member may have sent, finds their clawbacks in the slots, and
// claws back nothing twice. Every answer of one refund says the same.
func TestRefundsAfterACrash(t *testing.T) {
	for _, policy := range []sim.DuplicatePolicy{sim.DuplicateReject, sim.DuplicateApply} {
		t.Run(policy.String(), func(t *testing.T) {
			s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: policy, Members: 100}})
			out := s.follow()
			p := s.producer()
			const originals = 20
			var buys []string
			for o := range originals {
				buy := purchase(fmt.Sprintf("cp-%d", o), 40+o, 100_000)
				p.send(topics.Purchase, buy.LoyaltyID, buy)
				buys = append(buys, buy.TransactionID)
			}
			p.flush()
			var refuse atomic.Bool
			refuse.Store(true)
			s.freezeCommits(&refuse)
			a := s.start(memberOpts{bridge: s.bridge(nil), drain: time.Millisecond})
			out.waitAll(t, buys, time.Minute)
			// 50% + 30% + 40% + 10% of each purchase, in order by key.
			s.sim.SetFaults(sim.Faults{ApplyThen500Rate: 0.2, Latency: 10 * time.Millisecond, Endpoints: []string{sim.EndpointRedemption}})
			var refunds []string
			for i, share := range []float64{0.5, 0.3, 0.4, 0.1} {
				for o := range originals {
					ev := refundOf(fmt.Sprintf("cp-%d-r%d", o, i), fmt.Sprintf("cp-%d", o), 40+o, 100_000*share, refundBase.Add(time.Duration(i)*time.Minute))
					p.send(topics.RefundRedemption, ev.LoyaltyID, ev)
					refunds = append(refunds, ev.TransactionID)
				}
			}
			p.flush()
			testkit.Eventually(t, time.Minute, func() (bool, string) {
				if c := out.count(); c < len(buys)+len(refunds)/4 {
					return false, fmt.Sprintf("%d outputs", c)
				}
				return true, ""
			})
			a.halt(t)
			refuse.Store(false)
			answered := 0
			for _, id := range refunds {
				answered += min(len(out.get(id)), 1)
			}
			s.start(memberOpts{bridge: s.bridge(nil)})
			out.waitAll(t, refunds, 2*time.Minute)
			s.sim.SetFaults(sim.Faults{})
			for o := range originals {
				if got := s.clawed(40+o, 100); got != 100 {
					t.Errorf("cp-%d: clawed back %d of 100", o, got)
				}
			}
			again, already := 0, 0
			for _, id := range refunds {
				rs := out.get(id)
				again += len(rs) - 1
				for _, r := range rs {
					if r.outcome() == "ALREADY_APPLIED" {
						already++
					}
					if r.points() < 0 || r.points() != rs[0].points() || r.clawback() != rs[0].clawback() {
						t.Errorf("%s: answers disagree: %s %d %q, first %s %d %q (%s)", id, r.outcome(), r.points(), r.clawback(),
							rs[0].outcome(), rs[0].points(), rs[0].clawback(), r.detail())
					}
				}
			}
			if over := s.sim.EffectsOver(1); len(over) > 0 {
				t.Errorf("transactions applied more than once: %v", over)
			}
			if again < answered {
				t.Errorf("only %d of the %d refunds answered before the crash were answered again", again, answered)
			}
			t.Logf("%d refunds, %d answered at the crash, %d answered again, %d ALREADY_APPLIED answers", len(refunds), answered, again, already)
		})
	}
}

// A partner whose transactionTime is its own processing time, not the
// transactionDate sent (the spec does not say it echoes it): refunds read
// nothing of it. Whether a refund looks for its own clawback is the guard
// flag's to say: equal refunds dated now and handled for the first time
// within the same second are two clawbacks, not one taken for the other's
// copy; replayed or fresh, each finds a slot it may have written and
// writes nothing.
func TestRefundsAgainstAPartnerStampingProcessingTime(t *testing.T) {
	s := newStack(t, stackOpts{sim: sim.Options{StampProcessingTime: true}})
	b := s.bridge(nil)
	pt, rt := topics.Purchase, topics.RefundRedemption
	if r := s.handle(b, s.record(pt, purchase("st-1", 6, 100_000)), false); r.outcome() != "APPLIED" {
		t.Fatalf("purchase: %s (%s)", r.outcome(), r.detail())
	}
	now := time.Now()
	refunds := []*events.PurchaseRefunded{refundOf("st-r1", "st-1", 6, 30_000, now), refundOf("st-r2", "st-1", 6, 30_000, now),
		refundOf("st-r3", "st-1", 6, 10_000, refundBase)}
	want := []int64{30, 30, 10}
	for i, ev := range refunds {
		r := s.handle(b, s.record(rt, ev), false)
		if r.outcome() != "APPLIED" || r.points() != want[i] || r.clawback() != bridge.ClawbackID("st-1", i+1) {
			t.Errorf("%s: %s %d at %q (%s), want APPLIED %d at %s", ev.TransactionID, r.outcome(), r.points(), r.clawback(), r.detail(),
				want[i], bridge.ClawbackID("st-1", i+1))
		}
	}
	// The simulator does stamp its own time: the slot of a refund dated
	// a day ago says now.
	tx, _, err := s.client.LookupTransaction(context.Background(), loyalty.LookupRequest{LoyaltyID: sim.MemberID(6), TransactionID: bridge.ClawbackID("st-1", 3)})
	if err != nil {
		t.Fatal(err)
	}
	if at, err := time.Parse(time.RFC3339Nano, tx.TransactionTime); err != nil || at.Sub(refundBase).Abs() < time.Hour {
		t.Fatalf("transactionTime %q echoes the refund date %s (%v)", tx.TransactionTime, refundBase, err)
	}
	// Handled again (replayed, fresh), each finds a slot of its amount and
	// points; the second twin finds the first's (the package doc's twins:
	// clawing back less, never more).
	writes := s.sim.TotalCalls(sim.EndpointRedemption)
	replay := s.bridge(func(o *bridge.Options) { o.Replay = true })
	for i, ev := range refunds {
		slot := bridge.ClawbackID("st-1", []int{1, 1, 3}[i])
		for _, r := range []reply{s.handle(replay, s.record(rt, ev), false), s.handle(b, s.record(rt, ev), true)} {
			if r.outcome() != "ALREADY_APPLIED" || r.points() != want[i] || r.clawback() != slot {
				t.Errorf("%s again: %s %d at %q (%s)", ev.TransactionID, r.outcome(), r.points(), r.clawback(), r.detail())
			}
		}
	}
	if got := s.sim.TotalCalls(sim.EndpointRedemption) - writes; got != 0 {
		t.Errorf("refunds handled again wrote %d clawbacks", got)
	}
	if got := s.clawed(6, 100); got != 70 {
		t.Errorf("clawed back %d, want 70", got)
	}
}
