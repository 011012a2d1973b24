package bridge_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// Issue 29, finding 4: an order paid partly with points, its accrual and
// its redemption under one transactionId, at a partner that applies a
// repeated id again and whose lookup by id shows the accrual. Whenever the
// redemption's write is guarded (a Fresh record, a replayed one, a retry
// after an ambiguous write), the lookup finds the accrual, which says
// nothing about the redemption: the record is held with no write, then
// becomes a retryable error event. At most one redemption effect; before,
// the accrual read as "not applied" and the redemption was written again
// on every attempt (100 points taken by 5 writes).
func TestSharedIDRedemptionHeld(t *testing.T) {
	s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: sim.DuplicateApply}})
	pt, rt := topics.Purchase, topics.RefundRedemption
	const hold = 300 * time.Millisecond
	b := s.bridge(func(o *bridge.Options) { o.UnrecognisedHold = hold })
	replay := s.bridge(func(o *bridge.Options) { o.UnrecognisedHold, o.Replay = hold, true })
	for i, tc := range []struct {
		name      string
		b         *bridge.Bridge
		fresh     bool
		ambiguous bool // the first redemption write is applied and answered 500
	}{
		{"fresh", b, true, false},
		{"replayed", replay, false, false},
		{"ambiguous first write", b, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, member := "ORDER-"+tc.name, 10+i
			if r := s.handle(b, s.record(pt, purchase(id, member, 20_000)), false); r.outcome() != "APPLIED" {
				t.Fatalf("accrual: %s (%s)", r.outcome(), r.detail())
			}
			m, _ := s.sim.Member(sim.MemberID(member))
			earned := m.Balance
			if tc.ambiguous {
				s.sim.SetFaults(sim.Faults{ApplyThen500Rate: 1, Endpoints: []string{sim.EndpointRedemption}})
				defer s.sim.SetFaults(sim.Faults{})
			}
			writes := s.sim.TotalCalls(sim.EndpointRedemption)
			start := time.Now()
			r := s.handle(tc.b, s.record(rt, redemption(id, member, 100)), tc.fresh)
			if r.outcome() != "error TRANSIENT_EXHAUSTED UNRECOGNISED_ANSWER" || !r.err.Retryable || !strings.Contains(r.detail(), "other kind") {
				t.Errorf("%s, want a retryable TRANSIENT_EXHAUSTED UNRECOGNISED_ANSWER naming the other kind (%s)", r.outcome(), r.detail())
			}
			if took := time.Since(start); took < hold {
				t.Errorf("answered after %s, within the %s hold", took, hold)
			}
			wantWrites, wantTaken := 0, 0.0
			if tc.ambiguous {
				wantWrites, wantTaken = 1, 100
			}
			if got := s.sim.TotalCalls(sim.EndpointRedemption) - writes; got != wantWrites {
				t.Errorf("%d redemption writes, want %d", got, wantWrites)
			}
			if m, _ := s.sim.Member(sim.MemberID(member)); earned-m.Balance != wantTaken {
				t.Errorf("%v points taken, want %v", earned-m.Balance, wantTaken)
			}
		})
	}
	if n := value(t, s.metrics.UnrecognisedAnswers.WithLabelValues("sharedTransactionId")); n < 3 {
		t.Errorf("unrecognised_answers_total{field=sharedTransactionId} %v", n)
	}
	if !strings.Contains(s.logs.String(), `"field":"sharedTransactionId","answered":"ACCRUAL"`) {
		t.Error("no warning naming the shared transactionId")
	}
}

// Told the partner keys transactions by id alone, the same redemption is
// its BUSINESS error at once (TRANSACTION_ID_CONFLICT, not retryable):
// the partner holds one transaction under the id, the accrual, so the
// redemption was not applied and a write would collide. Nothing written.
func TestSharedIDKeyedByIDAlone(t *testing.T) {
	s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: sim.DuplicateApply}})
	byID := partnerprofile.Profile{TransactionKey: partnerprofile.KeyID}
	b := s.bridge(func(o *bridge.Options) { o.Profile = byID })
	if r := s.handle(b, s.record(topics.Purchase, purchase("ORDER-1", 1, 20_000)), false); r.outcome() != "APPLIED" {
		t.Fatalf("accrual: %s (%s)", r.outcome(), r.detail())
	}
	writes := s.sim.TotalCalls(sim.EndpointRedemption)
	r := s.handle(b, s.record(topics.RefundRedemption, redemption("ORDER-1", 1, 100)), true)
	if r.outcome() != "error BUSINESS TRANSACTION_ID_CONFLICT" || r.err.Retryable || r.err.Attempts != 1 {
		t.Errorf("%s, want a BUSINESS TRANSACTION_ID_CONFLICT at the first attempt: %+v", r.outcome(), r.err)
	}
	if got := s.sim.TotalCalls(sim.EndpointRedemption) - writes; got != 0 {
		t.Errorf("%d redemption writes", got)
	}
}

// Held means held, over HTTP: a lookup answer with a status the profile
// does not name holds the record for --unrecognised-hold with no output
// and no write, asking again with back-off, spending none of its budget
// (one attempt here), shown by the gauge and the readiness the service
// serves (Bridge.Health); then one retryable error event.
func TestUnknownStatusHeld(t *testing.T) {
	// The simulator answers COMPLETED; the bridge's profile names SUCCESS.
	s := newStack(t, stackOpts{sim: sim.Options{Profile: partnerprofile.Profile{AppliedStatuses: []string{"COMPLETED"}}}})
	const hold = 1500 * time.Millisecond
	b := s.bridge(func(o *bridge.Options) { o.UnrecognisedHold, o.RecordAttempts = hold, 1 })
	rec := s.record(topics.Purchase, purchase("U-1", 1, 10_000))
	if r := s.handle(b, rec, false); r.outcome() != "APPLIED" {
		t.Fatalf("setup: %s (%s)", r.outcome(), r.detail())
	}
	lookups, writes := s.sim.TotalCalls(sim.EndpointLookup), s.sim.TotalCalls(sim.EndpointAccrual)
	type answer struct {
		out []*kgo.Record
		err error
	}
	ch := make(chan answer, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	go func() {
		out, err := b.Handle(ctx, rec, pipeline.Meta{Fresh: true})
		ch <- answer{out, err}
	}()
	testkit.Eventually(t, hold/2, func() (bool, string) {
		if b.HeldUnrecognised() != 1 || gaugeValue(t, s.metrics.HeldUnrecognised) != 1 || !errors.Is(b.Health(), bridge.ErrHeldUnrecognised) {
			return false, "the record is not shown held"
		}
		return true, ""
	})
	select {
	case a := <-ch:
		t.Fatalf("answered while held: %d outputs, %v", len(a.out), a.err)
	default:
	}
	var a answer
	select {
	case a = <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("still held 20s into a 1.5s hold")
	}
	if a.err != nil || len(a.out) != 1 {
		t.Fatalf("%d outputs, %v", len(a.out), a.err)
	}
	if r := s.decode(a.out[0]); r.outcome() != "error TRANSIENT_EXHAUSTED UNRECOGNISED_ANSWER" || !r.err.Retryable ||
		!strings.Contains(r.detail(), `status "COMPLETED"`) {
		t.Errorf("%s, want a retryable TRANSIENT_EXHAUSTED UNRECOGNISED_ANSWER naming the status (%s)", r.outcome(), r.detail())
	}
	if took := time.Since(start); took < hold {
		t.Errorf("answered after %s, within the %s hold", took, hold)
	}
	if got := s.sim.TotalCalls(sim.EndpointLookup) - lookups; got < 3 {
		t.Errorf("%d lookups while held, want several: one attempt of budget was not spent", got)
	}
	if got := s.sim.TotalCalls(sim.EndpointAccrual) - writes; got != 0 {
		t.Errorf("%d accrual writes while held", got)
	}
	if b.HeldUnrecognised() != 0 || gaugeValue(t, s.metrics.HeldUnrecognised) != 0 || b.Health() != nil {
		t.Errorf("still shown held: %d, %v", b.HeldUnrecognised(), b.Health())
	}
}

// gaugeValue reads a gauge.
func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
