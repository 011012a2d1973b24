package ledger_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
)

// settledEntry is a typical accrual's settled entry: an id of 16 digits,
// the partner's references as the simulator makes them.
func settledEntry(i int) ledger.Entry {
	points := int64(100 + i%900)
	return ledger.Entry{Kind: ledger.Accrual, TransactionID: fmt.Sprintf("%016d", i), Outcome: "APPLIED", Points: &points,
		BitReference: fmt.Sprintf("BIT%012d", i), RequestID: fmt.Sprintf("req-%012d", i), APITimestamp: "2026-11-27T10:00:00.000Z"}
}

// BenchmarkLedgerEntryBytes reports what one settled transaction costs on
// the wire and on disk before compression: its key and value.
func BenchmarkLedgerEntryBytes(b *testing.B) {
	l, err := ledger.New(ledger.Options{Client: &kgo.Client{}, Topic: "t"})
	if err != nil {
		b.Fatal(err)
	}
	var n int
	for i := 0; b.Loop(); i++ {
		r, err := l.Settle(&kgo.Record{Topic: "in", Offset: int64(i)}, settledEntry(i))
		if err != nil {
			b.Fatal(err)
		}
		n = len(r.Key) + len(r.Value)
	}
	b.ReportMetric(float64(n), "bytes/entry")
}

// BenchmarkLedgerMemory keeps LEDGER_ENTRIES (default 1,000,000) settled
// entries of one partition in a process and reports the heap they take
// per entry and the process's peak resident size.
//
//	LEDGER_ENTRIES=10000000 go test -run '^$' -bench LedgerMemory -benchtime 1x ./internal/ledger
func BenchmarkLedgerMemory(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("LEDGER_ENTRIES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		l, err := ledger.New(ledger.Options{Client: &kgo.Client{}, Topic: "t"})
		if err != nil {
			b.Fatal(err)
		}
		rec := &kgo.Record{Topic: "in"}
		for i := range n {
			rec.Offset = int64(i)
			if _, err := l.Settle(rec, settledEntry(i)); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if l.Size("in", 0) != n {
			b.Fatalf("%d entries kept, want %d", l.Size("in", 0), n)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heap-bytes/entry")
		b.ReportMetric(float64(peakRSS())/(1<<20), "peak-RSS-MiB")
	}
}

// peakRSS is the process's peak resident set (Linux VmHWM), or 0.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkLedgerRestore writes LEDGER_ENTRIES (default 1,000,000)
// settled entries to one ledger partition, then times a new process
// reading them back: what an assignment of that partition waits before
// its first record. On kfake, or the real broker
// LOYALTY_BRIDGE_TEST_BROKERS names.
func BenchmarkLedgerRestore(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("LEDGER_ENTRIES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	w := cluster(b)
	cl := w.client(b, kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(5*time.Millisecond))
	ctx := context.Background()
	if _, err := ledger.Ensure(ctx, cl, w.topic, []string{w.input}, ledger.DefaultWindow, -1); err != nil {
		b.Fatal(err)
	}
	writer, err := ledger.New(ledger.Options{Client: cl, Topic: w.topic})
	if err != nil {
		b.Fatal(err)
	}
	rec := &kgo.Record{Topic: w.input}
	const batch = 10_000
	rs := make([]*kgo.Record, 0, batch)
	for i := range n {
		rec.Offset = int64(i)
		r, err := writer.Settle(rec, settledEntry(i))
		if err != nil {
			b.Fatal(err)
		}
		if rs = append(rs, r); len(rs) == batch || i == n-1 {
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
			rs = rs[:0]
		}
	}
	b.ResetTimer()
	for b.Loop() {
		l, err := ledger.New(ledger.Options{Client: cl, ReaderOpts: []kgo.Opt{kgo.SeedBrokers(w.brokers...)}, Topic: w.topic})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := l.Lookup(ctx, rec, 1, ledger.Accrual, "x"); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "restore-s")
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "entries/s")
		if l.Size(w.input, 0) != n {
			b.Fatalf("restored %d entries, want %d", l.Size(w.input, 0), n)
		}
	}
}
