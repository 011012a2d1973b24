package ledger_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// twoInputs is a cluster with two input topics of 4 partitions, whose
// partition 0s share ledger partition 0, and a ledger over it logging to
// logs.
func twoInputs(t *testing.T) (w world, second string, l *ledger.Ledger, logs *observer.ObservedLogs) {
	t.Helper()
	if seeds := realkafka.Seeds(); len(seeds) > 0 {
		w = world{brokers: seeds, input: realkafka.Name(t, "in"), topic: realkafka.Name(t, "ledger")}
		second = realkafka.Name(t, "in2")
		realkafka.SeedTopics(t, seeds, 4, w.input, second)
		realkafka.DeleteAtEnd(t, seeds, []string{w.topic})
	} else {
		k := testkit.StartKafka(t, testkit.KafkaOptions{Topics: []testkit.TopicSet{{Partitions: 4, Names: []string{"loyalty.purchase", "loyalty.refund-redemption"}}}})
		w, second = world{brokers: k.Brokers, input: "loyalty.purchase", topic: "g.ledger"}, "loyalty.refund-redemption"
	}
	cl := w.client(t)
	if _, err := ledger.Ensure(ctxT(t), cl, w.topic, []string{w.input, second}, ledger.DefaultWindow, -1); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	l, err := ledger.New(ledger.Options{Client: cl, ReaderOpts: []kgo.Opt{kgo.SeedBrokers(w.brokers...)}, Topic: w.topic, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return w, second, l, logs
}

// The tail reads a ledger partition while any input topic's store of it
// is kept: forgetting one input topic's partition leaves the other's
// followed, forgetting both stops the reading, and forgetting a store
// already forgotten changes nothing.
func TestTailFollowsWhileAStoreIsKept(t *testing.T) {
	w, second, l, _ := twoInputs(t)
	for _, topic := range []string{w.input, second} {
		_, wt, err := l.Watch(ctxT(t), &kgo.Record{Topic: topic, Partition: 0, Offset: 1}, 1, ledger.Accrual, "p-"+topic)
		if err != nil {
			t.Fatal(err)
		}
		wt.Close()
	}
	both := []string{w.input, second}
	slices.Sort(both)
	if got := l.Following()[0]; !slices.Equal(got, both) {
		t.Fatalf("ledger partition 0 delivers to %v, want %v", got, both)
	}
	l.Forget(w.input, 0)
	if got := l.Following()[0]; !slices.Equal(got, []string{second}) {
		t.Fatalf("after forgetting %s/0, ledger partition 0 delivers to %v, want [%s]", w.input, got, second)
	}
	l.Forget(w.input, 0) // again: nothing of it is left to stop
	if got := l.Following()[0]; !slices.Equal(got, []string{second}) {
		t.Fatalf("after forgetting %s/0 twice, ledger partition 0 delivers to %v, want [%s]", w.input, got, second)
	}
	l.Forget(second, 0)
	if got, ok := l.Following()[0]; ok {
		t.Fatalf("after forgetting both, ledger partition 0 is still read for %v", got)
	}
}

// Closing one of two watches of a key leaves the other, which still gets
// what the tail reads; closing the last removes the key; closing again
// changes nothing.
func TestWatchCloseRemovesOnlyItself(t *testing.T) {
	w := cluster(t)
	a, _ := w.open(t, nil)
	b, _ := w.open(t, nil)
	_, w1 := w.watch(t, a, "p-1")
	_, w2 := w.watch(t, a, "p-1")
	key := ledger.Key(ledger.Accrual, "p-1")
	w1.Close()
	if got := a.Watches(0, key); len(got) != 1 || got[0] != w2 {
		t.Fatalf("after closing one of two watches: %d left, the other kept %v", len(got), len(got) == 1 && got[0] == w2)
	}
	// The watch left still hears of another writer's intent.
	_, wb := w.watch(t, b, "p-1")
	intendHeed(t, wb, "p-1")
	if h := intendHeed(t, w2, "p-1"); h.Intent == nil {
		t.Fatalf("the watch left did not heed the other writer's intent: %+v", h)
	}
	w2.Close()
	if n := a.WatchedKeys(0); n != 0 {
		t.Fatalf("after closing every watch, %d keys are still watched", n)
	}
	w2.Close()
	if n := a.WatchedKeys(0); n != 0 {
		t.Fatalf("after closing a watch twice, %d keys are watched", n)
	}
}

// An entry the tail reads is kept without a warning: the warning is for
// a store that failed to keep it.
func TestTailKeepsWithoutWarning(t *testing.T) {
	w, _, l, logs := twoInputs(t)
	other, _ := w.open(t, nil)
	_, wt, err := l.Watch(ctxT(t), w.rec(0, 1), 1, ledger.Accrual, "p-1")
	if err != nil {
		t.Fatal(err)
	}
	defer wt.Close()
	_, wo := w.watch(t, other, "p-1")
	intendHeed(t, wo, "p-1")
	if h := intendHeed(t, wt, "p-1"); h.Intent == nil {
		t.Fatalf("the other writer's intent was not read: %+v", h)
	}
	if n := logs.FilterMessageSnippet("not kept").Len(); n != 0 {
		t.Fatalf("%d warnings that an entry read by the tail was not kept: %v", n, logs.All())
	}
}

// A second input topic's store of a ledger partition the tail reads
// already catches up on what the tail read past the store's restore: the
// tail delivered it to the first topic's store only. The restore is made
// to end one entry short (kfake answers the end offset one low), as when
// the entry lands between the restore's end and the follow.
func TestSecondStoreCatchesUpWithTheTail(t *testing.T) {
	if len(realkafka.Seeds()) > 0 {
		t.Skip("needs kfake's ControlKey to answer an end offset one low")
	}
	k := testkit.StartKafka(t, testkit.KafkaOptions{Topics: []testkit.TopicSet{{Partitions: 4, Names: []string{"loyalty.purchase", "loyalty.refund-redemption"}}}})
	w, second := world{brokers: k.Brokers, input: "loyalty.purchase", topic: "g.ledger"}, "loyalty.refund-redemption"
	if _, err := ledger.Ensure(ctxT(t), w.client(t), w.topic, []string{w.input, second}, ledger.DefaultWindow, -1); err != nil {
		t.Fatal(err)
	}
	a, _ := w.open(t, nil)
	b, _ := w.open(t, nil)
	_, wa := w.watch(t, a, "p-1") // a's tail reads ledger partition 0 for the first topic
	defer wa.Close()
	_, wb, err := b.Watch(ctxT(t), &kgo.Record{Topic: second, Partition: 0, Offset: 1}, 1, ledger.Redemption, "r-1")
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Close()
	at, err := wb.Intend(ctxT(t), ledger.Entry{Kind: ledger.Redemption, TransactionID: "r-1"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		return a.TailPos(0) > at, fmt.Sprintf("a's tail is at %d, the intent at %d", a.TailPos(0), at)
	})
	var answered atomic.Bool
	k.Fake.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		lreq := req.(*kmsg.ListOffsetsRequest)
		resp := lreq.ResponseKind().(*kmsg.ListOffsetsResponse)
		low := false
		for _, rt := range lreq.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition = rp.Partition
				if rt.Topic == w.topic && rp.Partition == 0 && rp.Timestamp == -1 {
					sp.Offset, low = at, true // the intent's offset: the end one entry short
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if !low {
			k.Fake.KeepControl()
			return nil, nil, false
		}
		answered.Store(true)
		return resp, nil, true
	})
	e := w.lookupOn(t, a, second, "r-1")
	if !answered.Load() {
		t.Fatal("the restore never asked for the ledger partition's end")
	}
	if e == nil || e.State != ledger.Intent {
		t.Fatalf("the second topic's store lacks the intent the tail read past its restore: %+v", e)
	}
}

// lookupOn looks redemption id up in l for partition 0 of topic.
func (w world) lookupOn(t *testing.T, l *ledger.Ledger, topic, id string) *ledger.Entry {
	t.Helper()
	e, err := l.Lookup(ctxT(t), &kgo.Record{Topic: topic, Partition: 0, Offset: 0}, 1, ledger.Redemption, id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
