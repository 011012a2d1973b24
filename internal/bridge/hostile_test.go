package bridge_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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
	// The onboarding whose personal data is longest: every text field far
	// over its limit, so that the error event's detail is scrubbed by a
	// matcher built from the largest values a record can hold.
	big := func(s string) string { return strings.Repeat(s, 40_000/len(s)) }
	o := onboarding(prefix+"onboarding-huge", "E-huge")
	o.FullName, o.Address, o.PlaceOfBirth, o.PlaceOfIssue = big("Nguyễn Thị Đào "), big("12 Đường Lê Lợi, "), big("Huế "), big("Đà Nẵng ")
	o.Phone = big("0912345678")
	cases = append(cases, hostile.Case{Name: "onboarding, personal fields of 40 KB", ID: o.TransactionID, Want: hostile.Validation,
		Record: s.record(topics.MemberOnboarding, o)})
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

// The largest error event without its original: every text of the
// partner's answer at the length the answer's size cap allows, the longest
// transactionId, both copied headers at their limits beside a header flood,
// and replay's header. It stays under bridge.ErrorEventBudget with room for
// the longest topic names (249 bytes, in the source and in a header): what
// lets an error event carry an original only when it fits beside the
// budget, with no second attempt.
func TestErrorEventBudget(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(func(o *bridge.Options) { o.Replay = true })
	long := func(c string) string { return strings.Repeat(c, 10<<10) } // six of them under the 64 KiB answer cap
	body, err := json.Marshal(map[string]any{"statusCode": 400, "message": long("m"),
		"errors": map[string]string{"code": long("C"), "message": long("e"), "errorCode": long("N")},
		"data":   map[string]string{"resultUrl": "https://partner.example/" + long("u") + "?q=" + long("q")}})
	if err != nil {
		t.Fatal(err)
	}
	s.answer.Store(&canned{"/point-accrual", http.StatusBadRequest, string(body)})
	headers := []kgo.RecordHeader{
		{Key: "correlation-id", Value: []byte(strings.Repeat("c", bridge.MaxCorrelationIDBytes))},
		{Key: "traceparent", Value: []byte(validTrace)},
	}
	for range 10_000 {
		headers = append(headers, kgo.RecordHeader{Key: "traceparent", Value: []byte(strings.Repeat("t", 100))})
	}
	r := s.handle(b, s.record(topics.Purchase, purchase(strings.Repeat("i", events.MaxIDLen), 1, 100), headers...), true)
	if r.err == nil || r.err.APIMessage == nil || r.err.APIErrorMessage == nil || r.err.ResultURL == nil {
		t.Fatalf("%s: %+v", r.outcome(), r.err)
	}
	// The detail at its own bound, whatever this cause's text.
	const longestTopics = 2 * 249
	worst := size(r.rec) - len(r.err.Detail) + bridge.MaxDetailBytes + longestTopics
	if worst > bridge.ErrorEventBudget {
		t.Errorf("error event of %d bytes with the longest detail and topic names, over the budget of %d", worst, bridge.ErrorEventBudget)
	}
	t.Logf("the largest error event without its original: %d bytes here, %d with the longest detail and topic names", size(r.rec), worst)
}
