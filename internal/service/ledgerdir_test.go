package service

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// With --ledger-dir the service keeps the ledger on disk and closes it
// when it stops: a second service over the same directory opens it (a
// store left open would be refused as in use) and answers the first
// one's transactions, sent again, from the ledger without a call.
func TestServiceLedgerOnDisk(t *testing.T) {
	s := newStack(t)
	dir := t.TempDir()
	cfg := stackConfig(t, s, func(c *config.Config) { c.Ledger.Dir = dir })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const n = 8
	send := func(svc *running) {
		produce := eventProducer(ctx, t, s.Brokers, svc)
		for i := range n {
			ev := &events.PurchaseCompleted{TransactionID: fmt.Sprintf("disk-%d", i), LoyaltyID: sim.MemberID(1 + i),
				TransactionDate: time.Now(), Amount: 10_000, Currency: "VND"}
			produce(s.Topics.Purchase, ev.LoyaltyID, ev)
		}
	}
	first := runService(ctx, t, cfg)
	send(first)
	waitFor(t, "applied", 30*time.Second, func() bool {
		return value(first.Metrics.RecordsCompleted.WithLabelValues(s.Topics.Purchase, "APPLIED")) == n
	})
	first.halt(t)
	first.Close()

	second := runService(ctx, t, cfg)
	send(second)
	waitFor(t, "answered from the ledger", 30*time.Second, func() bool {
		return value(second.Metrics.LedgerAnswered.WithLabelValues(s.Topics.Purchase)) == n
	})
	if got := s.Sim.TotalCalls(sim.EndpointAccrual); got != n {
		t.Fatalf("%d accrual calls, want %d", got, n)
	}
	second.halt(t)
}
