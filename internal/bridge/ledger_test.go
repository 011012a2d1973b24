package bridge_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// withLedger gives the stack a transaction ledger on topic group.ledger:
// the ledger, and the option a member's client needs to produce its
// settled entries.
func (s *stack) withLedger(group string) (*ledger.Ledger, kgo.Opt) {
	s.t.Helper()
	return s.withLedgerClock(group, nil)
}

// withLedgerClock is withLedger with the ledger's clock.
func (s *stack) withLedgerClock(group string, now func() time.Time) (*ledger.Ledger, kgo.Opt) {
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
	l, err := ledger.New(ledger.Options{Client: cl, ReaderOpts: []kgo.Opt{kgo.SeedBrokers(s.brokers...)}, Topic: topic, Logger: s.log, Now: now})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = l.Close() })
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
		// By the copies' positions, not the replies' order: a record's
		// reply may be produced after the next record's (key order holds
		// the records' handling, not their replies').
		if second.Source.Offset < first.Source.Offset {
			first, second = second, first
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
	testkit.Eventually(t, 60*time.Second, func() (bool, string) {
		for _, id := range ids {
			if got := len(out.get(id)); got < n {
				return false, fmt.Sprintf("%s has %d replies, want %d", id, got, n)
			}
		}
		return true, ""
	})
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Three refunds of one purchase, 30 points each: the third is handled as a
// new owner handles a record a crashed one may have sent (Fresh). Its
// ledger has no intent for it, and the ledger speaks for the partition,
// so it was never sent: it claws back in the next slot instead of taking
// an equal twin's slot for its own (finding 5 of issue 29: three 30-point
// refunds clawed back 30 in all). A refund the ledger saw sent knows its
// own slot exactly, whatever its twins look like.
func TestLedgerTellsTwinRefundsApart(t *testing.T) {
	s := newStack(t, stackOpts{})
	var shift atomic.Int64 // the ledger's clock runs ahead of the wall's by this
	clock := func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	l, _ := s.withLedgerClock("twins", clock)
	b := s.bridge(func(o *bridge.Options) { o.Ledger = l })
	rt := topics.RefundRedemption
	offset := int64(0)
	handle := func(ev events.Event, topic string, fresh bool) reply {
		t.Helper()
		r := s.record(topic, ev)
		r.Partition, r.Offset, r.Timestamp = 0, offset, clock()
		offset++
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := b.Handle(ctx, r, pipeline.Meta{Fresh: fresh, Assignment: 1})
		if err != nil {
			t.Fatal(err)
		}
		// Its reply, and its ledger entry unless the ledger answered it.
		if len(out) < 1 || len(out) > 2 || (len(out) == 2 && out[1].Topic != l.Topic()) {
			t.Fatalf("%s: %d outputs, want its reply and at most its ledger entry", ev.ID(), len(out))
		}
		return s.decode(out[0])
	}
	refund := func(id string) *events.PurchaseRefunded {
		return &events.PurchaseRefunded{TransactionID: id, OriginalTransactionID: "p-1", LoyaltyID: sim.MemberID(1),
			RefundAmount: 30_000, RefundDate: time.Now()}
	}
	if r := handle(purchase("p-1", 1, 100_000), topics.Purchase, false); r.outcome() != string(events.OutcomeApplied) {
		t.Fatalf("purchase: %s", r.outcome())
	}
	for i, id := range []string{"f-1", "f-2"} {
		if r := handle(refund(id), rt, false); r.result == nil || deref(r.result.ClawbackTransactionID) != bridge.ClawbackID("p-1", i+1) {
			t.Fatalf("%s: %s, clawback %q", id, r.outcome(), deref(r.result.ClawbackTransactionID))
		}
	}
	// Later than the rollout margin after the partition's first entry.
	shift.Store(int64(2 * time.Hour))
	r := handle(refund("f-3"), rt, true)
	if r.result == nil || r.result.Outcome != events.OutcomeApplied || deref(r.result.ClawbackTransactionID) != bridge.ClawbackID("p-1", 3) {
		t.Fatalf("f-3 handled Fresh: %s clawback %q; want APPLIED in slot 3, not a twin's slot", r.outcome(), deref(r.result.ClawbackTransactionID))
	}
	// f-2 again (a replay, a redone record): the ledger names its slot.
	r = handle(refund("f-2"), rt, true)
	if r.result == nil || r.result.Outcome != events.OutcomeAlreadyApplied || deref(r.result.ClawbackTransactionID) != bridge.ClawbackID("p-1", 2) {
		t.Fatalf("f-2 again: %s clawback %q; want ALREADY_APPLIED naming slot 2", r.outcome(), deref(r.result.ClawbackTransactionID))
	}
	for k := 1; k <= 3; k++ {
		if n := s.sim.Effects(bridge.ClawbackID("p-1", k)); n != 1 {
			t.Errorf("slot %d applied %d times, want 1", k, n)
		}
	}
}

// Two refunds of one purchase, 30 points each, in one process with a
// ledger: the second's clawback write is answered 504 and applied 300 ms
// later. Its retry waits for the apply window and finds both slots
// filled, the first with an equal twin's clawback. The intent it made
// names slot 2, so slot 2 is its own: ALREADY_APPLIED naming slot 2, not
// the twin's slot 1, which matches it by amount and points.
func TestLedgerLateClawbackKnowsItsSlot(t *testing.T) {
	s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: sim.DuplicateApply},
		profile: partnerprofile.Profile{ApplyWindow: 600 * time.Millisecond}})
	l, _ := s.withLedger("late-twin")
	b := s.bridge(func(o *bridge.Options) { o.Ledger = l })
	offset := int64(0)
	handle := func(topic string, ev events.Event) reply {
		t.Helper()
		r := s.record(topic, ev)
		r.Partition, r.Offset, r.Timestamp = 0, offset, time.Now()
		offset++
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := b.Handle(ctx, r, pipeline.Meta{Assignment: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 {
			t.Fatalf("%s: no outputs", ev.ID())
		}
		return s.decode(out[0])
	}
	rt := topics.RefundRedemption
	if r := handle(topics.Purchase, purchase("lt-pur", 5, 100_000)); r.outcome() != string(events.OutcomeApplied) {
		t.Fatalf("purchase: %s %s", r.outcome(), r.detail())
	}
	if r := handle(rt, refundOf("lt-1", "lt-pur", 5, 30_000, refundBase)); r.clawback() != bridge.ClawbackID("lt-pur", 1) {
		t.Fatalf("first refund: %s into %q (%s)", r.outcome(), r.clawback(), r.detail())
	}
	done := s.lateOnce(sim.EndpointRedemption, 300*time.Millisecond)
	r := handle(rt, refundOf("lt-2", "lt-pur", 5, 30_000, refundBase.Add(time.Minute)))
	if !done() {
		t.Fatal("the second clawback's late write never came")
	}
	if r.outcome() != string(events.OutcomeAlreadyApplied) || r.clawback() != bridge.ClawbackID("lt-pur", 2) {
		t.Errorf("second refund: %s into %q (%s), want ALREADY_APPLIED naming slot 2, its intent's", r.outcome(), r.clawback(), r.detail())
	}
	s.sim.FlushLateApplies()
	for k := 1; k <= 2; k++ {
		if got := s.sim.Effects(bridge.ClawbackID("lt-pur", k)); got != 1 {
			t.Errorf("slot %d: %d effects, want 1", k, got)
		}
	}
}

// Duplicated input at volume: a tenth of the purchases sent twice by their
// producer, the second copy at a later offset and stamped hours after the
// first, both members' worth of work through the pipeline against a
// partner that applies repeats: no second effect and no extra partner
// call. BRIDGE_TEST_SCALE=10 runs the 50,000.
func TestLedgerDuplicatedInputAtVolume(t *testing.T) {
	n := scale(5000)
	s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: sim.DuplicateApply, Members: 200}, partitions: 8})
	l, part := s.withLedger("volume")
	out := s.follow()
	s.start(memberOpts{bridge: s.bridge(func(o *bridge.Options) { o.Ledger = l }), group: "volume",
		maxInFlight: 128, clientOpts: []kgo.Opt{part}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	first := time.Now().Add(-3 * time.Hour)
	send := func(i int, ts time.Time) {
		id := fmt.Sprintf("v-%d", i)
		ev := purchase(id, 1+i%200, 10_000)
		v, err := s.codec.Encode(topics.Purchase, ev)
		if err != nil {
			t.Fatal(err)
		}
		cl.Produce(ctx, &kgo.Record{Topic: topics.Purchase, Key: []byte(ev.LoyaltyID), Value: v, Timestamp: ts}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %s: %v", id, err)
			}
		})
	}
	for i := range n {
		send(i, first)
	}
	for i := 9; i < n; i += 10 { // a tenth sent again, further on, hours later
		send(i, time.Now())
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Minute, func() (bool, string) {
		if got, want := out.count(), n+n/10; got < want {
			return false, fmt.Sprintf("%d of %d replies", got, want)
		}
		return true, ""
	})
	if over := s.sim.EffectsOver(1); len(over) > 0 {
		t.Errorf("%d transactions applied more than once", len(over))
	}
	if got := s.sim.Calls(sim.EndpointAccrual, http.StatusOK); got != n {
		t.Errorf("%d accrual calls for %d purchases: %d extra", got, n, got-n)
	}
	if calls := s.sim.TotalCalls(sim.EndpointLookup); calls != 0 {
		t.Errorf("%d lookups: a settled duplicate needs none", calls)
	}
	dups := 0
	for i := 9; i < n; i += 10 {
		rs := out.get(fmt.Sprintf("v-%d", i))
		if len(rs) == 2 && rs[1].outcome() == string(events.OutcomeAlreadyApplied) {
			dups++
		}
	}
	if dups != n/10 {
		t.Errorf("%d of %d second copies answered ALREADY_APPLIED", dups, n/10)
	}
	t.Logf("%d purchases, %d sent twice: %d accrual calls, %d transactions applied more than once",
		n, n/10, s.sim.Calls(sim.EndpointAccrual, http.StatusOK), len(s.sim.EffectsOver(1)))
}

// Without parking (exactly-once mode, a replay), a refund read before its
// purchase was applied looks again for OriginalGrace: the purchase, often
// in the same round, lands meanwhile and the refund claws back.
func TestUnparkedRefundWaitsForItsPurchase(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(func(o *bridge.Options) { o.OriginalGrace = 30 * time.Second })
	refund := &events.PurchaseRefunded{TransactionID: "f-1", OriginalTransactionID: "p-1", LoyaltyID: sim.MemberID(1),
		RefundAmount: 30_000, RefundDate: time.Now()}
	done := make(chan reply, 1)
	go func() { done <- s.handle(b, s.record(topics.RefundRedemption, refund), false) }()
	// Three lookups: it kept looking after a back-off, not only once
	// (a refund that gave up after its first wait passed with the
	// purchase landing inside that wait).
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		if n := s.sim.TotalCalls(sim.EndpointLookup); n < 3 {
			return false, fmt.Sprintf("the refund looked its purchase up %d times, want 3 before the purchase lands", n)
		}
		return true, ""
	})
	if r := s.handle(b, s.record(topics.Purchase, purchase("p-1", 1, 100_000)), false); r.outcome() != string(events.OutcomeApplied) {
		t.Fatalf("purchase: %s", r.outcome())
	}
	select {
	case r := <-done:
		if r.result == nil || r.result.Outcome != events.OutcomeApplied || r.result.Attempts != 1 {
			t.Fatalf("refund: %s (%s), want APPLIED in one attempt", r.outcome(), r.detail())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the refund did not end")
	}
}

// slowGate holds the first write it is asked about for delay, as a lease
// short of a heartbeat or a full call slot would.
type slowGate struct {
	delay time.Duration
	waits atomic.Int32
}

func (g *slowGate) Wait(ctx context.Context) error {
	if g.waits.Add(1) > 1 {
		return nil
	}
	select {
	case <-time.After(g.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *slowGate) Allowed(context.Context) bool { return true }

// A write held past ledger.SendWithin after its intent (its gate or call
// slot waited) is not sent on that intent: other processes that find the
// intent wait for its write by the intent's time plus SendWithin, a call
// and the apply window, and a later send could land after they looked. It
// is intended again, then sent: one effect, and the gate asked twice.
// Parallel: it waits out SendWithin (5 s) beside the other tests that do.
func TestWriteHeldPastItsIntentIntendsAgain(t *testing.T) {
	t.Parallel()
	gate := &slowGate{delay: ledger.SendWithin + 300*time.Millisecond}
	s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: sim.DuplicateApply}, writeGate: gate})
	l, part := s.withLedger("late")
	b := s.bridge(func(o *bridge.Options) { o.Ledger = l })
	out := s.follow()
	s.start(memberOpts{bridge: b, group: "late", clientOpts: []kgo.Opt{part}})
	p := s.producer()
	p.send(topics.Purchase, sim.MemberID(1), purchase("p-late", 1, 100_000))
	p.flush()
	waitReplies(t, out, 1, []string{"p-late"})
	if r := out.get("p-late")[0].result; r == nil || r.Outcome != events.OutcomeApplied {
		t.Fatalf("reply %s, want APPLIED", out.get("p-late")[0].outcome())
	}
	if n := s.sim.Effects("p-late"); n != 1 {
		t.Fatalf("applied %d times, want 1", n)
	}
	if n := gate.waits.Load(); n != 2 {
		t.Fatalf("the gate was asked %d times, want 2 (the late write intended again)", n)
	}
}

// A ledger that cannot be read (its topic not there yet) holds the record,
// which tries again after a back-off, each try logged, and is handled once
// the ledger answers: nothing sent before its ledger has been read.
func TestLedgerNotReadableRecordWaits(t *testing.T) {
	s := newStack(t, stackOpts{})
	const topic = "unread.ledger"
	part := kgo.RecordPartitioner(ledger.Partitioner(topic))
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), part)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	l, err := ledger.New(ledger.Options{Client: cl, ReaderOpts: []kgo.Opt{kgo.SeedBrokers(s.brokers...)}, Topic: topic, Logger: s.log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	b := s.bridge(func(o *bridge.Options) { o.Ledger = l })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type handled struct {
		out []*kgo.Record
		err error
	}
	done := make(chan handled, 1)
	go func() {
		out, err := b.Handle(ctx, s.record(topics.Purchase, purchase("lw-1", 1, 5000)), pipeline.Meta{Assignment: 1})
		done <- handled{out, err}
	}()
	// Three tries failed and logged (the back-off grows with each):
	// still waiting, nothing sent.
	testkit.Eventually(t, 20*time.Second, func() (bool, string) {
		n := strings.Count(s.logs.String(), `"try":3`)
		return n > 0 && strings.Contains(s.logs.String(), "transaction ledger not readable; record waits"), "no third try logged"
	})
	if logs := s.logs.String(); strings.Contains(logs, `"try":0`) || !strings.Contains(logs, `"try":1,`) {
		t.Errorf("tries not counted from 1 in the log lines")
	}
	select {
	case h := <-done:
		t.Fatalf("answered while its ledger could not be read: %v", h.err)
	default:
	}
	if n := s.sim.TotalCalls(sim.EndpointAccrual); n != 0 {
		t.Fatalf("%d accruals sent before the ledger was read", n)
	}
	if _, err := ledger.Ensure(ctx, cl, topic, topics.Inputs(), ledger.DefaultWindow, 1); err != nil {
		t.Fatal(err)
	}
	var h handled
	select {
	case h = <-done:
	case <-ctx.Done():
		t.Fatal("not answered once the ledger could be read")
	}
	if h.err != nil {
		t.Fatal(h.err)
	}
	if r := s.decode(h.out[0]); r.outcome() != string(events.OutcomeApplied) || s.sim.Effects("lw-1") != 1 {
		t.Fatalf("%s, %d effects; want APPLIED once", r.outcome(), s.sim.Effects("lw-1"))
	}
}

// An intent the ledger holds without an outcome (a member that died after
// intending, its write perhaps applied) guards the record, even one no
// pipeline marks Fresh: it looks up before writing, finds the write
// applied, and answers ALREADY_APPLIED with no second effect, against a
// partner that would apply a repeated transactionId again.
func TestLedgerIntentWithoutOutcomeGuards(t *testing.T) {
	s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: sim.DuplicateApply}})
	var shift atomic.Int64 // the ledger's clock runs ahead of the wall's by this
	clock := func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	l, _ := s.withLedgerClock("intent", clock)
	rec := s.record(topics.Purchase, purchase("li-1", 1, 5000))
	rec.Partition, rec.Offset, rec.Timestamp = 0, 0, time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The dead member's intent, made long enough ago that its write has
	// landed or never will, and its write, which landed.
	shift.Store(int64(-time.Minute))
	if err := l.Intend(ctx, rec, ledger.Entry{Kind: ledger.Accrual, TransactionID: "li-1"}); err != nil {
		t.Fatal(err)
	}
	shift.Store(0)
	if r := s.handle(s.bridge(nil), rec, false); r.outcome() != string(events.OutcomeApplied) {
		t.Fatalf("the dead member's write: %s", r.outcome())
	}

	b := s.bridge(func(o *bridge.Options) { o.Ledger = l })
	out, err := b.Handle(ctx, rec, pipeline.Meta{Assignment: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.decode(out[0]); r.outcome() != string(events.OutcomeAlreadyApplied) {
		t.Errorf("%s (%s), want ALREADY_APPLIED", r.outcome(), r.detail())
	}
	if n := s.sim.Effects("li-1"); n != 1 {
		t.Errorf("applied %d times, want 1", n)
	}
}

// A write whose intent is too old to send by the time it would leave (its
// gate or call slot waited past ledger.SendWithin) is not sent: the record
// intends again, at most maxLate (8) more times, then its attempt fails,
// nothing sent. The ledger's clock runs 10 s behind the partner client's,
// so every intent is late when the client looks.
func TestLateIntentIsNeverSent(t *testing.T) {
	s := newStack(t, stackOpts{})
	l, part := s.withLedgerClock("late", func() time.Time { return time.Now().Add(-10 * time.Second) })
	b := s.bridge(func(o *bridge.Options) { o.Ledger, o.RecordAttempts = l, 1 })
	out := s.follow()
	s.start(memberOpts{bridge: b, group: "late", clientOpts: []kgo.Opt{part}})
	p := s.producer()
	p.send(topics.Purchase, sim.MemberID(1), purchase("p-late", 1, 100_000))
	p.flush()
	waitReplies(t, out, 1, []string{"p-late"})
	if r := out.get("p-late")[0]; r.err == nil {
		t.Errorf("p-late answered %s, want an error event: nothing could be sent", r.outcome())
	}
	if n := s.sim.Effects("p-late"); n != 0 {
		t.Errorf("p-late applied %d times, want 0: its intents were all too old", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "late.ledger")
	if err != nil {
		t.Fatal(err)
	}
	intents := int64(0)
	ends.Each(func(o kadm.ListedOffset) { intents += o.Offset })
	if intents != 9 {
		t.Errorf("%d ledger entries, want 9: the intent and 8 more, one for each late try", intents)
	}
}
