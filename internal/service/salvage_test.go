package service

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// TestSalvageSettledWritesLedgerEntriesOnly: of an aborted exactly-once
// round's outputs, the service's Salvage writes the ledger's settled
// entries outside the transaction, where a restore reads them, and leaves
// the others (replies and error events go with the round, redone).
func TestSalvageSettledWritesLedgerEntriesOnly(t *testing.T) {
	const topic = "g.ledger"
	k := testkit.StartKafka(t, testkit.KafkaOptions{Topics: []testkit.TopicSet{{Partitions: 1, Names: []string{topic, "purchase.result"}}}})
	open := func() *ledger.Ledger {
		l, err := ledger.New(ledger.Options{Client: k.Client(t, kgo.RecordPartitioner(ledger.Partitioner(topic))), Topic: topic,
			ReaderOpts: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := open()
	in := &kgo.Record{Topic: "purchase", Partition: 0, Offset: 7}
	points := int64(3)
	settled, err := a.Settle(in, ledger.Entry{Kind: ledger.Accrual, TransactionID: "t-1", Outcome: "APPLIED", Points: &points})
	if err != nil {
		t.Fatal(err)
	}
	reply := &kgo.Record{Topic: "purchase.result", Partition: 0, Key: []byte("t-1"), Value: []byte("a reply")}
	if err := salvageSettled(a)(ctx, []*kgo.Record{reply, settled}); err != nil {
		t.Fatal(err)
	}
	b := open()
	if _, err := b.Lookup(ctx, in, 1, ledger.Accrual, "t-0"); err != nil { // restores the partition
		t.Fatal(err)
	}
	if e, err := b.Lookup(ctx, in, 1, ledger.Accrual, "t-1"); err != nil || e == nil || e.State != ledger.Settled {
		t.Errorf("the salvaged entry, read by another process: %+v, %v; want it settled", e, err)
	}
	ends, err := kadm.NewClient(k.Client(t)).ListEndOffsets(ctx, "purchase.result")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := ends.Lookup("purchase.result", 0); !ok || o.Err != nil || o.Offset != 0 {
		t.Errorf("the reply topic's end: %+v, want 0: a reply is not salvaged", o)
	}
}
