package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/topicseed"
)

// TestMain checks that no test leaves a goroutine behind, but one of
// kfake's own: its run loop, resuming a control function that slept
// (TestWriteSettledEndsWithItsContext holds a produce until the test ends)
// as the cluster closes, can wait on kfake's control lock for ever (seen
// once in three loaded soak runs of the package).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).continueSleptControl"))
}

// world is one test's cluster and names: kfake, or the real cluster
// LOYALTY_BRIDGE_TEST_BROKERS names (unique topics, deleted after).
type world struct {
	brokers      []string
	input, topic string
	disk         bool // each process's ledger keeps its entries on disk
}

// eachStore runs test against the memory store and the disk store.
func eachStore(t *testing.T, test func(t *testing.T, disk bool)) {
	t.Helper()
	for _, disk := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "disk"}[disk], func(t *testing.T) { test(t, disk) })
	}
}

// on is w with the store eachStore chose.
func (w world) on(disk bool) world { w.disk = disk; return w }

// cluster is a cluster with an input topic of 4 partitions.
func cluster(t testing.TB) world {
	t.Helper()
	if seeds := realkafka.Seeds(); len(seeds) > 0 {
		w := world{brokers: seeds, input: realkafka.Name(t, "in"), topic: realkafka.Name(t, "ledger")}
		realkafka.SeedTopics(t, seeds, 4, w.input)
		realkafka.DeleteAtEnd(t, seeds, []string{w.topic})
		return w
	}
	k := testkit.StartKafka(t, testkit.KafkaOptions{Topics: []testkit.TopicSet{{Partitions: 4, Names: []string{"loyalty.purchase"}}}})
	return world{brokers: k.Brokers, input: "loyalty.purchase", topic: "g.ledger"}
}

func (w world) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(w.brokers...), kgo.RecordPartitioner(ledger.Partitioner(w.topic))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// open is one process's ledger over a client of its own; on disk, in a
// directory of its own.
func (w world) open(t *testing.T, now func() time.Time) (*ledger.Ledger, *kgo.Client) {
	t.Helper()
	dir := ""
	if w.disk {
		dir = t.TempDir()
	}
	return w.openIn(t, now, dir)
}

// openIn is open with the disk store under dir ("": in memory), closed at
// the test's end.
func (w world) openIn(t *testing.T, now func() time.Time, dir string) (*ledger.Ledger, *kgo.Client) {
	t.Helper()
	cl := w.client(t)
	if _, err := ledger.Ensure(ctxT(t), cl, w.topic, []string{w.input}, ledger.DefaultWindow, -1); err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Options{Client: cl, ReaderOpts: []kgo.Opt{kgo.SeedBrokers(w.brokers...)}, Topic: w.topic, Now: now, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l, cl
}

func (w world) rec(partition int32, offset int64) *kgo.Record {
	return &kgo.Record{Topic: w.input, Partition: partition, Offset: offset}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (w world) lookup(t *testing.T, l *ledger.Ledger, partition int32, assignment uint64, kind ledger.Kind, id string) *ledger.Entry {
	t.Helper()
	e, err := l.Lookup(ctxT(t), w.rec(partition, 0), assignment, kind, id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// What one process wrote, another reads back from Kafka: intents,
// settled outcomes (the latest state wins), each kind apart, each
// partition apart.
func TestLedgerIsReadBack(t *testing.T) { eachStore(t, testLedgerIsReadBack) }

func testLedgerIsReadBack(t *testing.T, disk bool) {
	w := cluster(t).on(disk)
	a, acl := w.open(t, nil)
	ctx := ctxT(t)
	if err := a.Intend(ctx, w.rec(1, 10), ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-1"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Intend(ctx, w.rec(1, 11), ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-2"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Intend(ctx, w.rec(2, 5), ledger.Entry{Kind: ledger.Refund, TransactionID: "f-1", ClawbackID: "p-9~cb2"}); err != nil {
		t.Fatal(err)
	}
	points := int64(70)
	settled, err := a.Settle(w.rec(1, 10), ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-1", Outcome: "APPLIED", Points: &points, BitReference: "BIT1"})
	if err != nil {
		t.Fatal(err)
	}
	if settled.Topic != w.topic || settled.Partition != 1 || string(settled.Key) != "a/p-1" {
		t.Fatalf("settled entry goes to %s/%d key %q; want %s/1 key a/p-1", settled.Topic, settled.Partition, settled.Key, w.topic)
	}
	if err := acl.ProduceSync(ctx, settled).FirstErr(); err != nil {
		t.Fatal(err)
	}

	b, _ := w.open(t, nil)
	cases := []struct {
		partition int32
		kind      ledger.Kind
		id        string
		state     ledger.State // "" for none
		slot      string
	}{
		{1, ledger.Accrual, "p-1", ledger.Settled, ""},
		{1, ledger.Accrual, "p-2", ledger.Intent, ""},
		{1, ledger.Redemption, "p-1", "", ""}, // another kind
		{2, ledger.Accrual, "p-1", "", ""},    // another partition
		{2, ledger.Refund, "f-1", ledger.Intent, "p-9~cb2"},
		{3, ledger.Accrual, "nothing", "", ""},
	}
	for _, tc := range cases {
		e := w.lookup(t, b, tc.partition, 1, tc.kind, tc.id)
		switch {
		case tc.state == "" && e != nil:
			t.Errorf("%d %s: found %+v, want none", tc.partition, ledger.Key(tc.kind, tc.id), e)
		case tc.state != "" && (e == nil || e.State != tc.state || e.ClawbackID != tc.slot):
			t.Errorf("%d %s: %+v, want state %s slot %q", tc.partition, ledger.Key(tc.kind, tc.id), e, tc.state, tc.slot)
		}
	}
	if e := w.lookup(t, b, 1, 1, ledger.Accrual, "p-1"); e == nil || e.Points == nil || *e.Points != 70 || e.BitReference != "BIT1" || e.Offset != 10 {
		t.Errorf("settled p-1 read back as %+v, want points 70, BIT1, offset 10", e)
	}
}

// A process keeps reading a partition once it has read it (the tail):
// what another member writes meanwhile reaches it under the same
// assignment, and a new assignment catches up.
func TestLedgerCatchesUpOnAssignment(t *testing.T) { eachStore(t, testLedgerCatchesUpOnAssignment) }

func testLedgerCatchesUpOnAssignment(t *testing.T, disk bool) {
	w := cluster(t).on(disk)
	a, acl := w.open(t, nil)
	b, _ := w.open(t, nil)
	if e := w.lookup(t, b, 0, 1, ledger.Accrual, "p-1"); e != nil {
		t.Fatalf("found %+v before anything was written", e)
	}
	if err := a.Intend(ctxT(t), w.rec(0, 1), ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-1"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if e := w.lookup(t, b, 0, 1, ledger.Accrual, "p-1"); e != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("another writer's intent never read under the same assignment")
		}
		time.Sleep(5 * time.Millisecond) // polling, with a deadline
	}
	if e := w.lookup(t, b, 0, 2, ledger.Accrual, "p-1"); e == nil || e.State != ledger.Intent {
		t.Fatalf("under a new assignment: %+v, want the intent", e)
	}
	// The writer's own settled outcome, still on its way to Kafka, is not
	// hidden by its intent read back.
	settled, err := a.Settle(w.rec(0, 1), ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-1", Outcome: "APPLIED"})
	if err != nil {
		t.Fatal(err)
	}
	if e := w.lookup(t, a, 0, 3, ledger.Accrual, "p-1"); e == nil || e.State != ledger.Settled {
		t.Fatalf("the writer's settled entry after reading its intent back: %+v", e)
	}
	// Written to Kafka, the settled outcome replaces the intent the other
	// process holds, under the same assignment (the tail).
	if err := acl.ProduceSync(ctxT(t), settled).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if e := w.lookup(t, b, 0, 2, ledger.Accrual, "p-1"); e != nil && e.State == ledger.Settled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("another writer's settled outcome never replaced its intent under the same assignment")
		}
		time.Sleep(5 * time.Millisecond) // polling, with a deadline
	}
	// Revoked: forgotten, memory freed (on disk, the entries stay);
	// asked again, read again.
	b.Forget(w.input, 0)
	if n, want := b.Size(w.input, 0), map[bool]int{false: 0, true: 1}[disk]; n != want {
		t.Fatalf("%d entries kept after Forget, want %d", n, want)
	}
	if e := w.lookup(t, b, 0, 2, ledger.Accrual, "p-1"); e == nil {
		t.Fatal("after Forget, the partition was not read again")
	}
}

// Entries older than the window are forgotten, read back or kept.
func TestLedgerForgetsPastTheWindow(t *testing.T) { eachStore(t, testLedgerForgetsPastTheWindow) }

func testLedgerForgetsPastTheWindow(t *testing.T, disk bool) {
	w := cluster(t).on(disk)
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a, _ := w.open(t, clock)
	if err := a.Intend(ctxT(t), w.rec(0, 1), ledger.Entry{Kind: ledger.Accrual, TransactionID: "old"}); err != nil {
		t.Fatal(err)
	}
	// "edge" is made exactly a window before the lookups: still inside.
	now = now.Add(time.Minute)
	if err := a.Intend(ctxT(t), w.rec(0, 3), ledger.Entry{Kind: ledger.Accrual, TransactionID: "edge"}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(ledger.DefaultWindow - 2*time.Minute)
	if err := a.Intend(ctxT(t), w.rec(0, 2), ledger.Entry{Kind: ledger.Accrual, TransactionID: "young"}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	b, _ := w.open(t, clock)
	for _, l := range []*ledger.Ledger{a, b} {
		if e := w.lookup(t, l, 0, 1, ledger.Accrual, "old"); e != nil {
			t.Errorf("an entry past the window: %+v", e)
		}
		for _, id := range []string{"young", "edge"} {
			if e := w.lookup(t, l, 0, 1, ledger.Accrual, id); e == nil {
				t.Errorf("an entry inside the window (%s) is gone", id)
			}
		}
	}
	// The disk store forgets in the background: its sweep ends soon.
	deadline := time.Now().Add(10 * time.Second)
	n := a.Size(w.input, 0)
	for ; n != 2 && disk && time.Now().Before(deadline); n = a.Size(w.input, 0) {
		if err := waitCtx(ctxT(t), 5*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if n != 2 {
		t.Errorf("the writer keeps %d entries, want 2", n)
	}
}

// A memory store scans its entries for old ones each time the window has
// moved by a 24th of itself (an hour of a day): an entry outlives the
// window by that much at most, and not a moment more.
func TestLedgerScansEachTwentyFourthOfTheWindow(t *testing.T) {
	w := cluster(t)
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var shift atomic.Int64
	clock := func() time.Time { return start.Add(time.Duration(shift.Load())) }
	a, _ := w.open(t, clock)
	if err := a.Intend(ctxT(t), w.rec(0, 1), ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-1"}); err != nil {
		t.Fatal(err)
	}
	// A lookup a window and a minute later scans (the first): p-1 is past
	// the window, and forgotten.
	shift.Store(int64(ledger.DefaultWindow + time.Minute))
	if e := w.lookup(t, a, 0, 1, ledger.Accrual, "p-2"); e != nil || a.Size(w.input, 0) != 0 {
		t.Fatalf("found %+v, %d entries kept; want p-1 forgotten", e, a.Size(w.input, 0))
	}
	// p-2, made then, is past the window from 2W + 1 min on. A lookup at
	// 2W + 1 min - 30 min scans (the last scan was a day ago) and keeps
	// it; the next scan comes exactly an hour later, not before.
	if err := a.Intend(ctxT(t), w.rec(0, 2), ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-2"}); err != nil {
		t.Fatal(err)
	}
	scan := 2*ledger.DefaultWindow + time.Minute - 30*time.Minute
	for _, step := range []struct {
		at   time.Duration // since start
		kept int
	}{
		{scan, 1},
		{scan + ledger.DefaultWindow/24 - time.Millisecond, 1}, // p-2 past the window, no scan yet
		{scan + ledger.DefaultWindow/24, 0},
	} {
		shift.Store(int64(step.at))
		_ = w.lookup(t, a, 0, 1, ledger.Accrual, "p-3")
		if n := a.Size(w.input, 0); n != step.kept {
			t.Fatalf("at start + %s: %d entries kept, want %d", step.at, n, step.kept)
		}
	}
}

// Settled entries travel in exactly-once mode's transactions: an aborted
// round's entry is never read back, a committed one is, and an intent
// written after an aborted transaction is not missed.
func TestLedgerReadsCommittedOnly(t *testing.T) { eachStore(t, testLedgerReadsCommittedOnly) }

func testLedgerReadsCommittedOnly(t *testing.T, disk bool) {
	w := cluster(t).on(disk)
	a, _ := w.open(t, nil)
	ctx := ctxT(t)
	tx := w.client(t, kgo.TransactionalID(w.topic+"-tx"))
	points := int64(5)
	for _, commit := range []kgo.TransactionEndTry{kgo.TryAbort, kgo.TryCommit} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		id := "aborted"
		if commit {
			id = "committed"
		}
		r, err := a.Settle(w.rec(0, 1), ledger.Entry{Kind: ledger.Accrual, TransactionID: id, Outcome: "APPLIED", Points: &points})
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Intend(ctx, w.rec(0, 2), ledger.Entry{Kind: ledger.Accrual, TransactionID: "after"}); err != nil {
		t.Fatal(err)
	}
	b, _ := w.open(t, nil)
	if e := w.lookup(t, b, 0, 1, ledger.Accrual, "aborted"); e != nil {
		t.Errorf("an aborted entry was read back: %+v", e)
	}
	if e := w.lookup(t, b, 0, 1, ledger.Accrual, "committed"); e == nil || e.State != ledger.Settled {
		t.Errorf("committed entry: %+v", e)
	}
	if e := w.lookup(t, b, 0, 1, ledger.Accrual, "after"); e == nil {
		t.Error("the intent after the transactions was missed")
	}
}

// An exactly-once round that aborts after its writes were answered loses
// the settled entries its transaction carried; written again outside it
// (WriteSettled), the next owner's restore reads them. An entry of another
// topic is refused, and nothing of the call is written.
func TestWriteSettledOutlivesAnAbortedRound(t *testing.T) { eachStore(t, testWriteSettled) }

func testWriteSettled(t *testing.T, disk bool) {
	w := cluster(t).on(disk)
	a, _ := w.open(t, nil)
	ctx := ctxT(t)
	tx := w.client(t, kgo.TransactionalID(w.topic+"-tx"))
	points := int64(5)
	settle := func(offset int64, id string) *kgo.Record {
		r, err := a.Settle(w.rec(0, offset), ledger.Entry{Kind: ledger.Accrual, TransactionID: id, Outcome: "APPLIED", Points: &points})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	salvaged, lost := settle(1, "salvaged"), settle(2, "lost")
	if err := tx.ProduceSync(ctx, salvaged, lost).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	again := func(r *kgo.Record) *kgo.Record {
		return &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers}
	}
	if err := a.WriteSettled(ctx, []*kgo.Record{again(salvaged)}); err != nil {
		t.Fatal(err)
	}
	err := a.WriteSettled(ctx, []*kgo.Record{again(lost), {Topic: "loyalty.purchase.result", Value: []byte("x")}})
	if err == nil || !strings.Contains(err.Error(), `"loyalty.purchase.result"`) {
		t.Errorf("an entry of another topic: %v, want it refused by name", err)
	}
	b, _ := w.open(t, nil)
	if e := w.lookup(t, b, 0, 1, ledger.Accrual, "salvaged"); e == nil || e.State != ledger.Settled || e.Points == nil || *e.Points != 5 {
		t.Errorf("the entry written again: %+v, want it settled with 5 points", e)
	}
	if e := w.lookup(t, b, 0, 1, ledger.Accrual, "lost"); e != nil {
		t.Errorf("the aborted entry not written again was read back: %+v", e)
	}
}

// WriteSettled gives up when its context ends, though Kafka never answers
// the produce it sent: an aborting round of a member cut off from Kafka
// must not wait for ever (ProduceSync would: a record in flight waits for
// its answer whatever the context says).
func TestWriteSettledEndsWithItsContext(t *testing.T) {
	k := testkit.StartKafka(t, testkit.KafkaOptions{Topics: []testkit.TopicSet{{Partitions: 1, Names: []string{"loyalty.purchase", "g.ledger"}}}})
	answer := make(chan struct{})
	t.Cleanup(func() { close(answer) })
	k.Fake.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.Fake.SleepControl(func() { <-answer }) // held until the test ends
		return nil, nil, false
	})
	cl := k.Client(t, kgo.RecordPartitioner(ledger.Partitioner("g.ledger")))
	l, err := ledger.New(ledger.Options{Client: cl, ReaderOpts: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topic: "g.ledger"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	r, err := l.Settle(&kgo.Record{Topic: "loyalty.purchase"}, ledger.Entry{Kind: ledger.Accrual, TransactionID: "t", Outcome: "APPLIED"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.WriteSettled(ctx, []*kgo.Record{r}) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("WriteSettled with Kafka silent: %v, want its context's deadline", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WriteSettled outlived its context by 30 s: Kafka's answer was waited for")
	}
}

// The topic is created to fit, and one that does not fit is refused with
// what to change.
func TestEnsure(t *testing.T) {
	w := cluster(t)
	cl := w.client(t)
	ctx := ctxT(t)
	created, err := ledger.Ensure(ctx, cl, w.topic, []string{w.input}, ledger.DefaultWindow, -1)
	if err != nil || !created {
		t.Fatalf("Ensure: created %v, %v", created, err)
	}
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx, w.topic)
	if err != nil || len(td[w.topic].Partitions) != 4 {
		t.Fatalf("created with %d partitions (%v), want 4", len(td[w.topic].Partitions), err)
	}
	if created, err := ledger.Ensure(ctx, cl, w.topic, []string{w.input}, ledger.DefaultWindow, -1); err != nil || created {
		t.Fatalf("again: created %v, %v; want it accepted as it is", created, err)
	}
	str := func(s string) *string { return &s }
	bad := []struct {
		name       string
		partitions int32
		configs    map[string]*string
		wantErr    string
	}{
		{"few", 2, nil, "2 partitions, fewer than an input topic's 4"},
		{"deleting", 4, map[string]*string{"cleanup.policy": str("delete")}, "cleanup.policy=delete must include compact"},
		{"brief", 4, map[string]*string{"cleanup.policy": str("compact"), "retention.ms": str("60000")}, "retention.ms=60000 is below the dedup window"},
	}
	// A topic the brokers refuse to create (more replicas than brokers):
	// the refusal, at once (not a wait for the topic to appear), with what
	// to do.
	refused := w.topic + ".refused"
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if created, err := ledger.Ensure(short, cl, refused, []string{w.input}, ledger.DefaultWindow, 1000); created || err == nil ||
		!strings.Contains(err.Error(), "create with 4 partitions") || !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("Ensure with 1000 replicas: created %v, %v; want the brokers' refusal", created, err)
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			name := w.topic + "." + tc.name
			if seeds := realkafka.Seeds(); len(seeds) > 0 {
				realkafka.DeleteAtEnd(t, seeds, []string{name})
			}
			if _, err := adm.CreateTopic(ctx, tc.partitions, -1, tc.configs, name); err != nil {
				t.Fatal(err)
			}
			_, err := ledger.Ensure(ctx, cl, name, []string{w.input}, ledger.DefaultWindow, -1)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Ensure: %v; want an error saying %q", err, tc.wantErr)
			}
		})
	}
}

// The ledger's silence means "never sent" only for records produced well
// after its first entry in the partition, and younger than the window.
func TestLedgerCovers(t *testing.T) { eachStore(t, testLedgerCovers) }

func testLedgerCovers(t *testing.T, disk bool) {
	w := cluster(t).on(disk)
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	now := start
	a, _ := w.open(t, func() time.Time { return now })
	at := func(ts time.Time) *kgo.Record { r := w.rec(0, 9); r.Timestamp = ts; return r }
	w.lookup(t, a, 0, 1, ledger.Accrual, "x")
	if a.Covers(at(now)) {
		t.Fatal("an empty partition speaks for its records")
	}
	if err := a.Intend(ctxT(t), w.rec(0, 1), ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-1"}); err != nil {
		t.Fatal(err)
	}
	// A later entry leaves the first one first.
	now = start.Add(2 * time.Hour)
	if err := a.Intend(ctxT(t), w.rec(0, 2), ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-2"}); err != nil {
		t.Fatal(err)
	}
	if e := w.lookup(t, a, 0, 1, ledger.Accrual, "p-2"); e == nil {
		t.Fatal("p-2 not read back")
	}
	now = start.Add(3 * time.Hour)
	cases := []struct {
		name string
		ts   time.Time
		want bool
	}{
		{"produced before the first entry", start.Add(-time.Minute), false},
		{"produced within the rollout margin", start.Add(ledger.RolloutMargin - time.Minute), false},
		{"produced exactly the rollout margin after it", start.Add(ledger.RolloutMargin), false},
		{"produced a millisecond later", start.Add(ledger.RolloutMargin + time.Millisecond), true},
		{"produced after it", start.Add(ledger.RolloutMargin + time.Minute), true},
		{"older than the window", now.Add(-ledger.DefaultWindow), false},
	}
	for _, tc := range cases {
		if got := a.Covers(at(tc.ts)); got != tc.want {
			t.Errorf("%s: Covers %v, want %v", tc.name, got, tc.want)
		}
	}
	// A record exactly the window less DefaultSkew old may have had its
	// entries deleted; one a millisecond younger has not. Later, so that
	// both were produced well after the first entry.
	now = start.Add(ledger.DefaultWindow + 2*time.Hour)
	for _, tc := range []struct {
		name string
		age  time.Duration
		want bool
	}{
		{"exactly the window less the skew old", ledger.DefaultWindow - ledger.DefaultSkew, false},
		{"a millisecond younger", ledger.DefaultWindow - ledger.DefaultSkew - time.Millisecond, true},
	} {
		if got := a.Covers(at(now.Add(-tc.age))); got != tc.want {
			t.Errorf("%s: Covers %v, want %v", tc.name, got, tc.want)
		}
	}
	now = start.Add(3 * time.Hour)
	b, _ := w.open(t, func() time.Time { return now })
	if b.Covers(at(start.Add(2 * time.Hour))) {
		t.Error("a partition not read yet speaks for its records")
	}
	w.lookup(t, b, 0, 1, ledger.Accrual, "x")
	if !b.Covers(at(start.Add(2 * time.Hour))) {
		t.Error("read back, the partition's first entry is forgotten")
	}
}

// A partition whose last records are a committed transaction (exactly-once
// mode's settled entries) ends in a transaction marker, which a
// read_committed reader never sees as a record: the read still ends, and
// does not wait for someone to write after it (every member restoring
// would wait for the others, and nobody would write).
func TestLedgerReadEndsAtATransactionMarker(t *testing.T) {
	for _, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			eachStore(t, func(t *testing.T, disk bool) {
				w := cluster(t).on(disk)
				a, _ := w.open(t, nil)
				ctx := ctxT(t)
				tx := w.client(t, kgo.TransactionalID(w.topic+"-marker"))
				if err := tx.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				r, err := a.Settle(w.rec(0, 1), ledger.Entry{Kind: ledger.Accrual, TransactionID: "last", Outcome: "APPLIED"})
				if err != nil {
					t.Fatal(err)
				}
				if err := tx.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatal(err)
				}
				if err := tx.EndTransaction(ctx, commit); err != nil {
					t.Fatal(err)
				}
				b, _ := w.open(t, nil)
				short, cancel := context.WithTimeout(ctx, 15*time.Second)
				defer cancel()
				e, err := b.Lookup(short, w.rec(0, 2), 1, ledger.Accrual, "last")
				if err != nil {
					t.Fatalf("reading a partition that ends in a transaction marker: %v", err)
				}
				if bool(commit) != (e != nil && e.State == ledger.Settled) {
					t.Fatalf("the entry of a transaction committed %v: %+v", commit, e)
				}
			})
		})
	}
}

// Intents written at once by many records are each acknowledged to their
// own caller and durable (another process reads every one back); after
// Close, Intend fails and writes nothing.
func TestConcurrentIntentsThenClose(t *testing.T) {
	w := cluster(t)
	a, _ := w.open(t, nil)
	ctx := ctxT(t)
	const n = 200
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- a.Intend(ctx, w.rec(int32(i%4), int64(i)), ledger.Entry{Kind: ledger.Accrual, TransactionID: fmt.Sprintf("p-%d", i)})
		}()
	}
	for range n {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatal("intents not all acknowledged")
		}
	}
	a.Close()
	if err := a.Intend(ctx, w.rec(0, n), ledger.Entry{Kind: ledger.Accrual, TransactionID: "after-close"}); err == nil {
		t.Fatal("Intend after Close succeeded")
	}
	b, _ := w.open(t, nil)
	for i := range n {
		if e := w.lookup(t, b, int32(i%4), 1, ledger.Accrual, fmt.Sprintf("p-%d", i)); e == nil || e.State != ledger.Intent {
			t.Fatalf("p-%d read back as %+v, want its intent", i, e)
		}
	}
	if e := w.lookup(t, b, 0, 1, ledger.Accrual, "after-close"); e != nil {
		t.Fatalf("intent made after Close read back: %+v", e)
	}
}

// A partition's read fails, naming the ledger topic and what is wrong,
// when the topic does not exist or has no partition of the input
// record's number; nothing is answered from a ledger not read.
func TestLookupWithoutItsLedgerPartition(t *testing.T) {
	w := cluster(t)
	cl := w.client(t)
	ctx := ctxT(t)
	few := w.topic + ".few"
	if seeds := realkafka.Seeds(); len(seeds) > 0 {
		realkafka.DeleteAtEnd(t, seeds, []string{few})
	}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, -1, nil, few); err != nil {
		t.Fatal(err)
	}
	// A real broker lists a new topic a moment after CreateTopics answers;
	// Ensure waits the same way.
	if err := topicseed.Wait(ctx, cl, 2, few); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		topic     string
		partition int32
		want      string
		is        error // nil: none
	}{
		{"no such topic", w.topic + ".missing", 0, "metadata of " + w.topic + ".missing", kerr.UnknownTopicOrPartition},
		{"too few partitions", few, 3, "end of " + few + "/3: no such partition", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := ledger.New(ledger.Options{Client: cl, ReaderOpts: []kgo.Opt{kgo.SeedBrokers(w.brokers...)}, Topic: tc.topic})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			e, err := l.Lookup(ctx, w.rec(tc.partition, 0), 1, ledger.Accrual, "p-1")
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("Lookup: %+v, %v; want an error saying %q (is %v)", e, err, tc.want, tc.is)
			}
		})
	}
}
