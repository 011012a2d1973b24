package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/reconcile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// BenchmarkReconcile reconciles a window of 2,000 applied accruals
// against the simulator over HTTP (kfake, srfake): reading the replies and
// their input records, the lookups (8 at once, no rate bound) and the
// comparison. It reports lookups per second.
//
//	go test -run '^$' -bench Reconcile -benchmem ./internal/reconcile/
func BenchmarkReconcile(b *testing.B) {
	const n = 2000
	h := newHarness(b)
	purchase := h.topics.Purchase
	ctx := context.Background()
	var inputs []*kgo.Record
	for i := range n {
		id := fmt.Sprintf("A-%d", i)
		v, err := h.cd.Encode(purchase, &events.PurchaseCompleted{TransactionID: id, LoyaltyID: member, TransactionDate: time.Now(), Amount: 5000})
		if err != nil {
			b.Fatal(err)
		}
		inputs = append(inputs, &kgo.Record{Topic: purchase, Partition: int32(i % 2), Key: []byte(id), Value: v})
		points, amount := int64(5), 5000.0
		if _, err := h.sim.EditTransaction(id, sim.TransactionEdit{Kind: sim.TypeAccrual, LoyaltyID: member, Points: &points, Amount: &amount}); err != nil {
			b.Fatal(err)
		}
	}
	res := h.cl.ProduceSync(ctx, inputs...)
	if err := res.FirstErr(); err != nil {
		b.Fatal(err)
	}
	var replies []*kgo.Record
	for _, pr := range res {
		r := pr.Record
		v, err := h.cd.EncodeResult(purchase+".result", &events.LoyaltyResult{TransactionID: string(r.Key), EventType: events.TypePurchaseCompleted,
			LoyaltyID: ptr(member), Outcome: events.OutcomeApplied, ProcessedAt: time.Now(),
			Source: events.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}})
		if err != nil {
			b.Fatal(err)
		}
		replies = append(replies, &kgo.Record{Topic: purchase + ".result", Partition: r.Partition, Key: r.Key, Value: v})
	}
	if err := h.cl.ProduceSync(ctx, replies...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	r := h.reconciler(nil)
	q := reconcile.Request{Inputs: []string{purchase}, Since: time.Now().Add(-time.Hour)}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		rep, err := r.Run(ctx, q)
		if err != nil || !rep.OK() || rep.Checked != n {
			b.Fatalf("%v, checked %d: %s", err, rep.Checked, rep.Problem())
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "lookups/s")
}
