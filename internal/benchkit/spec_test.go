package benchkit

import (
	"bytes"
	"encoding/xml"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseScenario(t *testing.T) {
	base := DefaultScenario()
	base.Latency, base.MaxInFlight = 5*time.Millisecond, 64
	// The base's own faults never leak into a scenario.
	base.ErrorRates, base.Capacity, base.RetryAfter = map[int]float64{500: 0.5}, 4, time.Minute
	base.RollingRestart, base.LedgerAge = true, time.Hour
	with := func(f func(*Scenario)) Scenario {
		sc := base
		sc.ErrorRates, sc.Capacity, sc.RetryAfter, sc.RollingRestart, sc.LedgerAge = nil, 0, 0, false, 0
		f(&sc)
		return sc
	}
	for _, tc := range []struct {
		spec, name string
		want       Scenario
	}{
		{"clean", "clean", with(func(*Scenario) {})},
		{" clean ", "clean", with(func(*Scenario) {})},
		{"503=0.1,retry-after=1s", "503=0.1,retry-after=1s", with(func(s *Scenario) {
			s.ErrorRates, s.RetryAfter = map[int]float64{503: 0.1}, time.Second
		})},
		{"500=0.05, 429=0.05", "500=0.05,429=0.05", with(func(s *Scenario) { s.ErrorRates = map[int]float64{500: 0.05, 429: 0.05} })},
		{"429=0.2,retry-after=none", "429=0.2,retry-after=none", with(func(s *Scenario) {
			s.ErrorRates, s.RetryAfter = map[int]float64{429: 0.2}, -1
		})},
		{"503=1,retry-after=0s", "503=1,retry-after=0s", with(func(s *Scenario) {
			s.ErrorRates, s.RetryAfter = map[int]float64{503: 1}, -1
		})},
		{"capacity=32,over-capacity-status=429,latency=10ms,max-in-flight=256", "capacity=32,over-capacity-status=429,latency=10ms,max-in-flight=256",
			with(func(s *Scenario) {
				s.Capacity, s.OverCapacityStatus, s.Latency, s.MaxInFlight = 32, 429, 10*time.Millisecond, 256
			})},
		{"capacity=32,replicas=3", "capacity=32,replicas=3", with(func(s *Scenario) { s.Capacity, s.Replicas = 32, 3 })},
		{"delivery=exactly-once,replicas=3", "delivery=exactly-once,replicas=3", with(func(s *Scenario) { s.Delivery, s.Replicas = DeliveryExactlyOnce, 3 })},
		{"credentials-outage", "credentials-outage", with(func(s *Scenario) { s.CredentialsOutage = DefaultCredentialsOutage })},
		{"replicas=3, rolling-restart", "replicas=3,rolling-restart", with(func(s *Scenario) { s.Replicas, s.RollingRestart = 3, true })},
		{"ledger-age=2h", "ledger-age=2h", with(func(s *Scenario) { s.LedgerAge = 2 * time.Hour })},
		{"replicas=3,rolling-restart,delivery=exactly-once,ledger-age=90m", "replicas=3,rolling-restart,delivery=exactly-once,ledger-age=90m",
			with(func(s *Scenario) {
				s.Replicas, s.RollingRestart, s.Delivery, s.LedgerAge = 3, true, DeliveryExactlyOnce, 90*time.Minute
			})},
		{"credentials-outage=5s,latency=0s", "credentials-outage=5s,latency=0s", with(func(s *Scenario) {
			s.CredentialsOutage, s.Latency = 5*time.Second, 0
		})},
	} {
		got, err := ParseScenario(tc.spec, base)
		if err != nil {
			t.Errorf("%q: %v", tc.spec, err)
			continue
		}
		if got.Name != tc.name || !reflect.DeepEqual(got.Scenario, tc.want) {
			t.Errorf("%q = %q %+v\nwant %q %+v", tc.spec, got.Name, got.Scenario, tc.name, tc.want)
		}
		if err := got.Scenario.Validate(); err != nil {
			t.Errorf("%q: parsed scenario invalid: %v", tc.spec, err)
		}
	}
}

// Every bad spec is refused with a message naming the part at fault.
func TestParseScenarioErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"", "empty"},
		{"dirty", `"dirty": unknown knob "dirty"`},
		{"503=0.1,retry=1s", `"retry=1s": unknown knob "retry"`},
		{"503=0.1,,500=0.1", `"": empty knob`},
		{"200=0.1", `"200=0.1": status 200 is not a 4xx or 5xx`},
		{"503", `"503": want STATUS=RATE`},
		{"503=0", `"503=0": want STATUS=RATE with a rate in (0, 1]`},
		{"503=1.5", `"503=1.5": want STATUS=RATE`},
		{"503=NaN", `"503=NaN": want STATUS=RATE`},
		{"503=0.1,503=0.2", `"503=0.2": status 503 given twice`},
		{"503=0.6,500=0.6", "add up to 1.2"},
		{"retry-after=soon", `"retry-after=soon": want a duration`},
		{"retry-after=-1s", `"retry-after=-1s": want a duration`},
		{"capacity", `"capacity": capacity needs a value`},
		{"capacity=0", `"capacity=0": want a whole number of at least 1`},
		{"capacity=x", `"capacity=x": want a whole number`},
		{"capacity=8,capacity=9", `"capacity=9": capacity given twice`},
		{"over-capacity-status=429", "over-capacity-status needs capacity"},
		{"capacity=8,over-capacity-status=500", `"over-capacity-status=500": want 429 or 503`},
		{"latency=fast", `"latency=fast": want a duration`},
		{"latency=-1ms", `"latency=-1ms": want a duration`},
		{"max-in-flight=0", `"max-in-flight=0": want a whole number`},
		{"replicas=17", `"replicas=17": at most 16 replicas`},
		{"credentials-outage=0s", `"credentials-outage=0s": want a positive duration`},
		{"credentials-outage=forever", `"credentials-outage=forever": want a positive duration`},
		{"delivery=twice", `"delivery=twice": want at-least-once or exactly-once`},
		{"rolling-restart=yes", `"rolling-restart=yes": rolling-restart takes no value`},
		{"rolling-restart,rolling-restart", `"rolling-restart": rolling-restart given twice`},
		{"ledger-age", `"ledger-age": ledger-age needs a value`},
		{"ledger-age=-2h", `"ledger-age=-2h": want a positive duration`},
		{"ledger-age=0s", `"ledger-age=0s": want a positive duration`},
		{"ledger-age=old", `"ledger-age=old": want a positive duration`},
		{"ledger-age=24h", `"ledger-age=24h": want less than the ledger's window, 24h0m0s`},
		{"ledger-age=2h,ledger-age=3h", `"ledger-age=3h": ledger-age given twice`},
	} {
		_, err := ParseScenario(tc.spec, DefaultScenario())
		if err == nil {
			t.Errorf("%q accepted", tc.spec)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "scenario ") {
			t.Errorf("%q: error %q does not say %q", tc.spec, err, tc.want)
		}
	}
}

func TestParseScenarios(t *testing.T) {
	names := func(ns []NamedScenario) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return out
	}
	for _, tc := range []struct {
		specs []string
		want  []string
		err   string
	}{
		{[]string{"503=0.1", "500=0.1"}, []string{"clean", "503=0.1", "500=0.1"}, ""},
		{[]string{"503=0.1", "clean"}, []string{"clean", "503=0.1"}, ""},
		{[]string{"clean"}, []string{"clean"}, ""},
		{[]string{"clean", "clean"}, nil, `"clean" given twice`},
		{[]string{"503=0.1", "503=0.1"}, nil, `"503=0.1" given twice`},
		{[]string{"503=0.1", "bogus", "capacity=0"}, nil, "bogus"},
	} {
		got, err := ParseScenarios(tc.specs, DefaultScenario())
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.specs, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.specs, err)
		case !reflect.DeepEqual(names(got), tc.want):
			t.Errorf("%q = %q, want %q", tc.specs, names(got), tc.want)
		}
	}
	// Both problems of the last case are reported.
	_, err := ParseScenarios([]string{"bogus", "capacity=0"}, DefaultScenario())
	if err == nil || !strings.Contains(err.Error(), "bogus") || !strings.Contains(err.Error(), "capacity=0") {
		t.Errorf("error %v does not name both bad scenarios", err)
	}
}

func TestConfigScenarios(t *testing.T) {
	ns, err := ParseScenarios([]string{"replicas=2"}, DefaultScenario())
	if err != nil {
		t.Fatal(err)
	}
	aged, err := ParseScenarios([]string{"ledger-age=2h"}, DefaultScenario())
	if err != nil {
		t.Fatal(err)
	}
	// Bridge arguments that leave the ledger alone go with a ledger age.
	ok := Config{Scenario: DefaultScenario(), Scenarios: aged, Contestants: []string{Bridge},
		BridgeArgs: []string{"--ledger-dir=/tmp/l", "--ledger-replication-factor", "1"}}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Scenarios: ns, Sweep: &Sweep{Param: SweepBacklog, Values: []int{10}}}, "do not go together"},
		{Config{Scenarios: ns[1:]}, "first scenario must be clean"},
		{Config{Scenarios: ns, BridgeProfile: "p", WorkerCommand: []string{"w"}}, "not 2 replicas"},
		{Config{Scenarios: aged, BridgeArgs: []string{"--linger=5ms", "--ledger-topic", "x"}}, "bridge argument --ledger-topic: a ledger age"},
		{Config{Scenarios: aged, BridgeArgs: []string{"--dedup-window=48h"}}, "bridge argument --dedup-window=48h"},
		{Config{Scenarios: aged, BridgeArgs: []string{"-ledger=false"}}, "bridge argument -ledger=false"},
	} {
		tc.cfg.Scenario = DefaultScenario()
		tc.cfg.Contestants = []string{Bridge}
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
	}
}

func TestOutageFill(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(100, 0).Add(time.Duration(s * float64(time.Second))) }
	o := &outage{revoked: at(1), restored: at(31)}
	var res Result
	// Not answered, before, during, after the restore.
	o.fill(&res, []int64{0, at(0.5).UnixNano(), at(2).UnixNano(), at(33.5).UnixNano(), at(32.25).UnixNano()})
	want := &OutageResult{Sec: 30, AnsweredDuring: 1, ResumeSec: 1.25}
	if !reflect.DeepEqual(res.Outage, want) {
		t.Errorf("outage %+v, want %+v", res.Outage, want)
	}
	o.fill(&res, []int64{at(2).UnixNano()})
	if res.Outage.Note == "" {
		t.Errorf("nothing after the restore, yet no note: %+v", res.Outage)
	}
	(&outage{revoked: at(1)}).fill(&res, nil)
	if res.Outage.Note == "" {
		t.Errorf("an outage cut short, yet no note: %+v", res.Outage)
	}
}

func TestScenarioReport(t *testing.T) {
	ns, err := ParseScenarios([]string{"503=0.1,retry-after=1s", "capacity=32,latency=10ms,replicas=3", "credentials-outage=30s,ledger-age=2h"}, DefaultScenario())
	if err != nil {
		t.Fatal(err)
	}
	r := newReport(Config{Scenario: DefaultScenario(), Scenarios: ns})
	rates := []float64{1000, 800, 900, 0}
	steady := []float64{1600, 1440, 2880, 0}
	for i, n := range ns {
		res := Result{Contestant: "bridge/key", Kind: Bridge, Mode: "key", Events: 100, Done: 100, Results: 100,
			RecordsPerSec: rates[i], SteadyPerSec: steady[i], LatencyP99Ms: 20, PeakRSSMiB: 30, APICallsPerRecord: 1.1,
			PushedBackShare: 0.1, Replicas: n.Scenario.replicas()}
		if n.Scenario.CredentialsOutage > 0 {
			res.RecordsPerSec, res.SteadyPerSec, res.Outage = 250, 400, &OutageResult{Sec: 30, ResumeSec: 1.5}
		}
		r.Points = append(r.Points, Point{Name: n.Name, Scenario: scenarioReport(n.Scenario), Results: []Result{res}})
	}
	r.compareWithClean()
	if got := r.Points[1].Results[0].VsClean; got != 0.8 {
		t.Errorf("503 scenario at %v× clean, want 0.8", got)
	}
	if got := r.Points[1].Results[0].SteadyVsClean; got != 0.9 {
		t.Errorf("503 scenario steady at %v× clean, want 0.9", got)
	}
	if c := r.Points[2].Results[0]; math.Abs(c.VsCapacity-900.0/3200) > 1e-9 || c.SteadyVsCapacity != 0.9 || c.SteadyVsClean != 1.8 {
		t.Errorf("capacity scenario: %v× capacity, steady %v× capacity and %v× clean; want 0.28, 0.9 and 1.8",
			c.VsCapacity, c.SteadyVsCapacity, c.SteadyVsClean)
	}
	if got := r.Points[1].Results[0].VsCapacity; got != 0 {
		t.Errorf("503 scenario has no capacity, yet %v× capacity", got)
	}
	var text, svg bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"scenario 503=0.1,retry-after=1s:", "scenarios side by side", "0.80×", "10.0%",
		"bridge/key ×3", "3 bridge replicas", "0.28×", "0.90×", "1.80×", "steady × capacity", "credentials refused for 30.0 s: 0 error events", "1.50", "capacity 32",
		"the bridge's ledger 2h0m0s old", "ledger-age=D: before each bridge process starts"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "n/a × ceiling") {
		t.Errorf("text compares with a ceiling that did not run:\n%s", text.String())
	}
	if err := r.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(svg.String(), "retry-after=1s") || !strings.Contains(svg.String(), "÷ the clean run") ||
		!strings.Contains(svg.String(), "steady throughput") {
		t.Errorf("chart lacks the scenarios:\n%s", svg.String())
	}
	dec := xml.NewDecoder(&svg)
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Errorf("SVG is not well-formed XML: %v", err)
			}
			break
		}
	}
}
