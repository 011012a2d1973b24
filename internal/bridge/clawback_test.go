package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
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
		{"a slot that is not a redemption", map[string]*loyalty.Transaction{"T-1~cb1": {TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 5}},
			false, "", events.ReasonClawbackConflict, 0, "", false},
		{"every slot filled", many, false, "", events.ReasonClawbackLimit, 0, "", false},
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

func TestLanesSerialiseAKey(t *testing.T) {
	var l lanes
	ctx := context.Background()
	var mu sync.Mutex
	inside := map[string]int{}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			key := fmt.Sprint(i % 4)
			release, err := l.acquire(ctx, key)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside[key]++
			if inside[key] > 1 {
				t.Errorf("key %s held twice", key)
			}
			mu.Unlock()
			mu.Lock()
			inside[key]--
			mu.Unlock()
			release()
		})
	}
	wg.Wait()
	// A waiter whose context ends leaves the lane.
	release, _ := l.acquire(ctx, "k")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.acquire(cctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("acquire with an ended context: %v", err)
	}
	release()
	if len(l.m) != 0 {
		t.Errorf("%d lanes left", len(l.m))
	}
}

// After an ambiguous write the original's lane stays held until the
// record's next attempt has looked its slot up, so that no other refund of
// the original can take the slot while the write may still land.
func TestClawbackKeepsTheLaneAfterAnAmbiguousWrite(t *testing.T) {
	ev := &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 250,
		RefundDate: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	p := &fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 100, TransactionAmount: 1000},
		slots: map[string]*loyalty.Transaction{}, redeem: &loyalty.TransientError{Status: 504, Ambiguous: true}}
	b := &Bridge{log: zap.NewNop()}
	st := &recordState{}
	g := &guardedPartner{partner: p, b: b, st: st}
	key := "L-1\x00T-1"
	if _, err := refund(context.Background(), ev, prof, g); !loyalty.IsAmbiguous(err) {
		t.Fatalf("first attempt: %v", err)
	}
	if st.lane == nil || st.clawSlot != "T-1~cb1" || len(b.lanes.m[key].held) != 1 {
		t.Fatalf("after an ambiguous write: lane kept %v, slot %q", st.lane != nil, st.clawSlot)
	}
	// The write had landed: the next attempt finds it as its own.
	p.redeem = nil
	p.slots["T-1~cb1"] = &loyalty.Transaction{TransactionType: redemptionType, Status: appliedStatus, TransactionPoint: 25, TransactionAmount: 250}
	r, err := refund(context.Background(), ev, prof, g)
	if err != nil || r.Outcome != events.OutcomeAlreadyApplied || *r.ClawbackTransactionID != "T-1~cb1" {
		t.Fatalf("second attempt: %+v, %v", r, err)
	}
	st.releaseLane()
	if st.lane != nil || len(b.lanes.m) != 0 {
		t.Errorf("lane not released: %d lanes", len(b.lanes.m))
	}
	// A record that ends after an ambiguous write lets the lane go.
	p.slots = map[string]*loyalty.Transaction{}
	p.redeem = &loyalty.TransientError{Status: 504, Ambiguous: true}
	st = &recordState{}
	g.st = st
	if _, err := refund(context.Background(), ev, prof, g); !loyalty.IsAmbiguous(err) {
		t.Fatal(err)
	}
	st.releaseLane()
	if len(b.lanes.m) != 0 {
		t.Errorf("lane not released at the record's end")
	}
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
	_, err := refund(context.Background(), ev, prof, p.guarded(&recordState{guard: true}))
	var ue *loyalty.UnrecognisedAnswerError
	if !errors.As(err, &ue) || ue.Field != loyalty.FieldStatus || ue.Value != "PENDING" || !transient(err) {
		t.Fatalf("unknown slot status: %v", err)
	}
	if slices.ContainsFunc(p.calls, func(c string) bool { return c[:6] == "redeem" }) {
		t.Errorf("wrote on an unrecognised answer: %v", p.calls)
	}

	// Looks like its own, and the record may repeat, but it failed: the
	// refund claws back in the next slot what the failed one left.
	p = fakePartner{lookup: original, slots: slot("FAILED")}
	r, err := refund(context.Background(), ev, prof, p.guarded(&recordState{guard: true}))
	if err != nil || r.Outcome != events.OutcomeApplied || deref(r.ClawbackTransactionID) != "T-1~cb2" || *r.Points != 25 {
		t.Fatalf("failed slot: %+v, %v", r, err)
	}
}
