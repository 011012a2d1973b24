package service

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
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
	for _, tc := range []sizeCase{
		{name: "900 KB description", size: 900_000},
		{name: "1 MB description", size: 1_000_000},
		// The security review's reproduction: with originals carried, a
		// 490 KiB value and two 262 KiB headers copied verbatim made an
		// error event over the message limit, and the bridge stopped.
		{name: "490 KiB value and two 262 KiB headers", size: 490 << 10, headers: 262 << 10, original: true},
		// A reply topic whose limit is below what the bridge allows: the
		// broker refuses the error event; the fallback answers without the
		// original.
		{name: "error topic limit 64 KiB", size: 100 << 10, original: true, errTopicMax: 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hostileSize(t, tc)
		})
	}
}

type sizeCase struct {
	name        string
	size        int  // of the description
	headers     int  // size of a correlation-id and a traceparent header, if not 0
	original    bool // --include-original
	errTopicMax int  // max.message.bytes of the error topic, if not 0
}

func hostileSize(t *testing.T, tc sizeCase) {
	s := newStack(t)
	cfg := stackConfig(t, s, func(c *config.Config) { c.Processing.IncludeOriginal = tc.original })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pt := s.Topics.Purchase
	errTopic := s.Topics.ErrorTopic(pt)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...), kgo.ProducerBatchMaxBytes(4<<20),
		kgo.ConsumeTopics(errTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if tc.errTopicMax > 0 {
		setTopicConfigs(ctx, t, cl, errTopic, map[string]string{"max.message.bytes": strconv.Itoa(tc.errTopicMax)})
	}
	svc := runService(ctx, t, cfg)
	filler := strings.Repeat("y", tc.size)
	if tc.errTopicMax > 0 {
		// Brokers measure compressed batches: bytes that do not compress.
		rng := rand.New(rand.NewPCG(1, 2))
		b := make([]byte, tc.size)
		for i := range b {
			b[i] = "abcdefghijklmnopqrstuvwxzABCDEFGHIJKLMNOPQRSTUVWXZ0123456789"[rng.IntN(60)]
		}
		filler = string(b)
	}
	huge := `{"a":"` + filler + `"}`
	var headers []kgo.RecordHeader
	if tc.headers > 0 {
		headers = []kgo.RecordHeader{{Key: "correlation-id", Value: []byte(strings.Repeat("c", tc.headers))},
			{Key: "traceparent", Value: []byte(strings.Repeat("t", tc.headers))}}
	}
	for _, ev := range []*events.PurchaseCompleted{
		{TransactionID: "big-1", LoyaltyID: sim.MemberID(1), TransactionDate: time.Now(), Amount: 1, Currency: "VND", Description: &huge},
		{TransactionID: "after-1", LoyaltyID: sim.MemberID(1), TransactionDate: time.Now(), Amount: 1, Currency: "VND"},
	} {
		v, err := svc.Codec.Encode(pt, ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: pt, Key: []byte("k"), Value: v, Headers: headers}).FirstErr(); err != nil {
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
	switch {
	case strings.Contains(e.Detail, filler[:64]):
		t.Errorf("error event carries the value in its detail")
	case tc.errTopicMax > 0:
		if e.TransactionID != "big-1" || e.Category != events.CategoryInternal || e.Reason == nil || *e.Reason != bridge.ReasonOutputTooLarge ||
			e.OriginalValue != nil {
			t.Errorf("error event %s %s: %q", e.TransactionID, e.Category, e.Detail)
		}
	default:
		if e.TransactionID != "big-1" || e.Category != events.CategoryValidation || !strings.Contains(e.Detail, "description:") {
			t.Errorf("error event %s %s: %q", e.TransactionID, e.Category, e.Detail)
		}
		if tc.headers > 0 && !strings.Contains(e.Detail, "input headers not copied") {
			t.Errorf("error event does not say it dropped the headers: %q", e.Detail)
		}
	}
	waitFor(t, "the record after", 30*time.Second, func() bool { return s.Sim.Effects("after-1") == 1 })
	select {
	case err := <-svc.done:
		t.Fatalf("the bridge stopped: %v", err)
	default:
	}
	svc.halt(t)
}
