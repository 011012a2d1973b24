package ledger_test

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
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
