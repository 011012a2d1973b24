package bridge_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// BenchmarkHandleAccrual is the bridge's per-record path for a purchase:
// decode, the ledger (with it: a lookup, the intent produced to kfake
// over TCP and acknowledged, the settled entry built), the accrual call to
// the simulator over HTTP, the result encoded. Records are handled 64 at
// a time, each with its own transactionId; an op is a record, so
// allocs/op is allocations per record. The simulator and kfake run in
// this process, so their allocations are counted too: compare the two
// sub-benchmarks, not the absolute figure. The pipeline's own per-record
// work (fetch, schedule, produce the outputs, commit) is BenchmarkPipeline's.
//
//	go test -run '^$' -bench HandleAccrual -benchtime 20000x ./internal/bridge
func BenchmarkHandleAccrual(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("ledger=%t", on), func(b *testing.B) { benchHandle(b, on) })
	}
}

func benchHandle(b *testing.B, ledgerOn bool) {
	s := newStack(b, stackOpts{quiet: true, sim: sim.Options{Members: 64}})
	var bo func(*bridge.Options)
	if ledgerOn {
		l, _ := s.withLedger("bench")
		bo = func(o *bridge.Options) { o.Ledger = l }
	}
	br := s.bridge(bo)
	recs := make([]*kgo.Record, b.N)
	for i := range recs {
		r := s.record(topics.Purchase, purchase(fmt.Sprintf("bench-%d", i), 1+i%64, 100_000))
		r.Offset, r.Timestamp = int64(i), time.Now()
		recs[i] = r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var next atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			out, err := br.Handle(ctx, recs[next.Add(1)-1], pipeline.Meta{Assignment: 1})
			if err != nil {
				b.Error(err)
				return
			}
			if want := 1 + btoi(ledgerOn); len(out) != want || out[0].Topic != topics.Purchase+".result" {
				b.Errorf("%d outputs (first on %s), want %d, a result first", len(out), out[0].Topic, want)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
	// The process's CPU (simulator and kfake included) per record: on a
	// shared machine, steadier than ns/op, which is wall time.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/record")
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}
