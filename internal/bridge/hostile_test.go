package bridge_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/hostile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

func hostileCases(tb testing.TB, s *stack, prefix string) []hostile.Case {
	tb.Helper()
	cases, err := hostile.Cases(hostile.Options{Topic: topics.Purchase, Encode: s.codec.Encode, Member: sim.MemberID(1), Prefix: prefix})
	if err != nil {
		tb.Fatal(err)
	}
	for _, c := range cases {
		c.Record.Partition, c.Record.Offset = 1, 42
	}
	return cases
}

// Every hostile record gets the one answer it deserves, keyed as it should
// be, within the message limit, with a bounded detail: none makes Handle
// fail (which would stop the pipeline on it).
func TestHostileRecords(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(func(o *bridge.Options) { o.IncludeOriginal = true })
	for _, c := range hostileCases(t, s, "hr-") {
		t.Run(c.Name, func(t *testing.T) {
			r := s.handle(b, c.Record, false)
			switch got := r.outcome(); {
			case c.Want == hostile.Result && r.result == nil, c.Want != hostile.Result && !strings.HasPrefix(got, c.Want):
				t.Fatalf("%s, want %s: %.300q", got, c.Want, r.detail())
			}
			key := c.ID
			if key == "" {
				key = events.SourceID(c.Record.Topic, c.Record.Partition, c.Record.Offset)
			}
			if string(r.rec.Key) != key {
				t.Errorf("keyed %.60q, want %q", r.rec.Key, key)
			}
			if n := size(r.rec); n > bridge.DefaultMaxOutputBytes {
				t.Errorf("output of %d bytes", n)
			}
			if n := len(r.detail()); n > bridge.MaxDetailBytes {
				t.Errorf("detail of %d bytes", n)
			}
		})
	}
}

// What each hostile record costs Handle: ns/op, and cpu-ms/op, the
// process's CPU time (user and system, every goroutine, the garbage
// collector and the in-process simulator included) per record. The
// security review's record cost 48 s; the budget is 50 ms.
//
//	go test -run '^$' -bench BenchmarkHostileRecords -benchtime 20x ./internal/bridge/
func BenchmarkHostileRecords(b *testing.B) {
	s := newStack(b, stackOpts{})
	br := s.bridge(func(o *bridge.Options) { o.IncludeOriginal = true })
	for _, c := range hostileCases(b, s, "hb-") {
		b.Run(c.Name, func(b *testing.B) {
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				out, err := br.Handle(b.Context(), c.Record, pipeline.Meta{})
				if err != nil || len(out) != 1 {
					b.Fatalf("%d outputs, %v", len(out), err)
				}
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
