package benchkit

import (
	"bytes"
	"encoding/xml"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	hundred := make([]int64, 100)
	for i := range hundred {
		hundred[i] = int64(i + 1)
	}
	for _, tc := range []struct {
		in   []int64
		q    float64
		want int64
	}{
		{[]int64{7}, 0.5, 7},
		{[]int64{7}, 0.99, 7},
		{[]int64{1, 2}, 0.5, 1},
		{[]int64{1, 2, 3, 4}, 0.5, 2},
		{hundred, 0.5, 50},
		{hundred, 0.99, 99},
		{hundred, 1, 100},
	} {
		if got := quantile(tc.in, tc.q); got != tc.want {
			t.Errorf("quantile(%d values, %v) = %d, want %d", len(tc.in), tc.q, got, tc.want)
		}
	}
}

func TestCompletionsTiming(t *testing.T) {
	ms := int64(time.Millisecond)
	launch := 1000 * ms
	// A backlog: latencies count from the launch.
	c := newCompletions(launch, 4, nil)
	c.done = []int64{launch + 10*ms, launch + 20*ms, 0, launch + 40*ms}
	tm := c.timing(false)
	if tm.Done != 3 || tm.Sampled != 3 || tm.P50 != 20*time.Millisecond || tm.Max != 40*time.Millisecond {
		t.Errorf("backlog timing %+v", tm)
	}
	if got := tm.Rate(); math.Abs(got-2/0.030) > 1e-6 {
		t.Errorf("rate %v, want %v", got, 2/0.030)
	}
	if tm.Startup() != 10*time.Millisecond || tm.Wall() != 40*time.Millisecond {
		t.Errorf("startup %s, wall %s", tm.Startup(), tm.Wall())
	}

	// Written at a rate: records written before the first completion are
	// left out of the latencies, not out of the count.
	avail := []int64{launch, launch + 5*ms, launch + 30*ms, launch + 35*ms}
	c = newCompletions(launch, 4, avail)
	c.done = []int64{launch + 25*ms, launch + 26*ms, launch + 33*ms, launch + 40*ms}
	tm = c.timing(true)
	if tm.Done != 4 || tm.Sampled != 2 || tm.P50 != 3*time.Millisecond || tm.Max != 5*time.Millisecond {
		t.Errorf("rate timing %+v", tm)
	}

	if tm := newCompletions(launch, 3, nil).timing(false); tm.Done != 0 || tm.Rate() != 0 || tm.Wall() != 0 {
		t.Errorf("empty timing %+v", tm)
	}
}

func TestSteadyRate(t *testing.T) {
	ms := int64(time.Millisecond)
	launch := 1000 * ms
	// every returns n completion times step apart, from launch+start.
	every := func(n int, start, step int64) []int64 {
		d := make([]int64, n)
		for i := range d {
			d[i] = launch + start + int64(i)*step
		}
		return d
	}
	cat := func(parts ...[]int64) []int64 { return slices.Concat(parts...) }
	for _, tc := range []struct {
		name string
		done []int64 // completion times, 0: not completed
		want float64 // records/s
	}{
		// 100 records 1 ms apart: ranks 10 and 90 are 80 ms apart.
		{"even", every(100, 0, ms), 80 / 0.080},
		// The last 5 records wait out a 2 s Retry-After: the whole-run
		// rate collapses, the steady one does not.
		{"retry tail", cat(every(95, 0, ms), every(5, 2000*ms, ms)), 80 / 0.080},
		// A slow start (the first 5 records 1 s late) is left out too.
		{"slow start", cat(every(5, 0, ms), every(95, 1000*ms, ms)), 80 / 0.080},
		// A pause inside the middle 80% counts: it is not a tail.
		{"pause", cat(every(50, 0, ms), every(50, 1000*ms, ms)), 80 / (0.079 + 0.951)},
		// Unanswered records are not completions: 100 answered of 110.
		{"unanswered", cat(every(100, 0, 2*ms), make([]int64, 10)), 80 / 0.160},
		// 10 records: ranks 1 and 9, 8 intervals.
		{"ten", every(10, 0, 10*ms), 8 / 0.080},
		// Fewer than 10: the whole-run rate, (n−1) ÷ (last − first).
		{"few", every(5, 0, 10*ms), 4 / 0.040},
		// Every percentile in one tick: the whole-run rate, which falls
		// back to the time since launch.
		{"one tick", every(20, 10*ms, 0), 20 / 0.010},
		{"none", make([]int64, 3), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCompletions(launch, len(tc.done), nil)
			c.done = tc.done
			if got := c.timing(false).SteadyRate(); math.Abs(got-tc.want) > 1e-6*max(1, tc.want) {
				t.Errorf("steady rate %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseSweep(t *testing.T) {
	w, err := ParseSweep("backlog=10000,100_000, 1000000")
	if err != nil || w.Param != SweepBacklog || len(w.Values) != 3 || w.Values[1] != 100_000 {
		t.Fatalf("ParseSweep = %+v, %v", w, err)
	}
	sc := w.Apply(DefaultScenario(), 7)
	if sc.Events != 7 {
		t.Errorf("Apply backlog: events %d", sc.Events)
	}
	w, err = ParseSweep("in-flight=16")
	if err != nil || w.Apply(DefaultScenario(), 16).MaxInFlight != 16 {
		t.Errorf("in-flight sweep: %+v, %v", w, err)
	}
	for _, bad := range []string{"", "backlog", "speed=1", "backlog=1,x", "in-flight=0"} {
		if _, err := ParseSweep(bad); err == nil {
			t.Errorf("ParseSweep(%q) accepted", bad)
		}
	}
}

func TestEvents(t *testing.T) {
	sc := DefaultScenario()
	sc.Keys = 10
	base := time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.UTC)
	keys := map[string]int{}
	for i := range 1000 {
		ev := sc.Event(i, base)
		if err := ev.Validate(); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if eventIndex([]byte(ev.TransactionID)) != i {
			t.Fatalf("event %d: transactionId %q does not parse back", i, ev.TransactionID)
		}
		if again := sc.Event(i, base); *again.Description != *ev.Description || again.LoyaltyID != ev.LoyaltyID || again.Amount != ev.Amount {
			t.Fatalf("event %d is not reproducible", i)
		}
		keys[ev.LoyaltyID]++
		r := AccrualRequest(ev)
		if r.TransactionID != ev.TransactionID || r.LoyaltyID != ev.LoyaltyID || string(r.TransactionDes) != *ev.Description ||
			!r.TransactionDate.Time.Equal(base.Truncate(time.Millisecond)) {
			t.Fatalf("accrual request %+v of %+v", r, ev)
		}
	}
	if len(keys) != 10 {
		t.Errorf("%d distinct keys, want 10", len(keys))
	}
	for k, n := range keys {
		if n < 50 || n > 150 {
			t.Errorf("key %s drawn %d times of 1000: not uniform", k, n)
		}
	}
	for _, bad := range []string{"", "bench-", "bench--1", "other-1", "bench-x"} {
		if i := eventIndex([]byte(bad)); i != -1 {
			t.Errorf("eventIndex(%q) = %d", bad, i)
		}
	}
}

func TestScenarioValidate(t *testing.T) {
	if err := DefaultScenario().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := Scenario{LatencyP99: time.Millisecond, Rate: -1, LedgerAge: -time.Hour}
	err := bad.Validate()
	if err == nil {
		t.Fatal("invalid scenario accepted")
	}
	for _, want := range []string{"events", "partitions", "keys", "in-flight", "rate", "LatencyP99", "ledger age -1h0m0s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	old := DefaultScenario()
	old.LedgerAge = 25 * time.Hour
	if err := old.Validate(); err == nil || !strings.Contains(err.Error(), "less than the ledger's window") {
		t.Errorf("a ledger older than its window: %v", err)
	}
}

// A degraded partner is described in the report as it was asked for, and
// reaches the simulator's options.
func TestScenarioFaults(t *testing.T) {
	for _, tc := range []struct {
		sc   Scenario
		want string
	}{
		{Scenario{}, ""},
		{Scenario{ErrorRates: map[int]float64{503: 0.1, 500: 0.05}, RetryAfter: time.Second}, "5% 500, 10% 503 (Retry-After 1s)"},
		{Scenario{ErrorRates: map[int]float64{429: 0.2}, RetryAfter: -1}, "20% 429 (no Retry-After)"},
		{Scenario{Capacity: 32}, "capacity 32"},
		{Scenario{ErrorRates: map[int]float64{500: 0.1}, Capacity: 8}, "10% 500, capacity 8"},
	} {
		if got := tc.sc.FaultText(); got != tc.want {
			t.Errorf("FaultText() = %q, want %q", got, tc.want)
		}
	}
	sc := DefaultScenario()
	sc.ErrorRates, sc.Capacity, sc.OverCapacityStatus = map[int]float64{503: 0.1}, 32, 429
	o := sc.simOptions()
	if o.Capacity != 32 || o.OverCapacityStatus != 429 || o.Faults.ErrorRates[503] != 0.1 || len(o.Faults.Endpoints) == 0 {
		t.Fatalf("simulator options %+v", o)
	}
	for _, ep := range o.Faults.Endpoints {
		if ep == "token" || ep == "exchange-token" {
			t.Errorf("faults reach the token endpoint %s", ep)
		}
	}
	sc.OverCapacityStatus = 500
	if err := sc.Validate(); err == nil || !strings.Contains(err.Error(), "over-capacity status") {
		t.Errorf("over-capacity status 500 accepted: %v", err)
	}
}

func sampleReport(sweep bool) *Report {
	r := newReport(Config{Scenario: DefaultScenario()})
	res := func(name, kind string, rate float64) Result {
		return Result{Contestant: name, Kind: kind, Events: 100, Done: 100, Results: 100, RecordsPerSec: rate,
			LatencyP50Ms: 10, LatencyP99Ms: 20, CPUSec: 0.1, CPUPer1k: 1, PeakRSSMiB: 30}
	}
	values := []int{0}
	if sweep {
		r.Sweep = &Sweep{Param: SweepBacklog, Values: []int{1000, 10000}}
		values = r.Sweep.Values
	}
	for _, v := range values {
		pt := Point{Scenario: scenarioReport(DefaultScenario()), SweepValue: v, Results: []Result{
			res("ceiling", Ceiling, 1000), res("baseline", Baseline, 10), res("bridge/key", Bridge, 900),
			{Contestant: "bridge/partition <&>", Kind: Bridge, Error: "not measured: no binary"},
		}}
		pt.Ratios = ratios(pt.Results, false)
		r.Points = append(r.Points, pt)
	}
	return r
}

func TestReportOutputs(t *testing.T) {
	for _, sweep := range []bool{false, true} {
		r := sampleReport(sweep)
		q := r.Points[0].Ratios
		if len(q) != 1 || math.Abs(q[0].ThroughputVsCeiling-0.9) > 1e-9 || q[0].ThroughputVsBaseline != 90 || q[0].CPUVsCeiling != 1 {
			t.Fatalf("ratios %+v", q)
		}
		var text, svg bytes.Buffer
		if err := r.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"bridge/key", "0.90× ceiling", "90× baseline", "not measured: no binary", "Notes:"} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("sweep %v: text lacks %q:\n%s", sweep, want, text.String())
			}
		}
		if sweep && !strings.Contains(text.String(), "scaling over backlog") {
			t.Errorf("sweep text lacks the scaling table")
		}
		if err := r.WriteSVG(&svg); err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(&svg)
		for {
			if _, err := dec.Token(); err != nil {
				if err.Error() != "EOF" {
					t.Errorf("sweep %v: SVG is not well-formed XML: %v", sweep, err)
				}
				break
			}
		}
		if err := r.Failed(); err == nil || !strings.Contains(err.Error(), "bridge/partition") {
			t.Errorf("Failed() = %v", err)
		}
	}
}

func TestCompact(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.125: "0.125", 1.5: "1.5", 12: "12", 1200: "1.2k", 12000: "12k", 1_500_000: "1.5M"} {
		if got := compact(v); got != want {
			t.Errorf("compact(%v) = %q, want %q", v, got, want)
		}
	}
}

// Failed: an error event fails the run, except TRANSIENT_EXHAUSTED ones in
// a scenario whose partner injects faults (retries spent on them, as
// designed); a missing answer fails it whatever the scenario.
func TestFailedExpectsExhaustedUnderFaults(t *testing.T) {
	faulty := ScenarioReport{Faults: "10% 500"}
	for _, tc := range []struct {
		name string
		sc   ScenarioReport
		res  Result
		fail bool
	}{
		{"clean, all answered", ScenarioReport{}, Result{Events: 10, Done: 10}, false},
		{"clean, one exhausted", ScenarioReport{}, Result{Events: 10, Done: 10, Errors: 1, Exhausted: 1}, true},
		{"faults, one exhausted", faulty, Result{Events: 10, Done: 10, Errors: 1, Exhausted: 1}, false},
		{"faults, another error", faulty, Result{Events: 10, Done: 10, Errors: 2, Exhausted: 1}, true},
		{"faults, one unanswered", faulty, Result{Events: 10, Done: 9, Errors: 1, Exhausted: 1}, true},
		{"faults, a contestant error", faulty, Result{Events: 10, Done: 10, Error: "crashed"}, true},
	} {
		tc.res.Contestant = "bridge/key"
		r := &Report{Points: []Point{{Name: "x", Scenario: tc.sc, Results: []Result{tc.res}}}}
		if err := r.Failed(); (err != nil) != tc.fail {
			t.Errorf("%s: Failed() = %v, want failure %v", tc.name, err, tc.fail)
		}
	}
}

func TestLongestPartitionGap(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		name string
		done []int64
		part []int32
		want partitionGap
	}{
		{"nothing answered", []int64{0, 0}, []int32{0, 1}, partitionGap{}},
		{"one reply per partition", []int64{5 * ms, 900 * ms}, []int32{0, 1}, partitionGap{}},
		// Partition 1's replies interleave with partition 0's: the gap
		// is within a partition, not across them.
		{"gaps within each partition", []int64{1 * ms, 2 * ms, 50 * ms, 60 * ms, 400 * ms}, []int32{0, 1, 1, 0, 0},
			partitionGap{340 * time.Millisecond, 0, 60 * ms}},
		{"out of order, unanswered skipped", []int64{300 * ms, 0, 100 * ms, 120 * ms}, []int32{2, 2, 2, 2},
			partitionGap{180 * time.Millisecond, 2, 120 * ms}},
		{"events past the partitions known", []int64{1 * ms, 2 * ms, 900 * ms}, []int32{0, 0}, partitionGap{time.Millisecond, 0, 1 * ms}},
	} {
		if got := longestPartitionGap(tc.done, tc.part); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
