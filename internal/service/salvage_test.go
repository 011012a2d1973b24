package service

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
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

// TestExactlyOnceSalvagedEntryAnswersTheNextOwner: a member whose round
// cannot commit after its partner write was answered (here its offsets
// refused, which stops it) writes the write's settled ledger entry outside
// the transaction; the member taking the partition over answers the
// record from it, without asking the partner whether the write landed.
func TestExactlyOnceSalvagedEntryAnswersTheNextOwner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := newStackWith(t, 1, sim.Options{Members: 50})
	if s.Cluster == nil {
		t.Skip("refusing one round's offsets needs kfake's request control")
	}
	cfg := stackConfig(t, s, func(c *config.Config) {
		c.Delivery.Mode = pipeline.ExactlyOnce
		c.Delivery.TransactionalID = realkafka.Name(t, "txn")
		c.Processing.TakeoverWait = 6 * time.Second // --api-timeout 3s plus the apply window, 2 s
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	committed := func() int64 {
		offs, err := adm.FetchOffsets(ctx, s.Group)
		if err != nil {
			return -1
		}
		o, ok := offs.Lookup(s.Topics.Purchase, 0)
		if !ok {
			return -1
		}
		return o.At
	}
	a := runService(ctx, t, cfg)
	send := eventProducer(ctx, t, s.Brokers, a)
	purchase := func(id string) {
		send(s.Topics.Purchase, id, &events.PurchaseCompleted{TransactionID: id, LoyaltyID: sim.MemberID(1), Amount: 100_000,
			TransactionDate: time.Now(), Currency: "THB"})
	}
	purchase("warm-up")
	waitFor(t, "the first round's commit", 30*time.Second, func() bool { return committed() == 1 })
	// The next round's offsets are refused with an error that ends the
	// transaction, and the member, after the partner applied the write.
	s.Cluster.ControlKey(int16(kmsg.TxnOffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		return testkit.RefuseTxnOffsetCommit(req, kerr.GroupAuthorizationFailed.Code), nil, true
	})
	purchase("p-1")
	select {
	case err := <-a.done:
		if err == nil {
			t.Fatal("the member whose offsets were refused stopped without an error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the member whose offsets were refused did not stop")
	}
	if n := s.Sim.Effects("p-1"); n != 1 {
		t.Fatalf("p-1 applied %d times before its round failed, want once", n)
	}
	lookups := s.Sim.TotalCalls(sim.EndpointLookup)
	runService(ctx, t, cfg)
	waitFor(t, "the next owner's commit of p-1", 30*time.Second, func() bool { return committed() == 2 })
	if n := s.Sim.Effects("p-1"); n != 1 {
		t.Errorf("p-1 applied %d times, want once", n)
	}
	if n := s.Sim.TotalCalls(sim.EndpointLookup) - lookups; n != 0 {
		t.Errorf("the next owner looked p-1 up %d times, want it answered from the salvaged ledger entry", n)
	}
}
