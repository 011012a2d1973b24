package service

import (
	"context"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// The whole service: a refund keyed by its loyaltyId is clawed back, one
// keyed by its own transactionId (which spreads one original's refunds
// over partitions) is an error event, counted, with nothing called.
func TestServiceRefusesARefundKeyedOtherwise(t *testing.T) {
	s := newStack(t)
	cfg := stackConfig(t, s, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	svc := runService(ctx, t, cfg)
	send := eventProducer(ctx, t, s.Brokers, svc)
	m := sim.MemberID(3)
	pt, rt := s.Topics.Purchase, s.Topics.RefundRedemption
	send(pt, m, &events.PurchaseCompleted{TransactionID: "sk-p", LoyaltyID: m, TransactionDate: time.Now(), Amount: 100_000, Currency: "VND"})
	waitFor(t, "the purchase's result", 30*time.Second, func() bool {
		return value(svc.Metrics.RecordsCompleted.WithLabelValues(pt, string(events.OutcomeApplied))) == 1
	})
	redemptions := s.Sim.TotalCalls(sim.EndpointRedemption)
	send(rt, m, &events.PurchaseRefunded{TransactionID: "sk-1", OriginalTransactionID: "sk-p", LoyaltyID: m, RefundAmount: 10_000, RefundDate: time.Now()})
	send(rt, "sk-2", &events.PurchaseRefunded{TransactionID: "sk-2", OriginalTransactionID: "sk-p", LoyaltyID: m, RefundAmount: 20_000, RefundDate: time.Now()})
	waitFor(t, "both refunds answered", 30*time.Second, func() bool {
		return value(svc.Metrics.RecordsCompleted.WithLabelValues(rt, string(events.OutcomeApplied))) == 1 &&
			value(svc.Metrics.ErrorEvents.WithLabelValues(rt, string(events.CategoryValidation))) == 1
	})
	if n := value(svc.Metrics.RefundKeyMismatches.WithLabelValues(rt, "refused")); n != 1 {
		t.Errorf("refused counted %v, want 1", n)
	}
	if n := s.Sim.TotalCalls(sim.EndpointRedemption) - redemptions; n != 1 {
		t.Errorf("%d redemption calls, want 1 (the clawback of sk-1)", n)
	}
	svc.halt(t)
}
