package ledger_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
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
	var n, h int
	for i := 0; b.Loop(); i++ {
		r, err := l.Settle(&kgo.Record{Topic: "in", Offset: int64(i)}, settledEntry(i))
		if err != nil {
			b.Fatal(err)
		}
		n = len(r.Key) + len(r.Value)
		// A record header: key and value lengths (a varint byte each),
		// key, value.
		h = 0
		for _, x := range r.Headers {
			h += 2 + len(x.Key) + len(x.Value)
		}
	}
	b.ReportMetric(float64(n), "bytes/entry")
	b.ReportMetric(float64(h), "header-bytes/entry")
}

// BenchmarkLedgerIntend is the time from a write's intent to its sending,
// one write at a time: the intent acknowledged (intend), and then read
// back with what other writers wrote below it (intend+heed, the order
// check). On kfake, or the real broker LOYALTY_BRIDGE_TEST_BROKERS names.
func BenchmarkLedgerIntend(b *testing.B) {
	w := cluster(b)
	cl := w.client(b)
	ctx := context.Background()
	if _, err := ledger.Ensure(ctx, cl, w.topic, []string{w.input}, ledger.DefaultWindow, -1); err != nil {
		b.Fatal(err)
	}
	l, err := ledger.New(ledger.Options{Client: cl, ReaderOpts: []kgo.Opt{kgo.SeedBrokers(w.brokers...)}, Topic: w.topic})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	rec := &kgo.Record{Topic: w.input}
	b.Run("intend", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if err := l.Intend(ctx, rec, ledger.Entry{Kind: ledger.Accrual, TransactionID: strconv.Itoa(i)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("intend+heed", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			id := "h" + strconv.Itoa(i)
			_, wt, err := l.Watch(ctx, rec, 1, ledger.Accrual, id)
			if err != nil {
				b.Fatal(err)
			}
			o, err := wt.Intend(ctx, ledger.Entry{Kind: ledger.Accrual, TransactionID: id})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := wt.Heed(ctx, o); err != nil {
				b.Fatal(err)
			}
			wt.Close()
		}
	})
}

// BenchmarkLedgerMemory keeps LEDGER_ENTRIES (default 1,000,000) settled
// entries of one partition in a process and reports the heap they take
// per entry, the process's peak resident size, and what a garbage
// collection costs with them kept (gc-ms, gc-cpu-ms: the collector marks
// whatever pointers the store holds).
//
//	LEDGER_ENTRIES=10000000 go test -run '^$' -bench LedgerMemory -benchtime 1x ./internal/ledger
func BenchmarkLedgerMemory(b *testing.B) {
	n := envInt(b, "LEDGER_ENTRIES", 1_000_000)
	for b.Loop() {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		rssBefore := procStatus("VmRSS:")
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
		// The memory store's chunks are mapped outside the heap: the
		// heap has its index, the resident set both.
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heap-bytes/entry")
		b.ReportMetric(float64(procStatus("VmRSS:")-rssBefore)/float64(n), "rss-bytes/entry")
		b.ReportMetric(float64(procStatus("VmHWM:"))/(1<<20), "peak-RSS-MiB")
		wall, cpu := gcCost()
		b.ReportMetric(wall*1000, "gc-ms")
		b.ReportMetric(cpu*1000, "gc-cpu-ms")
		runtime.KeepAlive(l)
	}
}

// gcCost is what one collection costs with the heap as it is: the mean
// wall time of runtime.GC and the garbage collector's CPU time (all its
// workers, as runtime/metrics estimates it) over a few collections.
func gcCost() (wall, cpu float64) {
	const runs = 5
	m := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(m)
	before := m[0].Value.Float64()
	start := time.Now()
	for range runs {
		runtime.GC()
	}
	wall = time.Since(start).Seconds() / runs
	metrics.Read(m)
	return wall, (m[0].Value.Float64() - before) / runs
}

// procStatus is a size line of /proc/self/status (VmHWM: the peak resident
// set, VmRSS: the current one), in bytes, or 0 off Linux.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// envInt is the benchmark knob name, or def.
func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return n
}

// dirSize is the bytes of the files under dir.
func dirSize(b *testing.B, dir string) int64 {
	b.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkLedgerDisk keeps LEDGER_ENTRIES (default 1,000,000) settled
// entries of one partition in the disk store and reports the bytes on
// disk per entry once compacted, and the process's peak resident size
// (run it alone: the peak is the process's).
//
//	LEDGER_ENTRIES=10000000 go test -run '^$' -bench LedgerDisk -benchtime 1x ./internal/ledger
func BenchmarkLedgerDisk(b *testing.B) {
	n := envInt(b, "LEDGER_ENTRIES", 1_000_000)
	for b.Loop() {
		dir := b.TempDir()
		l, err := ledger.New(ledger.Options{Client: &kgo.Client{}, Topic: "t", Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		rec := &kgo.Record{Topic: "in"}
		start := time.Now()
		for i := range n {
			rec.Offset = int64(i)
			if _, err := l.Settle(rec, settledEntry(i)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "puts/s")
		if err := l.Compact(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(dirSize(b, dir))/float64(n), "disk-bytes/entry")
		b.ReportMetric(float64(procStatus("VmHWM:"))/(1<<20), "peak-RSS-MiB")
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLedgerLookup times a Lookup of a partition of LEDGER_ENTRIES
// (default 1,000,000) settled entries, found and not, in memory and on
// disk (compacted: read from tables, as after a restore, not from the
// memtable).
func BenchmarkLedgerLookup(b *testing.B) {
	n := envInt(b, "LEDGER_ENTRIES", 1_000_000)
	w := cluster(b)
	cl := w.client(b)
	ctx := context.Background()
	if _, err := ledger.Ensure(ctx, cl, w.topic, []string{w.input}, ledger.DefaultWindow, -1); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 1<<16)
	for _, disk := range []bool{false, true} {
		b.Run(map[bool]string{false: "memory", true: "disk"}[disk], func(b *testing.B) {
			o := ledger.Options{Client: cl, ReaderOpts: []kgo.Opt{kgo.SeedBrokers(w.brokers...)}, Topic: w.topic}
			if disk {
				o.Dir = b.TempDir()
			}
			l, err := ledger.New(o)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			rec := &kgo.Record{Topic: w.input}
			if _, err := l.Lookup(ctx, rec, 1, ledger.Accrual, "x"); err != nil {
				b.Fatal(err)
			}
			for i := range n {
				rec.Offset = int64(i)
				if _, err := l.Settle(rec, settledEntry(i)); err != nil {
					b.Fatal(err)
				}
			}
			if disk {
				if err := l.Compact(); err != nil {
					b.Fatal(err)
				}
			}
			for l.Sweeping(w.input, 0) { // the first lookup's sweep, not timed
				time.Sleep(10 * time.Millisecond)
			}
			for _, hit := range []bool{true, false} {
				for i := range ids {
					j := (i * 2654435761) % n // spread over the partition
					if ids[i] = fmt.Sprintf("%016d", j); !hit {
						ids[i] = fmt.Sprintf("m%015d", j)
					}
				}
				b.Run(map[bool]string{true: "hit", false: "miss"}[hit], func(b *testing.B) {
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						e, err := l.Lookup(ctx, rec, 1, ledger.Accrual, ids[i%len(ids)])
						if err != nil || (e != nil) != hit {
							b.Fatalf("lookup %s: %+v, %v", ids[i%len(ids)], e, err)
						}
						i++
					}
				})
			}
		})
	}
}

// BenchmarkLedgerRestore writes LEDGER_ENTRIES (default 1,000,000)
// settled entries to one ledger partition, then times a new process
// reading them back: what an assignment of that partition waits before
// its first record. memory and disk read from the log start (a fresh
// host); catch-up is a process restarted over its disk store after
// LEDGER_NEW (default 10,000) more entries were written. On kfake, or
// the real broker LOYALTY_BRIDGE_TEST_BROKERS names.
func BenchmarkLedgerRestore(b *testing.B) {
	n := envInt(b, "LEDGER_ENTRIES", 1_000_000)
	more := envInt(b, "LEDGER_NEW", 10_000)
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
	written := 0
	write := func(count int) {
		const batch = 10_000
		rs := make([]*kgo.Record, 0, batch)
		for i := written; i < written+count; i++ {
			rec.Offset = int64(i)
			r, err := writer.Settle(rec, settledEntry(i))
			if err != nil {
				b.Fatal(err)
			}
			if rs = append(rs, r); len(rs) == batch || i == written+count-1 {
				if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
					b.Fatal(err)
				}
				rs = rs[:0]
			}
		}
		written += count
	}
	write(n)
	open := func(b *testing.B, dir string) *ledger.Ledger {
		l, err := ledger.New(ledger.Options{Client: cl, ReaderOpts: []kgo.Opt{kgo.SeedBrokers(w.brokers...)}, Topic: w.topic, Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	restore := func(b *testing.B, l *ledger.Ledger, want int) {
		start := time.Now()
		if _, err := l.Lookup(ctx, rec, 1, ledger.Accrual, "x"); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "restore-s")
		if got := l.Size(w.input, 0); got != want {
			b.Fatalf("restored %d entries, want %d", got, want)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("memory", func(b *testing.B) {
		for b.Loop() {
			restore(b, open(b, ""), n)
		}
	})
	b.Run("disk", func(b *testing.B) {
		for b.Loop() {
			restore(b, open(b, b.TempDir()), n)
		}
	})
	b.Run("catch-up", func(b *testing.B) {
		dir := b.TempDir()
		restore(b, open(b, dir), written)
		for b.Loop() {
			write(more)
			restore(b, open(b, dir), written)
		}
	})
}
