package service

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// A refund whose original's lookup answers a status the profile does not
// name is held, nothing clawed back: /readyz says partner-answers failing
// and the gauge counts it, until --unrecognised-hold has passed; then it is
// one error event and the service is ready again.
func TestUnrecognisedAnswerHeldShowsOnReadyz(t *testing.T) {
	s := newStack(t)
	const hold = 3 * time.Second
	cfg := stackConfig(t, s, func(c *config.Config) {
		c.Processing.UnrecognisedHold = hold
		// The simulator answers SUCCESS; this partner's applied status is
		// another.
		c.Partner.Profile.AppliedStatuses = []string{"COMPLETED"}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	svc := runService(ctx, t, cfg)
	base := svc.base
	waitFor(t, "/readyz", 20*time.Second, func() bool { c, _ := get(base + "/readyz"); return c == http.StatusOK })

	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(topic string, ev events.Event) {
		t.Helper()
		v, err := svc.Codec.Encode(topic, ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(sim.MemberID(1)), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	completed := func(topic, outcome string) float64 {
		return value(svc.Metrics.RecordsCompleted.WithLabelValues(topic, outcome))
	}
	// An unguarded accrual looks nothing up: applied.
	produce(s.Topics.Purchase, &events.PurchaseCompleted{TransactionID: "held-1", LoyaltyID: sim.MemberID(1), TransactionDate: time.Now(),
		Amount: 10_000, Currency: "VND"})
	waitFor(t, "the purchase", 30*time.Second, func() bool { return completed(s.Topics.Purchase, string(events.OutcomeApplied)) == 1 })
	redemptions := s.Sim.TotalCalls(sim.EndpointRedemption)

	produce(s.Topics.RefundRedemption, &events.PurchaseRefunded{TransactionID: "held-1-r", OriginalTransactionID: "held-1",
		LoyaltyID: sim.MemberID(1), RefundAmount: 5000, RefundDate: time.Now()})
	waitFor(t, "the hold", 20*time.Second, func() bool { return value(svc.Metrics.HeldUnrecognised) == 1 })
	heldAt := time.Now()
	waitFor(t, "/readyz false", hold/2, func() bool {
		c, body := get(base + "/readyz")
		return c == http.StatusServiceUnavailable && strings.Contains(body, "partner-answers: failing")
	})
	if got := completed(s.Topics.RefundRedemption, "error"); got != 0 {
		t.Fatalf("%v error events while held", got)
	}
	waitFor(t, "the error event", 30*time.Second, func() bool { return completed(s.Topics.RefundRedemption, "error") == 1 })
	if took := time.Since(heldAt); took < hold/2 {
		t.Errorf("an error event %s after the hold began, within the %s hold", took, hold)
	}
	if got := value(svc.Metrics.ErrorEvents.WithLabelValues(s.Topics.RefundRedemption, string(events.CategoryTransientExhausted))); got != 1 {
		t.Errorf("%v TRANSIENT_EXHAUSTED error events, want 1", got)
	}
	waitFor(t, "/readyz", 10*time.Second, func() bool { c, _ := get(base + "/readyz"); return c == http.StatusOK })
	if value(svc.Metrics.HeldUnrecognised) != 0 {
		t.Error("still counted held")
	}
	if got := s.Sim.TotalCalls(sim.EndpointRedemption) - redemptions; got != 0 {
		t.Errorf("%d redemptions sent for a held refund", got)
	}
}
