package bridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// fakePartner answers from fields and records the calls (a pure unit: the
// handlers' own tests over the simulator are in bridge_test).
type fakePartner struct {
	partner // nil: a call not set up panics the test
	calls   []string
	lookup  *loyalty.Transaction
	lookErr error
	// slots answers lookups of other ids (clawback slots); not found
	// unless listed.
	slots  map[string]*loyalty.Transaction
	redeem error
	// onRedeem, when set, sees every redemption (e.g. to fill its slot).
	onRedeem func(loyalty.RedemptionRequest)
	link     error
	last     loyalty.RedemptionRequest
	// usedPoint, when set, is the usedPoint a successful redemption
	// answers, instead of the one sent.
	usedPoint int64
	// lastAccrual is the last accrual asked for.
	lastAccrual loyalty.AccrualRequest
}

func (f *fakePartner) LookupTransaction(_ context.Context, r loyalty.LookupRequest) (*loyalty.Transaction, error) {
	f.calls = append(f.calls, "lookup "+r.TransactionID)
	if strings.Contains(r.TransactionID, clawbackMark) || f.slots != nil && r.TransactionID != "T-1" {
		if t, ok := f.slots[r.TransactionID]; ok {
			return t, nil
		}
		return nil, notFound
	}
	return f.lookup, f.lookErr
}

// guarded wraps f as the attempt policy hands it to a handler.
func (f *fakePartner) guarded(st *recordState) *guardedPartner {
	return &guardedPartner{partner: f, b: &Bridge{o: Options{Profile: prof}, log: zap.NewNop()}, st: st}
}

func (f *fakePartner) Redeem(_ context.Context, r loyalty.RedemptionRequest) (*loyalty.RedemptionResult, error) {
	f.calls = append(f.calls, "redeem "+r.TransactionID)
	f.last = r
	if f.onRedeem != nil {
		f.onRedeem(r)
	}
	if f.redeem != nil {
		return nil, f.redeem
	}
	if f.usedPoint != 0 {
		return &loyalty.RedemptionResult{UsedPoint: f.usedPoint, BitReference: "B"}, nil
	}
	return &loyalty.RedemptionResult{UsedPoint: r.UsedPoint, BitReference: "B"}, nil
}

func (f *fakePartner) Accrue(_ context.Context, r loyalty.AccrualRequest) (*loyalty.AccrualResult, error) {
	f.calls = append(f.calls, "accrue "+r.TransactionID)
	f.lastAccrual = r
	return &loyalty.AccrualResult{BitReference: "B", SponsorID: 7}, nil
}

func (f *fakePartner) Link(context.Context, loyalty.LinkRequest) error {
	f.calls = append(f.calls, "link")
	return f.link
}

func (f *fakePartner) Unlink(context.Context, loyalty.LinkRequest) error {
	f.calls = append(f.calls, "unlink")
	return f.link
}

// The simulator's profile, which a zero partnerprofile.Profile reads as,
// and a partner's not-found answer under it.
var (
	prof           = partnerprofile.Profile{FailedStatuses: []string{"FAILED"}}
	accrualType    = partnerprofile.DefaultAccrualType
	redemptionType = partnerprofile.DefaultRedemptionType
	appliedStatus  = partnerprofile.DefaultAppliedStatus
	notFound       = &loyalty.BusinessError{Code: partnerprofile.DefaultNotFoundCode}
)

func TestRefundHandler(t *testing.T) {
	ev := &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1",
		RefundAmount: 250, RefundDate: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)}
	for _, tc := range []struct {
		name     string
		p        fakePartner
		outcome  events.Outcome
		points   int64
		reason   string
		nCalls   int
		transErr bool
	}{
		{"proportional clawback", fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 100, TransactionAmount: 1000}},
			events.OutcomeApplied, 25, "", 4, false},
		{"capped at the original's points", fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 10, TransactionAmount: 100}},
			events.OutcomeApplied, 10, "", 4, false},
		{"nothing to claw back", fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: appliedStatus, TransactionPoint: 0, TransactionAmount: 1000}},
			events.OutcomeNoOp, 0, "", 1, false},
		{"original not found", fakePartner{lookErr: notFound}, "", 0, events.ReasonOriginalNotFound, 1, false},
		// Keyed by id and type (the default), the original's id found as a
		// redemption may hide the accrual: held (sharedid_test.go has the
		// partner keyed by id alone).
		{"original's id found as a redemption", fakePartner{lookup: &loyalty.Transaction{TransactionType: redemptionType, Status: appliedStatus, TransactionPoint: 5}},
			"", 0, "", 1, true},
		{"lookup fails", fakePartner{lookErr: &loyalty.TransientError{Status: 503}}, "", 0, "", 1, true},
		{"original failed", fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: "FAILED", TransactionPoint: 5}},
			"", 0, events.ReasonOriginalNotFound, 1, false},
		// Answers the profile does not name hold the record: no clawback on a guess.
		{"unknown not-found code", fakePartner{lookErr: &loyalty.BusinessError{Code: "TXN_NOT_FOUND"}}, "", 0, "", 1, true},
		{"unknown type", fakePartner{lookup: &loyalty.Transaction{TransactionType: "EARN", Status: appliedStatus, TransactionPoint: 5, TransactionAmount: 10}},
			"", 0, "", 1, true},
		{"unknown status", fakePartner{lookup: &loyalty.Transaction{TransactionType: accrualType, Status: "PENDING", TransactionPoint: 5, TransactionAmount: 10}},
			"", 0, "", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			r, err := refund(context.Background(), ev, prof, p.guarded(&recordState{}))
			if len(p.calls) != tc.nCalls {
				t.Fatalf("calls %v", p.calls)
			}
			var rf *recordFailure
			switch {
			case tc.reason != "":
				if !errors.As(err, &rf) || rf.reason != tc.reason {
					t.Fatalf("err %v, want reason %s", err, tc.reason)
				}
			case tc.transErr:
				if !transient(err) {
					t.Fatalf("err %v, want transient", err)
				}
			case err != nil:
				t.Fatal(err)
			case r.Outcome != tc.outcome || *r.UsedPoint != tc.points:
				t.Fatalf("result %s %d, want %s %d", r.Outcome, *r.UsedPoint, tc.outcome, tc.points)
			case tc.outcome == events.OutcomeApplied && (p.last.TransactionID != "T-1~cb1" || p.last.UsedPoint != tc.points ||
				*r.Points != tc.points || *r.ClawbackTransactionID != "T-1~cb1"):
				t.Fatalf("redemption %+v", p.last)
			case r.Points == nil || *r.Points != tc.points:
				t.Fatalf("result points %v, want %d", r.Points, tc.points)
			}
		})
	}
}

func TestLinkHandler(t *testing.T) {
	linked := &loyalty.BusinessError{Code: string(loyalty.ErrMemberIsLinked)}
	notLinked := &loyalty.BusinessError{Code: string(loyalty.ErrMemberNotLinked)}
	for _, tc := range []struct {
		unlink  bool
		err     error
		outcome events.Outcome
		changed bool
	}{
		{false, nil, events.OutcomeLinked, true},
		{false, linked, events.OutcomeAlreadyLinked, false},
		{true, nil, events.OutcomeUnlinked, true},
		{true, notLinked, events.OutcomeNotLinked, false},
	} {
		p := &fakePartner{link: tc.err}
		r, err := link(context.Background(), p, "L-1", "P-1", tc.unlink)
		if err != nil || r.Outcome != tc.outcome || *r.StateChanged != tc.changed {
			t.Errorf("unlink=%v err=%v: %+v, %v", tc.unlink, tc.err, r, err)
		}
	}
	// The other state's answer is an error, not a result.
	if _, err := link(context.Background(), &fakePartner{link: notLinked}, "L-1", "P-1", false); err == nil {
		t.Error("MEMBER_IS_NOT_LINKED_YET on link is not an error")
	}
	// Unlink answered data: false (the client's *BusinessError with Data)
	// is an error event carrying the answer, not UNLINKED.
	declined := &loyalty.BusinessError{Op: "unlink-member", HTTPStatus: 200, StatusCode: 200, StatusMessage: "SUCCESS", Data: "false"}
	if r, err := link(context.Background(), &fakePartner{link: declined}, "L-1", "P-1", true); err != declined || r != nil {
		t.Errorf("unlink data false: %+v, %v", r, err)
	}
}

// An accrual carries the purchase's description and extraData (JSON
// objects serialised to strings) as JSON, and leaves out the ones the
// event leaves unset or empty.
func TestAccrualCarriesDescriptionAndExtraData(t *testing.T) {
	base := events.PurchaseCompleted{TransactionID: "P-1", LoyaltyID: "L-1", Amount: 5000, Currency: "VND"}
	for _, tc := range []struct {
		name              string
		description, data *string
		wantDes, wantData string
	}{
		{"both set", ptr(`{"store":"S1"}`), ptr(`{"k":1}`), `{"store":"S1"}`, `{"k":1}`},
		{"unset", nil, nil, "", ""},
		{"empty", ptr(""), ptr(""), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := base
			ev.Description, ev.ExtraData = tc.description, tc.data
			p := &fakePartner{}
			if _, err := accrue(context.Background(), &ev, p); err != nil {
				t.Fatal(err)
			}
			if got := string(p.lastAccrual.TransactionDes); got != tc.wantDes {
				t.Errorf("transactionDes %q, want %q", got, tc.wantDes)
			}
			if got := string(p.lastAccrual.ExtraData); got != tc.wantData {
				t.Errorf("extraData %q, want %q", got, tc.wantData)
			}
			if tc.wantDes == "" && p.lastAccrual.TransactionDes != nil {
				t.Errorf("transactionDes %q sent for an unset description", p.lastAccrual.TransactionDes)
			}
		})
	}
}

// The policy's order: a guarded write looks up inside the attempt, and a
// found transaction is the result without a write; an ambiguous failure
// guards the next attempt, which finds the first one applied.
func TestPolicyGuardsAfterAmbiguity(t *testing.T) {
	// In a bubble: the retry waits out the apply window (2 s, the
	// default) after the ambiguous write before it looks, on the fake clock.
	synctest.Test(t, func(t *testing.T) {
		b := &Bridge{o: Options{RecordAttempts: 3, RetryBackoff: time.Millisecond}}
		b.log = zap.NewNop()
		ev := &events.RedemptionRequested{TransactionID: "X-1", LoyaltyID: "L-1", UsedPoint: 5, Sign: ptr("s")}
		h, err := handlerFor(ev, &partnerprofile.Profile{})
		if err != nil {
			t.Fatal(err)
		}
		p := &fakePartner{redeem: &loyalty.TransientError{Status: 504, Ambiguous: true}, lookErr: notFound}
		st := &recordState{}
		// First attempt: ambiguous. Second: the guard looks up and finds it.
		first := true
		wrapped := &switchingPartner{fakePartner: p, after: func() {
			if first {
				first = false
				p.redeem, p.lookErr = nil, nil
				p.lookup = &loyalty.Transaction{TransactionType: redemptionType, Status: appliedStatus, TransactionPoint: 5, BitReference: "B-1"}
			}
		}}
		r, err := b.policy(st, h)(context.Background(), wrapped)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != events.OutcomeAlreadyApplied || st.attempts != 2 || !st.guarded {
			t.Fatalf("outcome %s, attempts %d, guarded %v; calls %v", r.Outcome, st.attempts, st.guarded, p.calls)
		}
		if want := []string{"redeem X-1", "lookup X-1"}; len(p.calls) != 2 || p.calls[0] != want[0] || p.calls[1] != want[1] {
			t.Fatalf("calls %v, want %v", p.calls, want)
		}
	})
}

// switchingPartner runs after once the first redemption has failed.
type switchingPartner struct {
	*fakePartner
	after func()
}

func (s *switchingPartner) Redeem(ctx context.Context, r loyalty.RedemptionRequest) (*loyalty.RedemptionResult, error) {
	res, err := s.fakePartner.Redeem(ctx, r)
	s.after()
	return res, err
}

// A guarded write whose lookup finds the transaction with a failed status
// is sent (it took no effect); with a status the profile does not name,
// the record is held and nothing is sent (here with no hold time: it ends
// at once, UNRECOGNISED_ANSWER; unrecognised_test.go holds it).
func TestGuardReadsStatus(t *testing.T) {
	ev := &events.RedemptionRequested{TransactionID: "S-1", LoyaltyID: "L-1", UsedPoint: 5, Sign: ptr("s")}
	for _, tc := range []struct {
		status  string
		outcome events.Outcome // "" for a held record
		calls   []string
	}{
		{appliedStatus, events.OutcomeAlreadyApplied, []string{"lookup S-1"}},
		{"FAILED", events.OutcomeApplied, []string{"lookup S-1", "redeem S-1"}},
		{"PENDING", "", []string{"lookup S-1"}},
	} {
		t.Run(tc.status, func(t *testing.T) {
			b := &Bridge{o: Options{RecordAttempts: 2, RetryBackoff: time.Millisecond, Profile: prof}, log: zap.NewNop()}
			h, err := handlerFor(ev, &prof)
			if err != nil {
				t.Fatal(err)
			}
			p := &fakePartner{lookup: &loyalty.Transaction{TransactionType: redemptionType, Status: tc.status, TransactionPoint: 5}}
			// Bounded: a hold that does not end at once fails the test
			// instead of hanging it.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			r, err := b.policy(&recordState{guard: true}, h)(ctx, p)
			switch {
			case tc.outcome == "":
				var rf *recordFailure
				if !loyalty.IsUnrecognised(err) || !errors.As(err, &rf) || rf.reason != events.ReasonUnrecognisedAnswer {
					t.Fatalf("err %v, want an unrecognised answer held", err)
				}
			case err != nil:
				t.Fatal(err)
			case r.Outcome != tc.outcome:
				t.Fatalf("outcome %s, want %s", r.Outcome, tc.outcome)
			}
			if strings.Join(p.calls, ",") != strings.Join(tc.calls, ",") {
				t.Fatalf("calls %v, want %v", p.calls, tc.calls)
			}
		})
	}
}

// The retry back-off is full jitter over [0, RetryBackoff × 2^n], the
// exponent capped at 5: every value in range, both ends reachable, for the
// smallest back-off too.
func TestBackoffIsFullJitterCapped(t *testing.T) {
	for _, tc := range []struct {
		base time.Duration
		n    int
		ceil time.Duration
	}{
		{time.Nanosecond, 0, time.Nanosecond},
		{time.Nanosecond, 1, 2 * time.Nanosecond},
		{time.Nanosecond, 9, 32 * time.Nanosecond},
		{time.Nanosecond, -1, time.Nanosecond},
	} {
		b := &Bridge{o: Options{RetryBackoff: tc.base}}
		seen := map[time.Duration]bool{}
		for range 2000 {
			d := b.backoff(tc.n)
			if d < 0 || d > tc.ceil {
				t.Fatalf("backoff(%d) over %s: %s, want within [0, %s]", tc.n, tc.base, d, tc.ceil)
			}
			seen[d] = true
		}
		if !seen[0] || !seen[tc.ceil] {
			t.Errorf("backoff(%d) over %s: never 0 or never %s in 2000 draws", tc.n, tc.base, tc.ceil)
		}
	}
}

// A refund whose original is not found looks again until OriginalGrace
// has passed since it first missed it, and not once more: on the fake
// clock its back-offs (100, 200, 400 ms, then the 300 ms left) end exactly
// at the grace, where it gives up.
func TestOriginalGraceEndsAtItsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &Bridge{o: Options{RecordAttempts: 3, RetryBackoff: 100 * time.Millisecond, OriginalGrace: time.Second}}
		b.log = zap.NewNop()
		ev := &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1",
			RefundAmount: 10, RefundDate: time.Now()}
		h, err := handlerFor(ev, &partnerprofile.Profile{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		p := &countingPartner{fakePartner: &fakePartner{lookErr: notFound}, most: 20, cancel: cancel}
		start := time.Now()
		_, err = b.policy(&recordState{}, h)(ctx, p)
		var rf *recordFailure
		if !errors.As(err, &rf) || !rf.originalMissing {
			t.Fatalf("after the grace: %v, want the original missing", err)
		}
		if n := len(p.calls); n != 5 {
			t.Fatalf("looked the original up %d times (%v), want 5: at 0, 100, 300, 700 ms and at the grace's end", n, p.calls)
		}
		if took := time.Since(start); took != time.Second {
			t.Fatalf("gave up after %v, want exactly the grace, 1s", took)
		}
	})
}

// countingPartner cancels its context once it has been asked most
// lookups: a record that would look forever ends.
type countingPartner struct {
	*fakePartner
	most   int
	cancel context.CancelFunc
}

func (c *countingPartner) LookupTransaction(ctx context.Context, r loyalty.LookupRequest) (*loyalty.Transaction, error) {
	if len(c.calls) >= c.most {
		c.cancel()
	}
	return c.fakePartner.LookupTransaction(ctx, r)
}
