package bridge_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// withLedger gives the stack a transaction ledger on topic group.ledger:
// the ledger, and the option a member's client needs to produce its
// settled entries.
func (s *stack) withLedger(group string) (*ledger.Ledger, kgo.Opt) {
	s.t.Helper()
	topic := group + ".ledger"
	part := kgo.RecordPartitioner(ledger.Partitioner(topic))
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), part)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := ledger.Ensure(ctx, cl, topic, topics.Inputs(), ledger.DefaultWindow, 1); err != nil {
		s.t.Fatal(err)
	}
	l, err := ledger.New(ledger.Options{Client: cl, ReaderOpts: []kgo.Opt{kgo.SeedBrokers(s.brokers...)}, Topic: topic, Logger: s.log})
	if err != nil {
		s.t.Fatal(err)
	}
	return l, part
}

// A producer's retry writes one event twice, at a later offset: against a
// partner that applies a repeated transactionId again, the second copy of
// an accrual, a redemption and a refund is answered ALREADY_APPLIED from
// the ledger, with no partner call (finding 3 of issue 29: 200 points for
// one 100-point purchase, a 30-point refund clawed back twice).
func TestLedgerAnswersDuplicateEvents(t *testing.T) {
	s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: sim.DuplicateApply, InitialBalance: 1000}})
	l, part := s.withLedger("dup")
	b := s.bridge(func(o *bridge.Options) { o.Ledger = l })
	out := s.follow()
	s.start(memberOpts{bridge: b, group: "dup", clientOpts: []kgo.Opt{part}})
	p := s.producer()
	pt, rt := topics.Purchase, topics.RefundRedemption
	purchases := []string{"p-1", "p-2", "p-3"}
	for _, id := range purchases {
		p.send(pt, sim.MemberID(1), purchase(id, 1, 100_000))
	}
	p.send(rt, sim.MemberID(1), redemption("r-1", 1, 30))
	p.send(pt, sim.MemberID(1), purchase("p-4", 1, 100_000)) // between the copies
	for _, id := range purchases {
		p.send(pt, sim.MemberID(1), purchase(id, 1, 100_000))
	}
	p.send(rt, sim.MemberID(1), redemption("r-1", 1, 30))
	p.flush()
	waitReplies(t, out, 2, append(purchases, "r-1"))
	refund := &events.PurchaseRefunded{TransactionID: "f-1", OriginalTransactionID: "p-1", LoyaltyID: sim.MemberID(1),
		RefundAmount: 30_000, RefundDate: time.Now()}
	p.send(rt, sim.MemberID(1), refund)
	p.send(rt, sim.MemberID(1), refund)
	p.flush()
	waitReplies(t, out, 2, []string{"f-1"})

	for _, id := range append(purchases, "r-1", bridge.ClawbackID("p-1", 1)) {
		if n := s.sim.Effects(id); n != 1 {
			t.Errorf("%s applied %d times, want 1", id, n)
		}
	}
	if n := s.sim.Effects(bridge.ClawbackID("p-1", 2)); n != 0 {
		t.Errorf("refund f-1 clawed back a second time, in slot 2 (%d effects)", n)
	}
	for _, id := range append(purchases, "r-1", "f-1") {
		rs := out.get(id)
		first, second := rs[0].result, rs[1].result
		if first == nil || second == nil {
			t.Fatalf("%s: replies %s, %s; want two results", id, rs[0].outcome(), rs[1].outcome())
		}
		if second.Outcome != events.OutcomeAlreadyApplied || deref(second.BitReference) != deref(first.BitReference) ||
			deref(second.Points) != deref(first.Points) {
			t.Errorf("%s: second copy %s bitReference %q points %d; want ALREADY_APPLIED with the first's %q, %d", id,
				second.Outcome, deref(second.BitReference), deref(second.Points), deref(first.BitReference), deref(first.Points))
		}
	}
	// No extra calls: one accrual per purchase, one redemption for r-1 and
	// one for the refund's clawback.
	if got := s.sim.Calls(sim.EndpointAccrual, http.StatusOK); got != len(purchases)+1 {
		t.Errorf("%d accrual calls, want %d", got, len(purchases)+1)
	}
	if got := s.sim.Calls(sim.EndpointRedemption, http.StatusOK); got != 2 {
		t.Errorf("%d redemption calls, want 2", got)
	}
}

// Offsets are not the ledger: a group deleted (as after its offsets
// expired, or `offsets reset` to the start) redoes every record, and
// every one is answered from the ledger, none written again (finding 2 of
// issue 29: 63 of 63 redone unguarded after DeleteGroups).
func TestLedgerSurvivesLostOffsets(t *testing.T) {
	s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: sim.DuplicateApply}})
	l, part := s.withLedger("reset")
	out := s.follow()
	m := s.start(memberOpts{bridge: s.bridge(func(o *bridge.Options) { o.Ledger = l }), group: "reset", clientOpts: []kgo.Opt{part}})
	p := s.producer()
	var ids []string
	for i := range 40 {
		id := fmt.Sprintf("p-%d", i)
		ids = append(ids, id)
		p.send(topics.Purchase, sim.MemberID(1+i%7), purchase(id, 1+i%7, 10_000))
	}
	p.flush()
	waitReplies(t, out, 1, ids)
	m.halt(t)

	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.DeleteGroups(ctx, "reset")
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete group: %v", err)
	}
	// A new process: nothing in memory, the ledger read back from Kafka.
	l2, part2 := s.withLedger("reset")
	s.start(memberOpts{bridge: s.bridge(func(o *bridge.Options) { o.Ledger = l2 }), group: "reset", clientOpts: []kgo.Opt{part2}})
	waitReplies(t, out, 2, ids)
	for _, id := range ids {
		if n := s.sim.Effects(id); n != 1 {
			t.Errorf("%s applied %d times, want 1", id, n)
		}
		if rs := out.get(id); rs[1].outcome() != string(events.OutcomeAlreadyApplied) {
			t.Errorf("%s redone: %s, want ALREADY_APPLIED", id, rs[1].outcome())
		}
	}
	if got := s.sim.Calls(sim.EndpointAccrual, http.StatusOK); got != len(ids) {
		t.Errorf("%d accrual calls, want %d: the redone records were written again", got, len(ids))
	}
}

// waitReplies waits until each id has at least n replies.
func waitReplies(t *testing.T, out *outputs, n int, ids []string) {
	t.Helper()
	waitFor(t, 60*time.Second, func() string {
		for _, id := range ids {
			if got := len(out.get(id)); got < n {
				return fmt.Sprintf("%s has %d replies, want %d", id, got, n)
			}
		}
		return ""
	})
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
