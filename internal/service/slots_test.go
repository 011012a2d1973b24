package service

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// A record waiting out a Retry-After holds no call slot: with one slot,
// another key's record is answered while the first keeps failing, and a
// later record of the first record's key still waits its turn.
func TestRetryWaitHoldsNoCallSlot(t *testing.T) {
	s := newStack(t)
	cfg := stackConfig(t, s, func(c *config.Config) {
		c.Processing.MaxInFlight = 1
		// The circuit would hold every record while accruals fail: this
		// test is about slots, not the breaker.
		c.Processing.BreakerFailures, c.Processing.BreakerRatio = 1_000_000, 0
		c.Processing.RecordAttempts, c.Processing.RecordBackoff = 1_000_000, 10*time.Millisecond
		c.API.MaxAttempts = 2
	})
	// Every accrual is answered 503 with Retry-After (1 s) until cleared.
	s.Sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, RetryAfter: time.Second, Endpoints: []string{sim.EndpointAccrual}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	svc := runService(ctx, t, cfg)

	produce := eventProducer(ctx, t, s.Brokers, svc)
	member := sim.MemberID(1)
	// Same key, same partition: the second purchase waits behind the first.
	produce(s.Topics.Purchase, member, &events.PurchaseCompleted{TransactionID: "slot-1", LoyaltyID: member,
		TransactionDate: time.Now(), Amount: 10_000, Currency: "VND"})
	produce(s.Topics.Purchase, member, &events.PurchaseCompleted{TransactionID: "slot-2", LoyaltyID: member,
		TransactionDate: time.Now(), Amount: 20_000, Currency: "VND"})
	waitFor(t, "the first accrual to be refused", 30*time.Second, func() bool { return s.Sim.TotalCalls(sim.EndpointAccrual) >= 1 })
	// Another key, another endpoint: a link, answered while the accrual
	// waits to retry.
	other := sim.MemberID(2)
	produce(s.Topics.MemberOnboarding, other, &events.MemberLinkRequested{TransactionID: "slot-link", LoyaltyID: other,
		PartnerMemberID: "P-slot"})

	completed := func(topic, outcome string) float64 {
		return value(svc.Metrics.RecordsCompleted.WithLabelValues(topic, outcome))
	}
	waitFor(t, "the link's result", 30*time.Second, func() bool {
		return completed(s.Topics.MemberOnboarding, string(events.OutcomeLinked)) == 1
	})
	if got := completed(s.Topics.Purchase, string(events.OutcomeApplied)); got != 0 {
		t.Fatalf("%v accruals applied while every accrual is refused", got)
	}
	if got := s.Sim.TotalCalls(sim.EndpointAccrual); got < 1 {
		t.Fatalf("%d accrual calls", got)
	}
	// Only the first purchase has been tried: the second waits for its key.
	s.Sim.SetFaults(sim.Faults{})
	waitFor(t, "both accruals", 30*time.Second, func() bool {
		return completed(s.Topics.Purchase, string(events.OutcomeApplied)) == 2
	})
	for _, id := range []string{"slot-1", "slot-2"} {
		if n := s.Sim.Effects(id); n != 1 {
			t.Errorf("%s applied %d times", id, n)
		}
	}
	// Key order: the partner applied the second purchase after the first
	// (its bit references are a sequence). Result records are keyed by
	// transactionId, so their order across partitions says nothing.
	rc, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...), kgo.ConsumeTopics(s.Topics.ResultTopic(s.Topics.Purchase)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	bitRef := map[string]string{}
	waitFor(t, "result records", 20*time.Second, func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer pcancel()
		rc.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			v, err := svc.Codec.Decode(ctx, r.Topic, r.Value)
			if res, ok := v.(*events.LoyaltyResult); err == nil && ok && res.BitReference != nil {
				bitRef[res.TransactionID] = *res.BitReference
			}
		})
		return len(bitRef) >= 2
	})
	if bitRef["slot-1"] == "" || bitRef["slot-2"] <= bitRef["slot-1"] {
		t.Fatalf("applied in the order %v, want slot-1 first", bitRef)
	}
	svc.halt(t)
}
