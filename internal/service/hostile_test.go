package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/hostile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// Every hostile record (internal/hostile: the security review's header
// flood, keys and values at the limits, every header at its limit), all on
// one partition, through the whole service over Kafka: each gets its one
// answer, the record after them is processed, the group commits up to the
// end of the input, and Run never stops. Before the header flood was
// bounded, its error event came out over the message limit, the fallback
// failed the same way, and Run stopped with nothing committed.
func TestHostileRecordsKeepTheGroupCommitting(t *testing.T) {
	s := newStack(t)
	cfg := stackConfig(t, s, func(c *config.Config) { c.Processing.IncludeOriginal = true })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pt := s.Topics.Purchase
	topics := s.Topics
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...), kgo.ProducerBatchMaxBytes(4<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumeTopics(topics.ResultTopic(pt), topics.ErrorTopic(pt)), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// The two values at and past the decode limit do not fit Kafka's
	// default message limit with their framing; nor do they fit a log
	// segment of 1 MiB, which scripts/kafka's brokers have (a batch larger
	// than its segment is RECORD_LIST_TOO_LARGE, whatever the message
	// limit; kfake has no segments).
	setTopicConfigs(ctx, t, cl, pt, map[string]string{"max.message.bytes": "2097152", "segment.bytes": "8388608"})
	svc := runService(ctx, t, cfg)
	cases, err := hostile.Cases(hostile.Options{Topic: pt, Encode: svc.Codec.Encode, Member: sim.MemberID(1), Prefix: "hs-"})
	if err != nil {
		t.Fatal(err)
	}
	after := &events.PurchaseCompleted{TransactionID: "hs-after", LoyaltyID: sim.MemberID(1), TransactionDate: time.Now(), Amount: 1, Currency: "VND"}
	v, err := svc.Codec.Encode(pt, after)
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, hostile.Case{Name: "the record after", ID: after.TransactionID, Want: hostile.Result,
		Record: &kgo.Record{Topic: pt, Key: []byte("k"), Value: v}})

	want := map[string]hostile.Case{} // by output key
	for _, c := range cases {
		c.Record.Partition = 2
		r, err := cl.ProduceSync(ctx, c.Record).First()
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		key := c.ID
		if key == "" {
			key = events.SourceID(r.Topic, r.Partition, r.Offset)
		}
		want[key] = c
	}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no answer to %d hostile records: %v", len(want), mapKeys(want))
		}
		fs.EachRecord(func(r *kgo.Record) {
			c, ok := want[string(r.Key)]
			if !ok {
				t.Errorf("an output keyed %.60q answers none of the records", r.Key)
				return
			}
			delete(want, string(r.Key))
			got := hostile.Result
			if strings.HasSuffix(r.Topic, ".error") {
				e, err := svc.Codec.Decode(ctx, r.Topic, r.Value)
				if err != nil {
					t.Fatal(err)
				}
				got = "error " + string(e.(*events.LoyaltyError).Category)
			}
			if got != c.Want {
				t.Errorf("%s: %s, want %s", c.Name, got, c.Want)
			}
		})
	}
	waitFor(t, "the group to commit the end of the input", 30*time.Second, func() bool {
		lags, err := adm.Lag(ctx, cfg.Group.Name)
		if err != nil {
			return false
		}
		l, ok := lags[cfg.Group.Name].Lag[pt][2]
		return ok && l.Err == nil && l.End.Offset == int64(len(cases)) && l.Lag == 0
	})
	select {
	case err := <-svc.done:
		t.Fatalf("the bridge stopped: %v", err)
	default:
	}
	svc.halt(t)
}

func mapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
