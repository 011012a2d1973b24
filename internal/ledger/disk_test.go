package ledger_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
)

// process is one process's ledger with its disk store under dir, and
// what it logs; Close is the test's to call (and called again at its end).
func (w world) process(t *testing.T, dir string) (*ledger.Ledger, *observer.ObservedLogs) {
	t.Helper()
	return w.processWith(t, dir, nil)
}

// processWith is process with its options changed by tune (nil: none).
func (w world) processWith(t *testing.T, dir string, tune func(*ledger.Options)) (*ledger.Ledger, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	cl := w.client(t)
	if _, err := ledger.Ensure(ctxT(t), cl, w.topic, []string{w.input}, ledger.DefaultWindow, -1); err != nil {
		t.Fatal(err)
	}
	o := ledger.Options{Client: cl, ReaderOpts: []kgo.Opt{kgo.SeedBrokers(w.brokers...)}, Topic: w.topic, Dir: dir, Logger: zap.New(core)}
	if tune != nil {
		tune(&o)
	}
	l, err := ledger.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, logs
}

// reads are the reads of the ledger partition logs shows: where each
// started and how many records it read.
func reads(logs *observer.ObservedLogs) (from []int64, records []int64) {
	for _, e := range logs.FilterMessage("ledger partition read").All() {
		m := e.ContextMap()
		from, records = append(from, m["from"].(int64)), append(records, m["records"].(int64))
	}
	return from, records
}

func (w world) intend(t *testing.T, l *ledger.Ledger, partition int32, ids ...string) {
	t.Helper()
	for i, id := range ids {
		if err := l.Intend(ctxT(t), w.rec(partition, int64(i)), ledger.Entry{Kind: ledger.Accrual, TransactionID: id}); err != nil {
			t.Fatal(err)
		}
	}
}

func ids(prefix string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return s
}

// A process restarted over its disk store reads only what was written
// after its checkpoint, and finds what it had read before from disk. A
// closed ledger answers with an error.
func TestDiskStoreRestartsFromItsCheckpoint(t *testing.T) {
	w := cluster(t)
	writer, _ := w.open(t, nil)
	w.intend(t, writer, 0, ids("before", 20)...)
	dir := t.TempDir()
	a, logs := w.process(t, dir)
	if e := w.lookup(t, a, 0, 1, ledger.Accrual, "before-0"); e == nil {
		t.Fatal("the first read missed before-0")
	}
	if from, records := reads(logs); len(from) != 1 || from[0] != 0 || records[0] != 20 {
		t.Fatalf("first read: from %v, %v records; want from 0, 20", from, records)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Lookup(ctxT(t), w.rec(0, 0), 1, ledger.Accrual, "before-0"); err == nil {
		t.Fatal("a closed ledger answered a lookup")
	}

	w.intend(t, writer, 0, ids("after", 5)...)
	b, logs := w.process(t, dir)
	for _, id := range []string{"before-0", "before-19", "after-4"} {
		if e := w.lookup(t, b, 0, 1, ledger.Accrual, id); e == nil || e.State != ledger.Intent {
			t.Errorf("after the restart, %s: %+v", id, e)
		}
	}
	if from, records := reads(logs); len(from) != 1 || from[0] != 20 || records[0] != 5 {
		t.Fatalf("read after the restart: from %v, %v records; want from 20 (the checkpoint), 5", from, records)
	}
	// Forgotten (revoked) and assigned again: from the checkpoint, not
	// from the start.
	b.Forget(w.input, 0)
	w.intend(t, writer, 0, "later")
	if e := w.lookup(t, b, 0, 2, ledger.Accrual, "later"); e == nil {
		t.Fatal("after Forget, the new entry was not read")
	}
	if from, records := reads(logs); len(from) != 2 || from[1] != 25 || records[1] != 1 {
		t.Fatalf("read after Forget: from %v, %v records; want from 25, 1", from, records)
	}
}

// newClients counts the clients built with it among their options.
type newClients struct{ n atomic.Int64 }

func (c *newClients) OnNewClient(*kgo.Client) { c.n.Add(1) }

// A process restarted when nothing was written since its checkpoint (the
// checkpoint is the partition's end) reads nothing and wipes nothing: it
// builds no reader (the tail's client is the one it builds), and finds
// what it had read from disk.
func TestDiskStoreRestartsWithNothingNew(t *testing.T) {
	w := cluster(t)
	writer, _ := w.open(t, nil)
	w.intend(t, writer, 0, ids("before", 3)...)
	dir := t.TempDir()
	a, _ := w.process(t, dir)
	if e := w.lookup(t, a, 0, 1, ledger.Accrual, "before-0"); e == nil {
		t.Fatal("the first read missed before-0")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	var clients newClients
	b, logs := w.processWith(t, dir, func(o *ledger.Options) { o.ReaderOpts = append(o.ReaderOpts, kgo.WithHooks(&clients)) })
	if e := w.lookup(t, b, 0, 1, ledger.Accrual, "before-2"); e == nil || e.State != ledger.Intent {
		t.Errorf("after the restart, before-2: %+v, want its intent", e)
	}
	if from, records := reads(logs); len(from) != 1 || from[0] != 3 || records[0] != 0 {
		t.Errorf("read after the restart: from %v, %v records; want from 3 (the checkpoint, the end), 0", from, records)
	}
	if n := logs.FilterMessageSnippet("wiped").Len(); n != 0 {
		t.Errorf("%d wipes of a store at the partition's end, want none", n)
	}
	if n := clients.n.Load(); n != 1 {
		t.Errorf("%d clients built from ReaderOpts, want 1 (the tail's): nothing to read needs no reader", n)
	}
}

// A store whose ledger topic was deleted and created again holds the old
// topic's entries and offsets: it is wiped, and the new topic read from
// its start (whose first offsets lie below the old checkpoint).
func TestDiskStoreWipedWhenTheTopicIsCreatedAgain(t *testing.T) {
	w := cluster(t)
	old, _ := w.open(t, nil)
	w.intend(t, old, 0, "old-0", "old-1")
	dir := t.TempDir()
	a, _ := w.process(t, dir)
	if e := w.lookup(t, a, 0, 1, ledger.Accrual, "old-0"); e == nil {
		t.Fatal("old-0 not read")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	// kadm's ListTopics answers from the client's metadata cache for
	// MetadataMinAge (5 s by default): the deletion would be seen only
	// that much later.
	adm := kadm.NewClient(w.client(t, kgo.MetadataMinAge(10*time.Millisecond)))
	ctx := ctxT(t)
	if _, err := adm.DeleteTopic(ctx, w.topic); err != nil {
		t.Fatal(err)
	}
	for { // a real broker deletes a moment later
		td, err := adm.ListTopics(ctx, w.topic)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := td[w.topic]; !ok || d.Err != nil {
			break
		}
		if err := waitCtx(ctx, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	renewed, _ := w.open(t, nil)
	w.intend(t, renewed, 0, ids("new", 4)...)

	b, logs := w.process(t, dir)
	if e := w.lookup(t, b, 0, 1, ledger.Accrual, "old-1"); e != nil {
		t.Errorf("the old topic's entry is still found: %+v", e)
	}
	if e := w.lookup(t, b, 0, 1, ledger.Accrual, "new-0"); e == nil {
		t.Error("the new topic's first entry, below the old checkpoint, was missed")
	}
	if n := logs.FilterMessageSnippet("created again").Len(); n != 1 {
		t.Errorf("%d warnings of the wipe, want 1", n)
	}
}

// A store whose checkpoint is past its ledger partition's end (the topic
// created again by brokers without topic ids, which the checkpoint cannot
// tell apart) holds another topic's entries: it is wiped, and the
// partition read from its start.
func TestDiskStoreWipedWhenItsCheckpointIsPastTheEnd(t *testing.T) {
	w := cluster(t)
	writer, _ := w.open(t, nil)
	w.intend(t, writer, 0, ids("new", 3)...)
	dir := t.TempDir()
	a, _ := w.process(t, dir)
	if _, err := a.Settle(w.rec(0, 7), ledger.Entry{Kind: ledger.Accrual, TransactionID: "stale", Outcome: "APPLIED"}); err != nil {
		t.Fatal(err)
	}
	if err := a.SaveCheckpoint(w.input, 0, 100); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	b, logs := w.process(t, dir)
	if e := w.lookup(t, b, 0, 1, ledger.Accrual, "stale"); e != nil {
		t.Errorf("an entry kept past the partition's end is still found: %+v", e)
	}
	if e := w.lookup(t, b, 0, 1, ledger.Accrual, "new-0"); e == nil {
		t.Error("the partition's first entry, below the checkpoint, was missed")
	}
	if from, records := reads(logs); len(from) != 1 || from[0] != 0 || records[0] != 3 {
		t.Errorf("read: from %v, %v records; want from 0, 3", from, records)
	}
	if n := logs.FilterMessageSnippet("past the partition's end").Len(); n != 1 {
		t.Errorf("%d warnings of the wipe, want 1", n)
	}
}

// A store that does not open (its files damaged) is wiped and restored
// from the topic, which is the truth; one in use by another process is
// refused, not wiped; a directory that cannot be made is an error naming
// it.
func TestDiskStoreDamaged(t *testing.T) {
	w := cluster(t)
	writer, _ := w.open(t, nil)
	w.intend(t, writer, 0, "p-1")
	dir := t.TempDir()
	a, _ := w.process(t, dir)
	if e := w.lookup(t, a, 0, 1, ledger.Accrual, "p-1"); e == nil {
		t.Fatal("p-1 not read")
	}
	_, err := ledger.New(ledger.Options{Client: &kgo.Client{}, Topic: w.topic, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second process over the same store: %v, want it refused as in use", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Name() != "LOCK" && !f.IsDir() {
			if err := os.WriteFile(filepath.Join(dir, f.Name()), []byte("not a pebble file\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, logs := w.process(t, dir)
	if n := logs.FilterMessageSnippet("unreadable").Len(); n != 1 {
		t.Errorf("%d warnings of the wipe, want 1", n)
	}
	if e := w.lookup(t, b, 0, 1, ledger.Accrual, "p-1"); e == nil {
		t.Error("p-1 not restored from the topic")
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = ledger.New(ledger.Options{Client: &kgo.Client{}, Topic: w.topic, Dir: filepath.Join(file, "ledger")})
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("a store under a file: %v, want an error naming it", err)
	}
}

// The disk store forgets the entries past the window in the background,
// chunk after chunk (more entries than one chunk here), keeps the young
// ones, and says at debug how many it deleted, warning of nothing.
func TestDiskStoreSweepsEveryChunk(t *testing.T) {
	w := cluster(t)
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var shift atomic.Int64
	clock := func() time.Time { return start.Add(time.Duration(shift.Load())) }
	// More old entries than a sweep reads at a time (4096), made at start.
	const old = 5000
	maker, cl := w.open(t, clock)
	recs := make([]*kgo.Record, old)
	for i := range recs {
		r, err := maker.Settle(w.rec(0, int64(i)), settledEntry(i))
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = r
	}
	if err := cl.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	a, logs := w.processWith(t, t.TempDir(), func(o *ledger.Options) { o.Now = clock })
	// sweeping waits for the sweep a lookup started, if any.
	sweeping := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); a.Sweeping(w.input, 0); {
			if time.Now().After(deadline) {
				t.Fatal("the sweep never ended")
			}
			if err := waitCtx(ctxT(t), 5*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
	}
	if e := w.lookup(t, a, 0, 1, ledger.Accrual, settledEntry(old-1).TransactionID); e == nil {
		t.Fatal("the last old entry was not read")
	}
	sweeping()
	if n := a.Size(w.input, 0); n != old {
		t.Fatalf("%d entries kept inside the window, want %d", n, old)
	}

	shift.Store(int64(ledger.DefaultWindow + time.Hour))
	w.intend(t, a, 0, "young")
	if e := w.lookup(t, a, 0, 1, ledger.Accrual, "young"); e == nil {
		t.Fatal("the young entry is gone")
	}
	sweeping()
	if n := a.Size(w.input, 0); n != 1 {
		t.Fatalf("%d entries kept after the sweep, want 1 (the young one)", n)
	}
	var deleted []int64
	for _, e := range logs.FilterMessageSnippet("past the window").All() {
		if e.Level != zapcore.DebugLevel {
			t.Errorf("a sweep logged %q at %s, want debug: %v", e.Message, e.Level, e.ContextMap())
		}
		n, _ := e.ContextMap()["entries"].(int64)
		deleted = append(deleted, n)
	}
	if len(deleted) != 2 || deleted[0] != 0 || deleted[1] != old {
		t.Errorf("the sweeps said they deleted %v entries, want [0 %d]", deleted, old)
	}
}

// Each input partition is a key prefix in the process's store, whatever
// the length of its topic's name and of the transaction ids: a one-letter
// topic and an id as long as a UUID are kept and found like any other.
func TestDiskStoreKeysOfAnyLength(t *testing.T) {
	w := cluster(t)
	a, _ := w.process(t, t.TempDir())
	const uuid = "2f1c9e0a-6b7d-4c3e-9a51-0d8e7f6b5a43"
	for _, tc := range []struct{ topic, id string }{
		{"t", "p-1"},
		{"t", uuid},
		{w.input, uuid},
	} {
		rec := &kgo.Record{Topic: tc.topic, Partition: 0, Offset: 1}
		if _, err := a.Settle(rec, ledger.Entry{Kind: ledger.Accrual, TransactionID: tc.id, Outcome: "APPLIED"}); err != nil {
			t.Fatalf("%s %s: %v", tc.topic, tc.id, err)
		}
		e, err := a.Lookup(ctxT(t), rec, 1, ledger.Accrual, tc.id)
		if err != nil || e == nil || e.State != ledger.Settled {
			t.Errorf("%s %s: %+v, %v; want the settled entry", tc.topic, tc.id, e, err)
		}
	}
	if n := a.Size("t", 0); n != 2 {
		t.Errorf("topic t keeps %d entries, want 2", n)
	}
}

// The disk store's cache and memtable sizes are the defaults when left
// zero, and the ones given otherwise.
func TestDiskStoreSizes(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		cache, memTable         int64
		wantCache, wantMemTable int64
	}{
		{"defaults", 0, 0, ledger.DefaultCacheSize, ledger.DefaultMemTableSize},
		{"given", 8 << 20, 2 << 20, 8 << 20, 2 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := ledger.New(ledger.Options{Client: &kgo.Client{}, Topic: "g.ledger", Dir: t.TempDir(), CacheSize: tc.cache, MemTableSize: tc.memTable})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := l.Close(); err != nil {
					t.Error(err)
				}
			}()
			if cache, memTable := l.StoreSizes(); cache != tc.wantCache || memTable != tc.wantMemTable {
				t.Errorf("cache %d, memtables %d; want %d, %d", cache, memTable, tc.wantCache, tc.wantMemTable)
			}
		})
	}
}

// Size counts the entries kept, warning of nothing; a store that cannot be
// read (closed here) counts none, and says why.
func TestDiskStoreSize(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l, err := ledger.New(ledger.Options{Client: &kgo.Client{}, Topic: "g.ledger", Dir: t.TempDir(), Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Settle(&kgo.Record{Topic: "in"}, ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-1", Outcome: "APPLIED"}); err != nil {
		t.Fatal(err)
	}
	if n := l.Size("in", 0); n != 1 {
		t.Errorf("%d entries, want 1", n)
	}
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 0 {
		t.Errorf("%d warnings counting a readable store, want none: %v", n, logs.All())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := l.Size("in", 0); n != 0 {
		t.Errorf("a closed store counts %d entries, want 0", n)
	}
	if n := logs.FilterMessage("ledger: size").FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
		t.Errorf("%d warnings counting a closed store, want 1", n)
	}
}
