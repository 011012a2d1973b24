package benchkit

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
)

// TestAgeLedger: after the bench ages the bridge's ledger (kfake over
// TCP), a ledger reading that topic, as the bridge does, finds each input
// partition's entry in its own ledger partition and takes its silence
// about a record produced now as "never sent" (Covers); the bridge's own
// check of the topic accepts it. Without the ageing (a ledger the bridge
// creates at start-up) it does not.
func TestAgeLedger(t *testing.T) {
	for _, tc := range []struct {
		name   string
		age    time.Duration
		covers bool
	}{
		{"aged 2h", 2 * time.Hour, true},
		{"new", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sc := DefaultScenario()
			sc.Partitions, sc.Keys = 4, 50
			st, err := startStack(ctx, sc, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			group := st.bridgeGroupOf("key")
			topic := config.DefaultLedgerTopic(group)
			cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...), kgo.RecordPartitioner(ledger.Partitioner(topic)))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if tc.age > 0 {
				if err := st.ageLedger(ctx, group, sc.Partitions, tc.age); err != nil {
					t.Fatal(err)
				}
			}
			// What the bridge does at start-up (service.buildLedger, with
			// its defaults): it must accept a topic the bench made.
			created, err := ledger.Ensure(ctx, cl, topic, st.topics.Inputs(), ledger.DefaultWindow, -1)
			if err != nil {
				t.Fatalf("the bridge's check of the ledger topic: %v", err)
			}
			if created != (tc.age == 0) {
				t.Errorf("the bridge's Ensure created the topic: %v", created)
			}

			// One input record on each partition, produced now.
			in, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			var recs []*kgo.Record
			for p := range sc.Partitions {
				recs = append(recs, &kgo.Record{Topic: st.inputTopic(), Partition: p, Value: []byte("x")})
			}
			if err := in.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}

			l, err := ledger.New(ledger.Options{Client: cl, ReaderOpts: []kgo.Opt{kgo.SeedBrokers(st.Brokers...)}, Topic: topic})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for _, rec := range recs {
				e, err := l.Lookup(ctx, rec, 1, ledger.Accrual, ledgerAgeTxPrefix+strconv.Itoa(int(rec.Partition)))
				if err != nil {
					t.Fatalf("partition %d: %v", rec.Partition, err)
				}
				switch {
				case tc.age == 0 && e != nil:
					t.Errorf("partition %d: entry %+v in a new ledger", rec.Partition, e)
				case tc.age > 0 && (e == nil || e.State != ledger.Settled || e.Partition != rec.Partition ||
					e.At.After(time.Now().Add(-tc.age)) || e.At.Before(time.Now().Add(-tc.age-time.Minute))):
					t.Errorf("partition %d: entry %+v, want one settled %s ago", rec.Partition, e, tc.age)
				}
				if got := l.Covers(rec); got != tc.covers {
					t.Errorf("partition %d: Covers = %v, want %v", rec.Partition, got, tc.covers)
				}
			}
			if eventIndex([]byte(ledgerAgeTxPrefix+"0")) != -1 {
				t.Errorf("the ageing entries' transactionIds read as an event's")
			}
		})
	}
}
