package bridge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loyalty-bridge/loyalty-bridge/internal/circuit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
)

// The slot logic alone, over a fake partner; the guarantees over the
// simulator are in refund_test.go.
func TestClawbackSlots(t *testing.T) {
	when := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	other := when.Add(time.Hour)
	ev := &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 250, RefundDate: when}
	original := &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 100, TransactionAmount: 1000}
	slot := func(points int64, amount float64, at time.Time) *loyalty.Transaction {
		return &loyalty.Transaction{TransactionType: redemptionType, Status: appliedStatus, TransactionPoint: points, TransactionAmount: amount,
			BitReference: fmt.Sprintf("B-%d", points), TransactionTime: at.In(time.FixedZone("", 7*3600)).Format("2006-01-02T15:04:05.000-07:00")}
	}
	many := map[string]*loyalty.Transaction{}
	for k := 1; k <= MaxClawbacks; k++ {
		many[ClawbackID("T-1", k)] = slot(1, 1, other)
	}
	// All but the last: slot MaxClawbacks is still the refund's to take.
	lastFree := maps.Clone(many)
	delete(lastFree, ClawbackID("T-1", MaxClawbacks))
	for _, tc := range []struct {
		name      string
		slots     map[string]*loyalty.Transaction
		mayRepeat bool
		outcome   events.Outcome
		reason    string
		points    int64  // clawed back
		clawback  string // its id
		wrote     bool
	}{
		{"first clawback", nil, false, events.OutcomeApplied, "", 25, "T-1~cb1", true},
		{"after earlier clawbacks, capped by them", map[string]*loyalty.Transaction{"T-1~cb1": slot(60, 600, other), "T-1~cb2": slot(30, 300, other)},
			false, events.OutcomeApplied, "", 10, "T-1~cb3", true},
		{"nothing left", map[string]*loyalty.Transaction{"T-1~cb1": slot(100, 1000, other)}, false, events.OutcomeNoOp, "", 0, "", false},
		{"may repeat: its own slot", map[string]*loyalty.Transaction{"T-1~cb1": slot(60, 600, other), "T-1~cb2": slot(25, 250, other)},
			true, events.OutcomeAlreadyApplied, "", 25, "T-1~cb2", false},
		{"may repeat: its own capped slot", map[string]*loyalty.Transaction{"T-1~cb1": slot(90, 900, other), "T-1~cb2": slot(10, 250, other)},
			true, events.OutcomeAlreadyApplied, "", 10, "T-1~cb2", false},
		{"may repeat: points it could not have claimed there", map[string]*loyalty.Transaction{"T-1~cb1": slot(60, 600, other), "T-1~cb2": slot(20, 250, other)},
			true, events.OutcomeApplied, "", 20, "T-1~cb3", true},
		{"first time: a twin of another date is another refund", map[string]*loyalty.Transaction{"T-1~cb1": slot(25, 250, other)},
			false, events.OutcomeApplied, "", 25, "T-1~cb2", true},
		// A record never sent before (the guard flag unset) has no
		// clawback yet: a slot like its own, even stamped with its refund
		// date, is another refund's. transactionTime is never read.
		{"first time: same amount and date is another refund", map[string]*loyalty.Transaction{"T-1~cb1": slot(25, 250, when)},
			false, events.OutcomeApplied, "", 25, "T-1~cb2", true},
		{"may repeat: its own slot, whatever its time", map[string]*loyalty.Transaction{"T-1~cb1": slot(25, 250, when.Add(-72*time.Hour))},
			true, events.OutcomeAlreadyApplied, "", 25, "T-1~cb1", false},
		// A partner may keep amounts in whole currency units: half a unit
		// off is still the refund's amount.
		{"may repeat: its own slot, the amount half a unit off", map[string]*loyalty.Transaction{"T-1~cb1": slot(25, 250.5, other)},
			true, events.OutcomeAlreadyApplied, "", 25, "T-1~cb1", false},
		{"every slot filled", many, false, "", events.ReasonClawbackLimit, 0, "", false},
		{"every slot filled but the last", lastFree, false, events.OutcomeApplied, "", 25, ClawbackID("T-1", MaxClawbacks), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fakePartner{lookup: original, slots: tc.slots}
			if p.slots == nil {
				p.slots = map[string]*loyalty.Transaction{}
			}
			r, err := refund(context.Background(), ev, prof, p.guarded(&recordState{guard: tc.mayRepeat}))
			wrote := slices.ContainsFunc(p.calls, func(c string) bool { return c[:6] == "redeem" })
			if wrote != tc.wrote {
				t.Errorf("calls %v", p.calls)
			}
			if tc.reason != "" {
				var rf *recordFailure
				if !errors.As(err, &rf) || rf.reason != tc.reason {
					t.Fatalf("err %v, want reason %s", err, tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Outcome != tc.outcome || *r.Points != tc.points || *r.RequestedPoints != 25 || *r.UsedPoint != tc.points {
				t.Errorf("result %s points %d requested %d usedPoint %d, want %s %d", r.Outcome, *r.Points, *r.RequestedPoints, *r.UsedPoint, tc.outcome, tc.points)
			}
			if got := deref(r.ClawbackTransactionID); got != tc.clawback {
				t.Errorf("clawback %q, want %q", got, tc.clawback)
			}
			if wrote && (p.last.TransactionID != tc.clawback || p.last.UsedPoint != tc.points || p.last.TransactionAmount != 250) {
				t.Errorf("redemption %+v", p.last)
			}
		})
	}
}

// A refund of an original whose clawbacks took all it earned stops at the
// slot that filled it: NO_OP, nothing written, and no lookup beyond it (a
// refund costs the original's lookup and one per filled slot).
func TestClawbackStopsAtAFullOriginal(t *testing.T) {
	ev := &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 250,
		RefundDate: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	p := fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 100, TransactionAmount: 1000},
		slots: map[string]*loyalty.Transaction{
			"T-1~cb1": {TransactionType: redemptionType, Status: appliedStatus, TransactionPoint: 60, TransactionAmount: 600},
			"T-1~cb2": {TransactionType: redemptionType, Status: appliedStatus, TransactionPoint: 40, TransactionAmount: 400},
		}}
	r, err := refund(context.Background(), ev, prof, p.guarded(&recordState{}))
	if err != nil || r.Outcome != events.OutcomeNoOp || *r.Points != 0 || *r.RequestedPoints != 25 {
		t.Fatalf("got %+v, %v, want NO_OP", r, err)
	}
	if want := []string{"lookup T-1", "lookup T-1~cb1", "lookup T-1~cb2"}; !slices.Equal(p.calls, want) {
		t.Errorf("calls %v, want %v", p.calls, want)
	}
}

// A refund whose ledger intent names its slot (a crash or an ambiguous
// write after the intent) takes that slot for its own, and no other: a
// twin's slot before it, alike in amount and points, is counted as
// another refund's.
func TestClawbackOwnSlotFromTheLedger(t *testing.T) {
	ev := &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 250,
		RefundDate: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	twin := func() *loyalty.Transaction {
		return &loyalty.Transaction{TransactionType: redemptionType, Status: appliedStatus, TransactionPoint: 25, TransactionAmount: 250, BitReference: "B"}
	}
	p := fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 100, TransactionAmount: 1000},
		slots: map[string]*loyalty.Transaction{"T-1~cb1": twin(), "T-1~cb2": twin()}}
	r, err := refund(context.Background(), ev, prof, p.guarded(&recordState{guard: true, ledgerSlot: "T-1~cb2"}))
	if err != nil {
		t.Fatalf("got %v, want ALREADY_APPLIED in T-1~cb2, the slot its intent named", err)
	}
	if r.Outcome != events.OutcomeAlreadyApplied || deref(r.ClawbackTransactionID) != "T-1~cb2" || *r.Points != 25 {
		t.Fatalf("got %s in %s (%d points), want ALREADY_APPLIED in T-1~cb2, the slot its intent named", r.Outcome, deref(r.ClawbackTransactionID), *r.Points)
	}
	if slices.ContainsFunc(p.calls, func(c string) bool { return c[:6] == "redeem" }) {
		t.Errorf("wrote again: %v", p.calls)
	}
}

// A slot taken for the refund's own by its amount and points, rather than
// because the refund's earlier attempt wrote it, says so at debug level
// (it may be a twin's): one line when the record did not write it, none
// when it did.
func TestClawbackSaysWhenASlotMatchedByLooks(t *testing.T) {
	ev := &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 250,
		RefundDate: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	for _, tc := range []struct {
		name, written string
		lines         int
	}{{"written by another attempt or process", "", 1}, {"written by this record", "T-1~cb1", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			p := &fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 100, TransactionAmount: 1000},
				slots: map[string]*loyalty.Transaction{"T-1~cb1": {TransactionType: redemptionType, Status: appliedStatus, TransactionPoint: 25, TransactionAmount: 250}}}
			core, logs := observer.New(zap.DebugLevel)
			g := &guardedPartner{partner: p, b: &Bridge{o: Options{Profile: prof}, log: zap.New(core)}, st: &recordState{guard: true, clawSlot: tc.written}}
			r, err := refund(context.Background(), ev, prof, g)
			if err != nil || r.Outcome != events.OutcomeAlreadyApplied || deref(r.ClawbackTransactionID) != "T-1~cb1" {
				t.Fatalf("got %v, %v, want ALREADY_APPLIED in T-1~cb1", r, err)
			}
			if n := logs.FilterMessage("clawback slot matched by amount and points").Len(); n != tc.lines {
				t.Errorf("%d lines saying the slot matched by amount and points, want %d", n, tc.lines)
			}
		})
	}
}

// A lane has one holder at a time: a second acquirer of the key waits,
// durably, until the holder lets go, while another key is free. synctest
// makes "waits" exact: after synctest.Wait the waiter either holds the lane
// or is blocked, with nothing left to run.
func TestLanesSerialiseAKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l lanes
		ctx := t.Context()
		release, err := l.acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		var got atomic.Bool
		second := make(chan func(), 1)
		go func() {
			r, err := l.acquire(ctx, "k")
			if err != nil {
				t.Error(err)
				close(second)
				return
			}
			got.Store(true)
			second <- r
		}()
		synctest.Wait()
		if got.Load() {
			t.Fatal("a second holder took the lane while the first held it")
		}
		other, err := l.acquire(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		other()
		release()
		synctest.Wait()
		if !got.Load() {
			t.Fatal("the waiter did not get the lane once it was let go")
		}
		(<-second)()

		// A waiter whose context ends leaves the lane.
		release, err = l.acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := l.acquire(cctx, "k"); !errors.Is(err, context.Canceled) {
			t.Errorf("acquire with an ended context: %v", err)
		}
		release()
		if len(l.m) != 0 {
			t.Errorf("%d lanes left", len(l.m))
		}
	})
}

// lockedPartner serialises the calls of goroutines sharing a fakePartner.
type lockedPartner struct {
	partner
	mu sync.Mutex
	f  *fakePartner
}

func (p *lockedPartner) LookupTransaction(ctx context.Context, r loyalty.LookupRequest) (*loyalty.Transaction, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.f.LookupTransaction(ctx, r)
}

func (p *lockedPartner) Redeem(ctx context.Context, r loyalty.RedemptionRequest) (*loyalty.RedemptionResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.f.Redeem(ctx, r)
}

// Two refunds of one original while the circuit is half-open with one
// probe. Refund A's clawback write was ambiguous (and opened the circuit);
// while A backs off, refund B takes the only probe. B must get the
// original's lane, since A holds nothing between attempts, and its success
// closes the circuit; A's guarded next attempt then finds its own slot. A
// lane kept across A's back-off deadlocked the two: B waiting for the lane
// while holding the probe, A waiting for the probe.
func TestClawbackHalfOpenProbeWithTwoRefundsOfAnOriginal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		br, err := circuit.New(circuit.Options{ConsecutiveFailures: 1, OpenTimeout: time.Second, HalfOpenProbes: 1})
		if err != nil {
			t.Fatal(err)
		}
		// RecordAttempts 1: the test makes A's back-off and next attempt.
		b := &Bridge{o: Options{Profile: prof, RecordAttempts: 1, RetryBackoff: time.Millisecond, Breaker: br}, log: zap.NewNop()}
		f := &fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 100, TransactionAmount: 1000},
			slots: map[string]*loyalty.Transaction{}, redeem: &loyalty.TransientError{Status: 504, Ambiguous: true}}
		// Every write lands; the first one's answer is lost.
		f.onRedeem = func(r loyalty.RedemptionRequest) {
			f.slots[r.TransactionID] = &loyalty.Transaction{TransactionType: redemptionType, Status: appliedStatus,
				TransactionPoint: r.UsedPoint, TransactionAmount: r.TransactionAmount, BitReference: "B-" + r.TransactionID}
		}
		p := &lockedPartner{f: f}
		when := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
		evA := &events.PurchaseRefunded{TransactionID: "R-A", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 250, RefundDate: when}
		evB := &events.PurchaseRefunded{TransactionID: "R-B", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 300, RefundDate: when}
		hA, err := handlerFor(evA, &prof)
		if err != nil {
			t.Fatal(err)
		}
		hB, err := handlerFor(evB, &prof)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		type answer struct {
			r   *events.LoyaltyResult
			err error
		}
		run := func(st *recordState, h handler) <-chan answer {
			ch := make(chan answer, 1)
			go func() {
				r, err := b.policy(st, h)(ctx, p)
				ch <- answer{r, err}
			}()
			return ch
		}

		stA := &recordState{id: "R-A"}
		if _, err := b.policy(stA, hA)(ctx, p); !loyalty.IsAmbiguous(err) {
			t.Fatalf("A's first attempt: %v", err)
		}
		if br.State() != circuit.Open {
			t.Fatalf("circuit %v after an ambiguous write, want open", br.State())
		}
		p.mu.Lock()
		f.redeem = nil
		p.mu.Unlock()
		time.Sleep(2 * time.Second) // A's back-off, past the open period
		chB := run(&recordState{id: "R-B"}, hB)
		synctest.Wait() // B holds the probe, and the lane or waits for it
		chA := run(stA, hA)

		time.Sleep(time.Minute)
		synctest.Wait()
		var a, bb answer
		select {
		case bb = <-chB:
		default:
			t.Errorf("deadlock: refund B, holding the half-open probe, still waits for the original's lane")
		}
		select {
		case a = <-chA:
		default:
			t.Errorf("deadlock: refund A still waits for the half-open probe")
		}
		if t.Failed() {
			cancel()
			return
		}
		if bb.err != nil || bb.r.Outcome != events.OutcomeApplied || deref(bb.r.ClawbackTransactionID) != "T-1~cb2" || *bb.r.Points != 30 {
			t.Errorf("B: %+v, %v", bb.r, bb.err)
		}
		if a.err != nil || a.r.Outcome != events.OutcomeAlreadyApplied || deref(a.r.ClawbackTransactionID) != "T-1~cb1" || *a.r.Points != 25 {
			t.Errorf("A: %+v, %v", a.r, a.err)
		}
		if br.State() != circuit.Closed {
			t.Errorf("circuit %v, want closed", br.State())
		}
	})
}

// After an ambiguous write the original's lane is let go with the attempt:
// the write has landed or never will by then (the package doc's
// assumption), so another refund of the original sees the slot filled and
// moves on, and the record's next attempt, guarded, finds the slot its
// write went to as its own.
func TestClawbackAfterAnAmbiguousWrite(t *testing.T) {
	// In a bubble: the other refund waits out the apply window (2 s, the
	// default) behind the ambiguous write before it takes the lane, on the
	// fake clock.
	synctest.Test(t, func(t *testing.T) {
		when := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
		ev := &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 250, RefundDate: when}
		p := &fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 100, TransactionAmount: 1000},
			slots: map[string]*loyalty.Transaction{}, redeem: &loyalty.TransientError{Status: 504, Ambiguous: true}}
		p.onRedeem = func(r loyalty.RedemptionRequest) {
			p.slots[r.TransactionID] = &loyalty.Transaction{TransactionType: redemptionType, Status: appliedStatus,
				TransactionPoint: r.UsedPoint, TransactionAmount: r.TransactionAmount}
		}
		b := &Bridge{o: Options{Profile: prof}, log: zap.NewNop()}
		st := &recordState{}
		g := &guardedPartner{partner: p, b: b, st: st}
		if _, err := refund(context.Background(), ev, prof, g); !loyalty.IsAmbiguous(err) {
			t.Fatalf("first attempt: %v", err)
		}
		if len(b.lanes.m) != 0 || st.clawSlot != "T-1~cb1" || !st.guard {
			t.Fatalf("after an ambiguous write: %d lanes held, slot %q, guard %v", len(b.lanes.m), st.clawSlot, st.guard)
		}
		// Another refund of the original, in between: the landed write is
		// another's clawback to it.
		p.redeem = nil
		other := &events.PurchaseRefunded{TransactionID: "R-2", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 300, RefundDate: when}
		r, err := refund(context.Background(), other, prof, &guardedPartner{partner: p, b: b, st: &recordState{}})
		if err != nil || r.Outcome != events.OutcomeApplied || deref(r.ClawbackTransactionID) != "T-1~cb2" || *r.Points != 30 {
			t.Fatalf("another refund: %+v, %v", r, err)
		}
		// The record's next attempt finds its own.
		r, err = refund(context.Background(), ev, prof, g)
		if err != nil || r.Outcome != events.OutcomeAlreadyApplied || deref(r.ClawbackTransactionID) != "T-1~cb1" || *r.Points != 25 {
			t.Fatalf("second attempt: %+v, %v", r, err)
		}
		if len(b.lanes.m) != 0 {
			t.Errorf("%d lanes held after the attempts", len(b.lanes.m))
		}
	})
}

// A slot that shows another bitReference than the write just made was
// written twice at once by a partner that applied both: said in an error
// line naming the original.
func TestClawbackVerifySaysWhenASlotWasWrittenTwice(t *testing.T) {
	ev := &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 250,
		RefundDate: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	for _, tc := range []struct {
		name  string
		found string // the verifying lookup's bitReference
		lines int
	}{{"own", "B", 0}, {"another writer's", "B-other", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			p := &fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 100, TransactionAmount: 1000},
				slots: map[string]*loyalty.Transaction{}}
			p.onRedeem = func(r loyalty.RedemptionRequest) {
				p.slots[r.TransactionID] = &loyalty.Transaction{TransactionType: redemptionType, Status: appliedStatus, BitReference: tc.found, TransactionPoint: r.UsedPoint}
			}
			core, logs := observer.New(zap.ErrorLevel)
			g := &guardedPartner{partner: p, b: &Bridge{log: zap.New(core)}, st: &recordState{}}
			r, err := refund(context.Background(), ev, prof, g)
			if err != nil || r.Outcome != events.OutcomeApplied || *r.BitReference != "B" {
				t.Fatalf("%+v, %v", r, err)
			}
			got := logs.FilterMessageSnippet("written twice").FilterField(zap.String("original", "T-1")).Len()
			if got != tc.lines {
				t.Errorf("%d error lines, want %d", got, tc.lines)
			}
		})
	}
}

// Slot answers are read through the partner profile: a status it does not
// name fails the attempt with an *UnrecognisedAnswerError (retry holds the
// record, as for the guard) and nothing is written; a failed status is a
// slot that took no effect, counted (clawing back less) and never taken
// for the refund's own.
func TestClawbackSlotAnswersFollowTheProfile(t *testing.T) {
	ev := &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 250,
		RefundDate: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	original := &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 100, TransactionAmount: 1000}
	slot := func(status string) map[string]*loyalty.Transaction {
		return map[string]*loyalty.Transaction{"T-1~cb1": {TransactionType: redemptionType, Status: status, TransactionPoint: 25, TransactionAmount: 250}}
	}

	p := fakePartner{lookup: original, slots: slot("PENDING")}
	m := telemetry.NewMetrics()
	g := &guardedPartner{partner: &p, b: &Bridge{o: Options{Profile: prof, Metrics: m}, log: zap.NewNop()}, st: &recordState{guard: true}}
	_, err := refund(context.Background(), ev, prof, g)
	var ue *loyalty.UnrecognisedAnswerError
	if !errors.As(err, &ue) || ue.Field != loyalty.FieldStatus || ue.Value != "PENDING" || !transient(err) {
		t.Fatalf("unknown slot status: %v", err)
	}
	if slices.ContainsFunc(p.calls, func(c string) bool { return c[:6] == "redeem" }) {
		t.Errorf("wrote on an unrecognised answer: %v", p.calls)
	}
	// Counted where an operator looks for held records' answers, as the
	// guard's own lookups are.
	if got := gauge(m.GuardLookups.WithLabelValues("unrecognised")); got != 1 {
		t.Errorf("guard_lookups_total{result=unrecognised} %v after an unrecognised slot, want 1", got)
	}

	// Looks like its own, and the record may repeat, but it failed: the
	// refund claws back in the next slot what the failed one left.
	p = fakePartner{lookup: original, slots: slot("FAILED")}
	r, err := refund(context.Background(), ev, prof, p.guarded(&recordState{guard: true}))
	if err != nil || r.Outcome != events.OutcomeApplied || deref(r.ClawbackTransactionID) != "T-1~cb2" || *r.Points != 25 {
		t.Fatalf("failed slot: %+v, %v", r, err)
	}

	// A failed slot that reports no points is a count (zero), not an
	// answer to hold on: the refund claws back in the next slot.
	p = fakePartner{lookup: original, slots: map[string]*loyalty.Transaction{"T-1~cb1": {TransactionType: redemptionType, Status: "FAILED", TransactionAmount: 250}}}
	r, err = refund(context.Background(), ev, prof, p.guarded(&recordState{}))
	if err != nil || r.Outcome != events.OutcomeApplied || deref(r.ClawbackTransactionID) != "T-1~cb2" || *r.Points != 25 {
		t.Fatalf("failed slot of zero points: %+v, %v", r, err)
	}
}

// A success answer to a slot's write is the refund's clawback, applied,
// whatever usedPoint it echoes: a differing figure is reported as the
// partner's (usedPoint, beside points, what was sent) and logged, never
// taken for another writer's clawback, which would claw back again in the
// next slot.
func TestClawbackSuccessIsTheRefundsOwn(t *testing.T) {
	ev := &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 250,
		RefundDate: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	p := &fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 100, TransactionAmount: 1000},
		slots: map[string]*loyalty.Transaction{}, usedPoint: 26}
	p.onRedeem = func(r loyalty.RedemptionRequest) {
		p.slots[r.TransactionID] = &loyalty.Transaction{TransactionType: redemptionType, Status: appliedStatus, BitReference: "B",
			TransactionPoint: r.UsedPoint, TransactionAmount: r.TransactionAmount}
	}
	core, logs := observer.New(zap.WarnLevel)
	g := &guardedPartner{partner: p, b: &Bridge{o: Options{Profile: prof}, log: zap.New(core)}, st: &recordState{}}
	r, err := refund(context.Background(), ev, prof, g)
	if err != nil || r.Outcome != events.OutcomeApplied || deref(r.ClawbackTransactionID) != "T-1~cb1" || *r.Points != 25 || *r.UsedPoint != 26 {
		t.Fatalf("%+v, %v", r, err)
	}
	if n := slices.IndexFunc(p.calls, func(c string) bool { return c[:6] == "redeem" }); n < 0 || slices.ContainsFunc(p.calls[n+1:], func(c string) bool { return c[:6] == "redeem" }) {
		t.Errorf("writes %v, want one", p.calls)
	}
	if logs.FilterField(zap.Int64("answered", 26)).Len() != 1 {
		t.Errorf("no warning of the differing usedPoint: %v", logs.All())
	}
}

// A refund whose writes keep being refused as duplicates (other writers
// filling each slot it found free) ends, past maxCollisions, as
// CLAWBACK_CONFLICT, TRANSIENT_EXHAUSTED and so retryable: its writes
// were all refused, so nothing of its own landed, and a replay (guarded)
// may succeed once the others are done.
func TestClawbackLostSlotsAreRetryable(t *testing.T) {
	ev := &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 250,
		RefundDate: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	p := &fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 100, TransactionAmount: 1000},
		slots: map[string]*loyalty.Transaction{}, redeem: &loyalty.BusinessError{Code: partnerprofile.DefaultDuplicateCode}}
	_, err := refund(context.Background(), ev, prof, p.guarded(&recordState{}))
	var rf *recordFailure
	if !errors.As(err, &rf) || rf.reason != events.ReasonClawbackConflict || rf.cat != events.CategoryTransientExhausted || !retryable(rf.cat, rf.err) {
		t.Fatalf("got %v, want a retryable CLAWBACK_CONFLICT", err)
	}
	if n := len(slices.DeleteFunc(slices.Clone(p.calls), func(c string) bool { return c[:6] != "redeem" })); n != maxCollisions+1 {
		t.Errorf("%d writes, want %d", n, maxCollisions+1)
	}
}

// A slot's transactionPoint is counted only when it is a count of points:
// a negative one (a partner reporting redemptions negative) would shrink
// what was clawed back, and one that overflows the sum would wrap it, so
// the cap would not bind. Either is an answer not understood: the record
// is held (UnrecognisedAnswerError, field transactionPoint), nothing
// written.
func TestClawbackRefusesSlotPointsItCannotCount(t *testing.T) {
	ev := &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 250,
		RefundDate: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	slot := func(points int64) *loyalty.Transaction {
		return &loyalty.Transaction{TransactionType: redemptionType, Status: appliedStatus, TransactionPoint: points, TransactionAmount: 1}
	}
	for _, tc := range []struct {
		name  string
		cb2   int64
		value string
	}{
		{"negative", -40, "-40"},
		{"overflowing the sum", math.MaxInt64, "9223372036854775807"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 100, TransactionAmount: 1000},
				slots: map[string]*loyalty.Transaction{"T-1~cb1": slot(60), "T-1~cb2": slot(tc.cb2)}}
			_, err := refund(context.Background(), ev, prof, p.guarded(&recordState{}))
			var ue *loyalty.UnrecognisedAnswerError
			if !errors.As(err, &ue) || ue.Field != loyalty.FieldTransactionPoint || ue.Value != tc.value || !transient(err) {
				t.Fatalf("got %v, want an unrecognised transactionPoint %s", err, tc.value)
			}
			if slices.ContainsFunc(p.calls, func(c string) bool { return c[:6] == "redeem" }) {
				t.Errorf("wrote on points it cannot count: %v", p.calls)
			}
		})
	}
	// The largest sum that is still a count: the original is taken in
	// full, nothing written, and not held.
	t.Run("summing to exactly MaxInt64", func(t *testing.T) {
		p := fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 100, TransactionAmount: 1000},
			slots: map[string]*loyalty.Transaction{"T-1~cb1": slot(60), "T-1~cb2": slot(math.MaxInt64 - 60)}}
		r, err := refund(context.Background(), ev, prof, p.guarded(&recordState{}))
		if err != nil || r.Outcome != events.OutcomeNoOp || *r.Points != 0 || *r.RequestedPoints != 25 {
			t.Fatalf("got %+v, %v, want NO_OP: the earlier clawbacks took it all", r, err)
		}
		if slices.ContainsFunc(p.calls, func(c string) bool { return c[:6] == "redeem" }) {
			t.Errorf("wrote past the cap: %v", p.calls)
		}
	})
}

// ClawbackSlot reads exactly the ids ClawbackID makes.
func TestClawbackSlot(t *testing.T) {
	for _, c := range []struct {
		id, original string
		k            int
	}{
		{ClawbackID("P-1", 1), "P-1", 1},
		{ClawbackID("P~cb2", 12), "P~cb2", 12},
		{"P-1~cb0", "", 0},
		{"P-1~cb01", "", 0},
		{"P-1~cb+1", "", 0},
		{"P-1~cb", "", 0},
		{"~cb1", "", 0},
		{"P-1", "", 0},
		{"", "", 0},
	} {
		o, k, ok := ClawbackSlot(c.id)
		if o != c.original || k != c.k || ok != (c.k > 0) {
			t.Errorf("ClawbackSlot(%q) = %q, %d, %v; want %q, %d", c.id, o, k, ok, c.original, c.k)
		}
	}
}
