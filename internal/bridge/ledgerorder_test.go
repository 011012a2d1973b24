package bridge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// holdFirstLookup holds the first lookup-transaction-id call at the
// partner, answered but not yet returned: it reports on held when it has
// its answer, and returns it once release is closed. Every other call
// goes straight through.
func (s *stack) holdFirstLookup(held chan<- struct{}, release <-chan struct{}) {
	var once atomic.Bool
	f := func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.URL.Path[len(r.URL.Path)-len("/lookup-transaction-id"):] != "/lookup-transaction-id" || !once.CompareAndSwap(false, true) {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		close(held)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}
	s.intercept.Store(&f)
}

// A replay beside the live bridge, over the same record: two processes,
// two ledgers (two writer ids) on one ledger topic, both find no entry,
// and both would write. Against a partner that applies a repeated
// transactionId, that was two effects (issue 29: "replay running beside
// the live bridge on the same window can write twice"). Log order decides:
// the one whose intent is later in the ledger sees the other's and sends
// nothing; it is answered from the other's settled entry, or looks the
// transaction up once the other's write has settled, and finds it. One
// effect, whichever goes first.
//
// The interleaving is forced, not hoped for: the second process's guard
// lookup is answered "not found" at the partner and held there while the
// first handles the record from start to end; then it goes on to intend
// and (before the fix) write.
//
// Each case waits out ledger.SendWithin (5 s, a protocol constant every
// process shares, not an option) behind the other's intent: the cases run
// in parallel, with each other and with the other tests that wait on it,
// each in its own stack (broker, partner, ledgers), so that the wait is
// paid about once rather than four times.
func TestReplayBesideLiveWritesOnce(t *testing.T) {
	t.Parallel()
	kinds := []struct {
		name, topic string
		ev          events.Event
		effect      string
	}{
		{"accrual", topics.Purchase, purchase("p-1", 1, 100_000), "p-1"},
		{"redemption", topics.RefundRedemption, redemption("r-1", 1, 30), "r-1"},
		// A refund of p-0, applied first. Before the fix it came out right
		// by luck: the late one took the slot filled meanwhile for its own
		// by amount and points (it is its own here).
		{"refund", topics.RefundRedemption, &events.PurchaseRefunded{TransactionID: "f-1", OriginalTransactionID: "p-0",
			LoyaltyID: sim.MemberID(1), RefundAmount: 30_000, RefundDate: time.Now()}, bridge.ClawbackID("p-0", 1)},
	}
	for _, k := range kinds {
		for _, first := range []string{"live", "replay"} {
			for _, settledSent := range []bool{false, true} {
				name := k.name + "/" + first + "-first"
				if settledSent {
					name += "/settled-entry-produced"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					s := newStack(t, stackOpts{sim: sim.Options{DuplicatePolicy: sim.DuplicateApply, InitialBalance: 1000},
						profile: partnerprofile.Profile{ApplyWindow: 200 * time.Millisecond}})
					la, part := s.withLedger("order")
					lb, _ := s.withLedger("order")
					live := s.bridge(func(o *bridge.Options) { o.Ledger, o.CallTimeout = la, 100*time.Millisecond })
					replay := s.bridge(func(o *bridge.Options) { o.Ledger, o.CallTimeout, o.Replay = lb, 100*time.Millisecond, true })
					if k.name == "refund" {
						out, err := live.Handle(context.Background(), s.record(topics.Purchase, purchase("p-0", 1, 100_000)), pipeline.Meta{Assignment: 1})
						if err != nil || s.decode(out[0]).outcome() != string(events.OutcomeApplied) {
							t.Fatalf("purchase p-0: %v", err)
						}
					}
					firstB, secondB := live, replay
					if first == "replay" {
						firstB, secondB = replay, live
					}
					held, release := make(chan struct{}), make(chan struct{})
					s.holdFirstLookup(held, release)

					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					type handled struct {
						out []*kgo.Record
						err error
					}
					second := make(chan handled, 1)
					go func() {
						// Guarded (a record a previous owner may have sent,
						// or every replayed record): it looks before writing.
						out, err := secondB.Handle(ctx, s.record(k.topic, k.ev), pipeline.Meta{Fresh: true, Assignment: 1})
						second <- handled{out, err}
					}()
					select {
					case <-held:
					case <-ctx.Done():
						t.Fatal("the second process's guard lookup never came")
					}
					out, err := firstB.Handle(ctx, s.record(k.topic, k.ev), pipeline.Meta{Assignment: 1})
					if err != nil {
						t.Fatal(err)
					}
					if r := s.decode(out[0]); r.outcome() != string(events.OutcomeApplied) {
						t.Fatalf("first (%s): %s %s", first, r.outcome(), r.detail())
					}
					if settledSent {
						// As the pipeline does with a record's outputs.
						pcl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), part)
						if err != nil {
							t.Fatal(err)
						}
						defer pcl.Close()
						if len(out) != 2 || out[1].Topic != la.Topic() {
							t.Fatalf("first: %d outputs, want its result and its settled entry", len(out))
						}
						if err := pcl.ProduceSync(ctx, out[1]).FirstErr(); err != nil {
							t.Fatal(err)
						}
					}
					close(release)
					var h handled
					select {
					case h = <-second:
					case <-ctx.Done():
						t.Fatal("the second process never answered")
					}
					if h.err != nil {
						t.Fatal(h.err)
					}
					r := s.decode(h.out[0])
					if n := s.sim.Effects(k.effect); n != 1 {
						t.Errorf("%s applied %d times, want 1 (second: %s %s)", k.effect, n, r.outcome(), r.detail())
					}
					if k.name == "refund" {
						if n := s.sim.Effects(bridge.ClawbackID("p-0", 2)); n != 0 {
							t.Errorf("refund clawed back again in slot 2 (%d effects)", n)
						}
					}
					if r.outcome() != string(events.OutcomeAlreadyApplied) {
						t.Errorf("second: %s %s, want ALREADY_APPLIED", r.outcome(), r.detail())
					}
					// Heeding the other's intent is not an attempt of its
					// own: the record's budget is spent only on its failures.
					if r.result != nil && r.result.Attempts != 1 {
						t.Errorf("second: %d attempts, want 1 (the heeded one not counted)", r.result.Attempts)
					}
				})
			}
		}
	}
}
