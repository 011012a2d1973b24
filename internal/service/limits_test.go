package service

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// Hostile sizes through the whole service: a record whose description is
// far over the limit ends in one VALIDATION error event naming the field
// (and not its value), and the record after it is processed.
//
// The 1 MB case was a bug: its error event carried the original value,
// over franz-go's ProducerBatchMaxBytes and the reply topic's default
// max.message.bytes, so the produce failed, the INTERNAL fallback carried
// the original again, and the pipeline stopped on that record for good.
// Error events now carry originals up to bridge.MaxOriginalBytes only.
func TestHostileSizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{
		{"900 KB description", 900_000},
		{"1 MB description", 1_000_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hostileSize(t, tc.size)
		})
	}
}

func hostileSize(t *testing.T, size int) {
	s := newStack(t)
	cfg := stackConfig(t, s, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc, err := New(ctx, cfg, Options{Logger: testLogger(t), MetricsListener: ln, ClientOpts: fastGroup()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...), kgo.ProducerBatchMaxBytes(4<<20),
		kgo.ConsumeTopics(codec.DefaultTopics().ErrorTopic(codec.DefaultPurchaseTopic)), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pt := codec.DefaultPurchaseTopic
	huge := `{"a":"` + strings.Repeat("y", size) + `"}`
	for _, ev := range []*events.PurchaseCompleted{
		{TransactionID: "big-1", LoyaltyID: sim.MemberID(1), TransactionDate: time.Now(), Amount: 1, Currency: "VND", Description: &huge},
		{TransactionID: "after-1", LoyaltyID: sim.MemberID(1), TransactionDate: time.Now(), Amount: 1, Currency: "VND"},
	} {
		v, err := svc.Codec.Encode(pt, ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: pt, Key: []byte("k"), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var e *events.LoyaltyError
	for e == nil {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("no error event")
		}
		fs.EachRecord(func(r *kgo.Record) {
			v, err := svc.Codec.Decode(ctx, r.Topic, r.Value)
			if err != nil {
				t.Fatal(err)
			}
			e = v.(*events.LoyaltyError)
		})
	}
	if e.TransactionID != "big-1" || e.Category != events.CategoryValidation || !strings.Contains(e.Detail, "description:") || strings.Contains(e.Detail, "yyyy") {
		t.Errorf("error event %s %s: %q", e.TransactionID, e.Category, e.Detail)
	}
	waitFor(t, "the record after", 30*time.Second, func() bool { return s.Sim.Effects("after-1") == 1 })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
