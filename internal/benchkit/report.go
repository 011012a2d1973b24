package benchkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
)

// Sweep parameters.
const (
	SweepBacklog  = "backlog"   // Scenario.Events
	SweepInFlight = "in-flight" // Scenario.MaxInFlight
)

// Sweep runs the contestants once per value of one parameter.
type Sweep struct {
	Param  string `json:"param"`
	Values []int  `json:"values"`
}

// ParseSweep reads "backlog=10000,100000,1000000" or "in-flight=16,64,256".
func ParseSweep(s string) (*Sweep, error) {
	param, list, ok := strings.Cut(s, "=")
	if !ok || (param != SweepBacklog && param != SweepInFlight) {
		return nil, fmt.Errorf("sweep %q: want %s=N,N,… or %s=N,N,…", s, SweepBacklog, SweepInFlight)
	}
	w := &Sweep{Param: param}
	for _, f := range strings.Split(list, ",") {
		v, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(f), "_", ""))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("sweep %s: %q is not a positive integer", param, f)
		}
		w.Values = append(w.Values, v)
	}
	return w, nil
}

// Apply returns sc with the swept parameter set to v.
func (w Sweep) Apply(sc Scenario, v int) Scenario {
	switch w.Param {
	case SweepBacklog:
		sc.Events = v
	case SweepInFlight:
		sc.MaxInFlight = v
	}
	return sc
}

// Report is everything a run measured; it is what --json writes.
type Report struct {
	Tool string `json:"tool"`
	// Command is the command line that produced the report, when known.
	Command   string    `json:"command,omitempty"`
	StartedAt time.Time `json:"startedAt"`
	GoVersion string    `json:"goVersion"`
	Platform  string    `json:"platform"`
	CPUs      int       `json:"cpus"`
	// Kafka is where the contestants' Kafka ran: "kfake" (in the bench
	// process) or "external HOST:PORT,…" (Config.Brokers).
	Kafka  string   `json:"kafka,omitempty"`
	Sweep  *Sweep   `json:"sweep,omitempty"`
	Points []Point  `json:"points"`
	Notes  []string `json:"notes"`
}

// Point is one scenario's results (one per sweep value, or the only one).
type Point struct {
	// Name is the scenario's spec in a multi-scenario run (Config.Scenarios).
	Name       string         `json:"name,omitempty"`
	Scenario   ScenarioReport `json:"scenario"`
	SweepValue int            `json:"sweepValue,omitempty"`
	Results    []Result       `json:"results"`
	Ratios     []Ratio        `json:"ratios,omitempty"`
}

// ScenarioReport is a Scenario in readable units.
type ScenarioReport struct {
	Events                  int    `json:"events"`
	BaselineEvents          int    `json:"baselineEvents"`
	Partitions              int32  `json:"partitions"`
	Keys                    int    `json:"keys"`
	Latency                 string `json:"latency"`
	LatencyP50              string `json:"latencyP50,omitempty"`
	LatencyP99              string `json:"latencyP99,omitempty"`
	MaxInFlight             int    `json:"maxInFlight"`
	MaxInFlightPerPartition int    `json:"maxInFlightPerPartition,omitempty"`
	// Faults are the simulator's error answers, e.g. "10% 503 (Retry-After 1s)".
	Faults string `json:"faults,omitempty"`
	// Rate is events per second written during the run; 0: a backlog.
	Rate int   `json:"rate,omitempty"`
	Seed int64 `json:"seed"`
	// Replicas is how many bridge processes shared the group (0: one).
	Replicas int `json:"replicas,omitempty"`
	// Delivery is the bridge's --delivery when the scenario set it.
	Delivery string `json:"delivery,omitempty"`
	// RollingRestart: the bridge's processes were restarted one after
	// another mid-run.
	RollingRestart bool `json:"rollingRestart,omitempty"`
	// LedgerAge is how old the bridge's ledger was made before it started
	// (Scenario.LedgerAge), e.g. "2h0m0s"; empty: new.
	LedgerAge string `json:"ledgerAge,omitempty"`
	// CapacityPerSec is the most calls a second the simulator can handle
	// with its capacity and fixed latency (capacity ÷ latency); 0: no
	// such limit.
	CapacityPerSec float64 `json:"capacityPerSec,omitempty"`
}

func scenarioReport(sc Scenario) ScenarioReport {
	r := ScenarioReport{Events: sc.Events, BaselineEvents: sc.baselineEvents(), Partitions: sc.Partitions, Keys: sc.Keys,
		Latency: sc.Latency.String(), MaxInFlight: sc.MaxInFlight, MaxInFlightPerPartition: sc.MaxInFlightPerPartition,
		Rate: sc.Rate, Seed: sc.Seed, Faults: sc.FaultText()}
	if sc.replicas() > 1 {
		r.Replicas = sc.replicas()
	}
	r.Delivery, r.RollingRestart = sc.Delivery, sc.RollingRestart
	if sc.LedgerAge > 0 {
		r.LedgerAge = sc.LedgerAge.String()
	}
	if sc.Capacity > 0 && sc.Latency > 0 {
		r.CapacityPerSec = float64(sc.Capacity) / sc.Latency.Seconds()
	}
	if sc.LatencyP50 > 0 {
		r.LatencyP50, r.LatencyP99 = sc.LatencyP50.String(), max(sc.LatencyP99, sc.LatencyP50).String()
	}
	return r
}

// Result is one contestant's figures at one point.
type Result struct {
	Contestant string `json:"contestant"` // ceiling, baseline, bridge/key …
	Kind       string `json:"kind"`
	Mode       string `json:"mode,omitempty"`
	// Events is the backlog the contestant was given; Done how many
	// distinct records it answered: Results on the result topic (or
	// successful calls for the ceiling) plus Errors.
	Events  int `json:"events"`
	Done    int `json:"done"`
	Results int `json:"results"`
	Errors  int `json:"errors"`
	// Exhausted counts the Errors that are TRANSIENT_EXHAUSTED: records
	// whose every attempt met a transient failure. Against a partner that
	// injects faults some are expected (a share of about rate^attempts of
	// the records), and they do not fail the run (Report.Failed).
	Exhausted  int    `json:"exhausted,omitempty"`
	Duplicates int    `json:"duplicates"`
	FirstError string `json:"firstError,omitempty"`

	RecordsPerSec float64 `json:"recordsPerSec"`
	// SecondHalfPerSec is the rate over the second half of the
	// completions, without start-up effects.
	SecondHalfPerSec float64 `json:"secondHalfRecordsPerSec"`
	// SteadyPerSec is the rate between the 10th and the 90th percentile
	// completion times (Timing.SteadyRate): neither the start-up nor the
	// tail of the last slow records. RecordsPerSec is the whole run's.
	SteadyPerSec float64 `json:"steadyRecordsPerSec"`
	StartupSec   float64 `json:"startupSec"`
	// FirstTenthSec is the time from launch to the 10th percentile
	// completion (Timing.FirstTenth).
	FirstTenthSec float64 `json:"firstTenthSec,omitempty"`
	WallSec       float64 `json:"wallSec"`
	LatencyP50Ms  float64 `json:"latencyP50Ms"`
	LatencyP99Ms  float64 `json:"latencyP99Ms"`
	LatencyMaxMs  float64 `json:"latencyMaxMs"`
	// HandlerP50Ms is the median time of one record's handling as the
	// contestant reports it (the result's latencyMs, sampled; the ceiling:
	// one call), and SlotMs the time a record holds one of the
	// max-in-flight slots by Little's law (max in-flight ÷ records/s,
	// assuming the slots are full). The difference is time spent outside
	// the handler (fetch, dispatch, produce acknowledgement) or slots left
	// idle.
	HandlerP50Ms float64 `json:"handlerP50Ms,omitempty"`
	SlotMs       float64 `json:"slotMs,omitempty"`
	// AvgInFlight and AvgHeld are the bridge's in_flight_records and
	// held_records gauges averaged over the drain (scraped 4 times a
	// second).
	AvgInFlight float64 `json:"avgInFlight,omitempty"`
	AvgHeld     float64 `json:"avgHeld,omitempty"`
	// Sampled is how many records the latencies are of: all, except with
	// a rate, where records written before the first reply are left out.
	Sampled int `json:"latencySampled"`
	// CPU and RSS of the contestant's own process (rusage).
	CPUSec     float64 `json:"cpuSec"`
	CPUPer1k   float64 `json:"cpuSecPer1kRecords"`
	PeakRSSMiB float64 `json:"peakRssMiB"`
	// The bench process meanwhile: simulator, kfake, srfake, collector.
	HarnessCPUSec   float64 `json:"harnessCpuSec"`
	HarnessCPUPer1k float64 `json:"harnessCpuSecPer1kRecords"`
	// Busy is the share of the machine's CPUs the contestant and the
	// harness used together while it ran: near 1, the run was CPU-bound
	// whatever the API latency.
	Busy float64 `json:"benchBusy"`
	// MachineBusy is the share of all CPUs busy meanwhile, whoever used
	// them (/proc/stat); well above Busy, other work on the machine was
	// competing with the run.
	MachineBusy float64 `json:"machineBusy,omitempty"`
	// APICalls counts requests the simulator received, by endpoint;
	// APICallsPerRecord excludes the token endpoint.
	APICalls          map[string]int `json:"apiCalls,omitempty"`
	APICallsPerRecord float64        `json:"apiCallsPerRecord"`
	// PushedBack counts business calls the simulator answered 429 or 503
	// (injected or over capacity), and PushedBackShare is their share of
	// all business calls.
	PushedBack      int     `json:"pushedBack,omitempty"`
	PushedBackShare float64 `json:"pushedBackShare,omitempty"`
	// Replicas is how many bridge processes shared the work (their CPU
	// adds up; peak RSS is the largest one's).
	Replicas int `json:"replicas,omitempty"`
	// VsClean is the whole-run records/s ÷ the same contestant's
	// whole-run records/s in the fault-free scenario of the same run, and
	// SteadyVsClean the same of the steady rates (multi-scenario runs
	// only).
	VsClean       float64 `json:"throughputVsClean,omitempty"`
	SteadyVsClean float64 `json:"steadyVsClean,omitempty"`
	// VsCapacity is the whole-run records/s ÷ the scenario's
	// capacity per second (ScenarioReport.CapacityPerSec), and
	// SteadyVsCapacity the steady rate's (capacity scenarios only).
	VsCapacity       float64 `json:"throughputVsCapacity,omitempty"`
	SteadyVsCapacity float64 `json:"steadyVsCapacity,omitempty"`
	// LongestPartitionGapSec is the longest time any input partition went
	// without a reply between its first and its last (a backlog only):
	// how long a rebalance, a restart or a round stalled a partition.
	LongestPartitionGapSec float64 `json:"longestPartitionGapSec,omitempty"`
	LongestPartitionGapAt  *GapAt  `json:"longestPartitionGapAt,omitempty"`
	// Restarts is how many bridge processes a rolling restart replaced
	// (Scenario.RollingRestart).
	Restarts int `json:"restarts,omitempty"`
	// Outage is what a credentials outage showed (Scenario.CredentialsOutage).
	Outage *OutageResult `json:"credentialsOutage,omitempty"`
	// Exit tells how the process ended when that was not cleanly.
	Exit  string `json:"exit,omitempty"`
	Error string `json:"error,omitempty"`
}

// GapAt says where the longest partition gap was: the input partition,
// and when it began, in seconds from the first process's launch.
type GapAt struct {
	Partition int32   `json:"partition"`
	FromSec   float64 `json:"fromSec"`
}

// OK reports whether the contestant answered every record, all of them
// with results.
func (r Result) OK() bool { return r.Error == "" && r.Done == r.Events && r.Errors == 0 }

// Ratio compares one bridge mode with the ceiling and the baseline at the
// same point; a zero field means the comparison was not possible.
type Ratio struct {
	Contestant string `json:"contestant"`
	// ThroughputVsCeiling is bridge records/s ÷ ceiling records/s.
	ThroughputVsCeiling float64 `json:"throughputVsCeiling,omitempty"`
	// ThroughputVsBaseline is bridge records/s ÷ baseline records/s.
	ThroughputVsBaseline float64 `json:"throughputVsBaseline,omitempty"`
	// CPUVsCeiling is bridge CPU per record ÷ ceiling CPU per record.
	CPUVsCeiling float64 `json:"cpuPerRecordVsCeiling,omitempty"`
}

// Targets of issue 8.
const (
	TargetVsCeiling  = 0.9 // latency-bound throughput
	TargetVsBaseline = 50  // latency-bound throughput
	TargetCPU        = 1.5 // CPU-bound CPU per record
	TargetRSSMiB     = 64  // with a 1M-record backlog
)

// ratios compares each bridge mode with the others. With a rate every
// contestant that keeps up shows the rate, so throughput is not compared.
func ratios(results []Result, rate bool) []Ratio {
	find := func(kind string) *Result {
		for i := range results {
			if results[i].Kind == kind && results[i].Error == "" && results[i].Done > 0 {
				return &results[i]
			}
		}
		return nil
	}
	ceiling, baseline := find(Ceiling), find(Baseline)
	var out []Ratio
	for _, r := range results {
		if r.Kind != Bridge || r.Error != "" || r.Done == 0 {
			continue
		}
		q := Ratio{Contestant: r.Contestant}
		if ceiling != nil && ceiling.RecordsPerSec > 0 && !rate {
			q.ThroughputVsCeiling = r.RecordsPerSec / ceiling.RecordsPerSec
		}
		if ceiling != nil && ceiling.CPUPer1k > 0 {
			q.CPUVsCeiling = r.CPUPer1k / ceiling.CPUPer1k
		}
		if baseline != nil && baseline.RecordsPerSec > 0 && !rate {
			q.ThroughputVsBaseline = r.RecordsPerSec / baseline.RecordsPerSec
		}
		out = append(out, q)
	}
	return out
}

func newReport(cfg Config) *Report {
	r := &Report{Tool: "loyalty-bench", Command: cfg.Command, StartedAt: time.Now().UTC().Truncate(time.Second), GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(), Sweep: cfg.Sweep, Kafka: "kfake"}
	harness := fmt.Sprintf("The simulator, kfake and srfake run inside the bench process: their cost is the harness column, not the contestant's. "+
		"All processes share the machine's %d CPUs, so on a CPU-bound run the simulator competes with the contestant.", runtime.NumCPU())
	if len(cfg.Brokers) > 0 {
		r.Kafka = "external " + strings.Join(cfg.Brokers, ",")
		harness = fmt.Sprintf("Kafka is an external cluster (%s): its brokers' CPU and memory are in no column; the simulator and srfake run inside the bench process "+
			"(the harness column). All processes, the brokers too when they are on this machine, share its %d CPUs.", strings.Join(cfg.Brokers, ","), runtime.NumCPU())
	}
	r.Notes = []string{
		"Every contestant is a child process on a fresh stack with the same events; its CPU time is its own rusage (wait4), " +
			"its peak RSS the VmHWM of its own address space sampled from /proc every 20 ms (ru_maxrss of a Go-started child " +
			"includes the parent's memory at exec). The ceiling and the baseline are this binary re-executed as `loyalty-bench worker`.",
		harness,
		"records/s: distinct records from the first reply to the last (the whole run); steady/s: the replies between the 10th and the 90th percentile reply times " +
			"(0.8 × done ÷ (t90 − t10)), leaving out both the start-up and the tail of the last slow records (a Retry-After wait at the very end weighs on the whole run's rate, not on the steady one); " +
			"2nd half/s: over the second half of the replies, without start-up effects " +
			"(ramp-up, the bridge's idempotency guard on the first records of each partition); start: launch to the first reply (process start, connections, token, group join).",
		latencyNote(cfg.Scenario.Rate > 0),
		"ceiling: the internal/loyalty client calling accrual from max-in-flight goroutines, no Kafka, no Avro; its latency ends at the HTTP answer.",
		"baseline: franz-go consumer group, a goroutine per partition, one record at a time: decode, call, ProduceSync the reply " +
			"(which does not linger), mark for commit; client defaults. It handles only the first baselineEvents events; its rate is steady.",
		"busy ours/all: CPU of the contestant and the harness together over the run's wall time and all CPUs, and of every process on the machine (/proc/stat). " +
			"Near 100% all, the run is CPU-bound whatever the simulated latency and throughput ratios compare CPU costs; all well above ours means other work competed with the run.",
		"time per record: handler p50 is the contestant's own time for one record (the result's latencyMs, one in 8 sampled; " +
			"the ceiling: one call); slot is max in-flight ÷ records/s, how long each record held an in-flight slot if all were busy. " +
			"Slot minus handler is time outside the handler (fetch, dispatch, produce acknowledgement) or idle slots. " +
			"avg in flight/held: the bridge's in_flight_records and held_records gauges, scraped from its /metrics 4 times a second during the drain.",
		"API calls/record counts what the simulator received (accrual, lookup …; token requests excluded): the bridge's guard lookups show here.",
		"Absolute figures vary by machine; the ratios are the claim.",
	}
	if len(cfg.Scenarios) > 0 {
		r.Notes = append(r.Notes,
			"scenarios: each on a fresh stack, one after another, the clean (fault-free) one first; × clean divides a contestant's whole-run records/s by its own in the clean run of the same invocation, "+
				"steady × clean its steady/s by its own steady/s in the clean run. "+
				"Runs one after another on a shared machine differ by tens of percent without any fault: compare ratios, and repeat a surprising one.",
			"× capacity: whole-run records/s ÷ the most calls a second the simulator's capacity allows at its fixed latency (capacity ÷ latency: 32 at 10 ms is 3,200/s); "+
				"steady × capacity: steady/s ÷ the same. "+
				"pushed back: the share of business calls the simulator answered 429 or 503, injected (STATUS=RATE) or over its capacity.",
			"replicas=N: N bridge processes in one consumer group against the one simulator; records/s is their combined rate, CPU their sum, peak RSS the largest one's. "+
				"The ceiling and the baseline are not run in replica and outage scenarios.",
			"credentials-outage=D: once a quarter of the records are answered the simulator's client secret and password are rotated and every token revoked, "+
				"and D later restored; error events must stay 0 (records are held, not failed), and resume s is the time from the restore to the first reply after it.",
			"rolling-restart: the bridge's processes are stopped (SIGTERM: drain, commit, release) and started again one after another, "+
				"process i once (i+1)/(replicas+1) of the records are answered, as a rolling deploy with no surge does. "+
				"partition gap s: the longest time any input partition went without a reply between its first and its last (backlogs only), "+
				"by the replies' producer timestamps: a rebalance, a restart or an exactly-once round shows there.")
	}
	if ledgerAged(cfg) {
		r.Notes = append(r.Notes,
			fmt.Sprintf("ledger-age=D: before each bridge process starts, the bench creates the bridge's ledger topic and writes one settled entry per input partition dated D ago "+
				"(transactionIds no event uses), as a deployment whose ledger has run for D has. Once D exceeds the ledger's rollout margin (%s) its silence about a record means never sent, "+
				"so a partition's new owner (a restart, a rebalance) looks up at the partner only the records the ledger has intents for. "+
				"Without it the ledger is new, as in the first %s after its rollout, and every record a new owner takes as possibly sent is looked up: API calls/record shows the difference.",
				ledger.RolloutMargin, ledger.RolloutMargin))
	}
	return r
}

// ledgerAged reports whether any of cfg's runs ages the bridge's ledger.
func ledgerAged(cfg Config) bool {
	if len(cfg.Scenarios) == 0 {
		return cfg.Scenario.LedgerAge > 0 // a sweep keeps it
	}
	for _, n := range cfg.Scenarios {
		if n.Scenario.LedgerAge > 0 {
			return true
		}
	}
	return false
}

func latencyNote(rate bool) string {
	if rate {
		return "latency: reply timestamp minus input timestamp, for the records written after the contestant's first reply " +
			"(earlier ones waited for it to start); events were written at a fixed rate while it ran (open loop). " +
			"Kafka timestamps have millisecond resolution; the reply's is taken when it is produced, its acknowledgement follows within the producer's linger."
	}
	return "latency: reply timestamp minus the later of the input timestamp and the launch (the backlog exists before the contestant): " +
		"in a backlog drain it is mostly queueing, so it says how fast and how evenly the backlog drains; use --rate for pipeline latency. " +
		"Kafka timestamps have millisecond resolution; the reply's is taken when it is produced, its acknowledgement follows within the producer's linger."
}

// WriteText writes the report as tables.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "loyalty-bench %s, %s, %d CPUs, %s", r.StartedAt.Format(time.RFC3339), r.Platform, r.CPUs, r.GoVersion)
	if r.Kafka != "" {
		fmt.Fprintf(&b, ", Kafka: %s", r.Kafka)
	}
	b.WriteString("\n")
	if r.Command != "" {
		fmt.Fprintf(&b, "$ %s\n", r.Command)
	}
	for _, pt := range r.Points {
		sc := pt.Scenario
		b.WriteString("\n")
		kind := "backlog of"
		if sc.Rate > 0 {
			kind = fmt.Sprintf("%d/s ×", sc.Rate)
		}
		if pt.Name != "" {
			fmt.Fprintf(&b, "scenario %s: ", pt.Name)
		}
		fmt.Fprintf(&b, "%s %d events (baseline %d), %d partitions, %d keys, API latency %s", kind, sc.Events, sc.BaselineEvents,
			sc.Partitions, sc.Keys, sc.Latency)
		if sc.LatencyP50 != "" {
			fmt.Fprintf(&b, " + log-normal p50 %s/p99 %s", sc.LatencyP50, sc.LatencyP99)
		}
		if sc.Faults != "" {
			fmt.Fprintf(&b, ", partner answers %s", sc.Faults)
		}
		fmt.Fprintf(&b, ", max in-flight %d", sc.MaxInFlight)
		if sc.MaxInFlightPerPartition > 0 {
			fmt.Fprintf(&b, " (%d per partition)", sc.MaxInFlightPerPartition)
		}
		if sc.Replicas > 1 {
			fmt.Fprintf(&b, ", %d bridge replicas in one group", sc.Replicas)
		}
		if sc.Delivery != "" {
			fmt.Fprintf(&b, ", %s delivery", sc.Delivery)
		}
		if sc.RollingRestart {
			b.WriteString(", restarted one after another mid-run")
		}
		if sc.LedgerAge != "" {
			fmt.Fprintf(&b, ", the bridge's ledger %s old", sc.LedgerAge)
		}
		b.WriteString("\n\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "contestant\tdone\trecords/s\tsteady/s\t2nd half/s\tstart s\tp50 ms\tp99 ms\tCPU s/1k\tpeak RSS MiB\tharness CPU s/1k\tbusy ours/all\tAPI calls/rec\terrors\t")
		for _, res := range pt.Results {
			if res.Error != "" {
				fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", res.Contestant)
				continue
			}
			fmt.Fprintf(tw, "%s\t%d/%d\t%.0f\t%s\t%.0f\t%.2f\t%.0f\t%.0f\t%.3f\t%.1f\t%.3f\t%s\t%.2f\t%d\t\n", res.Contestant, res.Done, res.Events,
				res.RecordsPerSec, steady(res), res.SecondHalfPerSec, res.StartupSec, res.LatencyP50Ms, res.LatencyP99Ms, res.CPUPer1k, res.PeakRSSMiB,
				res.HarnessCPUPer1k, busy(res), res.APICallsPerRecord, res.Errors)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "time per record\thandler p50 ms\tslot ms\tavg in flight\tavg held\t")
		for _, res := range pt.Results {
			if res.Error == "" && res.SlotMs > 0 {
				inFlight, held := "-", "-"
				if res.AvgInFlight > 0 || res.AvgHeld > 0 {
					inFlight, held = fmt.Sprintf("%.0f", res.AvgInFlight), fmt.Sprintf("%.0f", res.AvgHeld)
				}
				fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%s\t%s\t\n", res.Contestant, res.HandlerP50Ms, res.SlotMs, inFlight, held)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, res := range pt.Results {
			switch {
			case res.Error != "":
				fmt.Fprintf(&b, "  %s: %s\n", res.Contestant, indent(res.Error))
			case res.Errors > 0 || res.Done != res.Events || res.Duplicates > 0:
				fmt.Fprintf(&b, "  %s: %d of %d answered, %d errors (%d TRANSIENT_EXHAUSTED), %d duplicate replies; first error: %s\n",
					res.Contestant, res.Done, res.Events, res.Errors, res.Exhausted, res.Duplicates, res.FirstError)
			}
			if res.Exit != "" {
				fmt.Fprintf(&b, "  %s exit: %s\n", res.Contestant, indent(res.Exit))
			}
			if o := res.Outage; o != nil {
				fmt.Fprintf(&b, "  %s: %s\n", res.Contestant, o.text(res.Errors))
			}
			if res.Restarts > 0 {
				fmt.Fprintf(&b, "  %s: restarts %d (one process after another)\n", res.Contestant, res.Restarts)
			}
			if g := res.LongestPartitionGapAt; g != nil {
				fmt.Fprintf(&b, "  %s: the longest any partition went without a reply: %.2f s (input partition %d, from %.2f s after the launch)\n",
					res.Contestant, res.LongestPartitionGapSec, g.Partition, g.FromSec)
			}
		}
		for _, q := range pt.Ratios {
			if q.ThroughputVsCeiling == 0 && q.ThroughputVsBaseline == 0 && q.CPUVsCeiling == 0 {
				continue // the bridge ran alone
			}
			fmt.Fprintf(&b, "  %s: throughput %s ceiling (target ≥ %.1f× when latency-bound), %s baseline (target ≥ %d×); CPU per record %s ceiling (target ≤ %.1f× when CPU-bound)\n",
				q.Contestant, times(q.ThroughputVsCeiling), TargetVsCeiling, times(q.ThroughputVsBaseline), TargetVsBaseline,
				times(q.CPUVsCeiling), TargetCPU)
		}
	}
	if r.Sweep != nil && len(r.Points) > 1 {
		b.WriteString("\n")
		fmt.Fprintf(&b, "scaling over %s:\n\n", r.Sweep.Param)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "contestant\t%s\trecords/s\tp99 ms\tCPU s/1k\tpeak RSS MiB\t\n", r.Sweep.Param)
		for _, name := range r.contestants() {
			for _, pt := range r.Points {
				for _, res := range pt.Results {
					if res.Contestant != name || res.Error != "" {
						continue
					}
					fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.3f\t%.1f\t\n", name, pt.SweepValue, res.RecordsPerSec,
						res.LatencyP99Ms, res.CPUPer1k, res.PeakRSSMiB)
				}
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if err := r.writeScenarios(&b); err != nil {
		return err
	}
	b.WriteString("\nNotes:\n")
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// compareWithClean sets every result's VsClean and SteadyVsClean from
// the same contestant's result in the fault-free scenario, when there is
// one, and VsCapacity and SteadyVsCapacity in a capacity scenario.
func (r *Report) compareWithClean() {
	var clean *Point
	for i := range r.Points {
		if r.Points[i].Name == ScenarioClean {
			clean = &r.Points[i]
			break
		}
	}
	for pi := range r.Points {
		capacity := r.Points[pi].Scenario.CapacityPerSec
		for i := range r.Points[pi].Results {
			res := &r.Points[pi].Results[i]
			if res.Error != "" {
				continue
			}
			if capacity > 0 {
				res.VsCapacity, res.SteadyVsCapacity = res.RecordsPerSec/capacity, res.SteadyPerSec/capacity
			}
			if clean == nil {
				continue
			}
			for _, c := range clean.Results {
				if c.Contestant != res.Contestant || c.Error != "" {
					continue
				}
				if c.RecordsPerSec > 0 {
					res.VsClean = res.RecordsPerSec / c.RecordsPerSec
				}
				if c.SteadyPerSec > 0 {
					res.SteadyVsClean = res.SteadyPerSec / c.SteadyPerSec
				}
			}
		}
	}
}

// scenarios reports whether the report is of a multi-scenario run.
func (r *Report) scenarios() bool { return len(r.Points) > 0 && r.Points[0].Name != "" }

// writeScenarios writes the side-by-side table of a multi-scenario run.
func (r *Report) writeScenarios(b *strings.Builder) error {
	if !r.scenarios() {
		return nil
	}
	b.WriteString("\nscenarios side by side (records/s and × clean: the whole run, first reply to last; steady/s and steady × clean: " +
		"between the 10th and 90th percentile reply times; × clean divides by the same contestant's figure in the clean run above):\n\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tcontestant\trecords/s\t× clean\t× capacity\tsteady/s\tsteady × clean\tsteady × capacity\tAPI calls/rec\tpushed back\tp99 ms\tpeak RSS MiB\tCPU s/1k\terror events\tduplicate replies\toutage: resume s\tpartition gap s\t")
	for _, pt := range r.Points {
		for _, res := range pt.Results {
			if res.Error != "" {
				fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", pt.Name, res.Contestant)
				continue
			}
			name := res.Contestant
			if res.Replicas > 1 {
				name += fmt.Sprintf(" ×%d", res.Replicas)
			}
			resume := "-"
			if o := res.Outage; o != nil {
				resume = "n/a"
				if o.Note == "" {
					resume = fmt.Sprintf("%.2f", o.ResumeSec)
				}
			}
			// From the rates, not VsCapacity: a report saved before
			// those fields (--from) has its capacity all the same.
			vsCapacity, steadyVsCapacity := "-", "-"
			if c := pt.Scenario.CapacityPerSec; c > 0 {
				vsCapacity, steadyVsCapacity = times(res.RecordsPerSec/c), times(res.SteadyPerSec/c)
			}
			gap := "-"
			if res.LongestPartitionGapSec > 0 {
				gap = fmt.Sprintf("%.2f", res.LongestPartitionGapSec)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.1f%%\t%.0f\t%.1f\t%.3f\t%d\t%d\t%s\t%s\t\n", pt.Name, name,
				res.RecordsPerSec, times(res.VsClean), vsCapacity, steady(res), times(res.SteadyVsClean), steadyVsCapacity,
				res.APICallsPerRecord, 100*res.PushedBackShare, res.LatencyP99Ms, res.PeakRSSMiB, res.CPUPer1k, res.Errors, res.Duplicates, resume, gap)
		}
	}
	return tw.Flush()
}

// text says what the outage showed, beside its targets.
func (o *OutageResult) text(errorEvents int) string {
	if o.Note != "" {
		return "credentials outage: " + o.Note
	}
	return fmt.Sprintf("credentials refused for %.1f s: %d error events (target 0), %d records answered meanwhile, "+
		"first reply %.2f s after the restore (target ≤ %d s)", o.Sec, errorEvents, o.AnsweredDuring, o.ResumeSec, TargetResumeSec)
}

// contestants lists the contestant names in first-seen order.
func (r *Report) contestants() []string {
	var names []string
	for _, pt := range r.Points {
		for _, res := range pt.Results {
			if !slices.Contains(names, res.Contestant) {
				names = append(names, res.Contestant)
			}
		}
	}
	return names
}

func busy(r Result) string {
	if r.MachineBusy == 0 {
		return fmt.Sprintf("%.0f%%", 100*r.Busy)
	}
	return fmt.Sprintf("%.0f%%/%.0f%%", 100*r.Busy, 100*r.MachineBusy)
}

// steady is the steady rate, "-" in a report saved before it was
// measured (--from).
func steady(r Result) string {
	if r.SteadyPerSec == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", r.SteadyPerSec)
}

func times(v float64) string {
	switch {
	case v == 0:
		return "n/a ×"
	case v >= 10:
		return fmt.Sprintf("%.0f×", v)
	}
	return fmt.Sprintf("%.2f×", v)
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n    ") }

// Failed lists the contestants that did not answer every record with a
// result, with why. In a scenario that injects faults, TRANSIENT_EXHAUSTED
// error events (Result.Exhausted) are the faults' expected toll, not a
// failure.
func (r *Report) Failed() error {
	var errs []error
	for _, pt := range r.Points {
		for _, res := range pt.Results {
			switch {
			case res.Error != "":
				errs = append(errs, fmt.Errorf("%s: %s", res.Contestant, firstLine(res.Error)))
			case pt.Scenario.Faults != "" && res.Error == "" && res.Done == res.Events && res.Errors == res.Exhausted:
				// Retries spent on the faults the scenario injects: the
				// bridge as designed (TRANSIENT_EXHAUSTED, retryable).
			case !res.OK():
				errs = append(errs, fmt.Errorf("%s: %d of %d answered, %d errors (%s)", res.Contestant, res.Done, res.Events,
					res.Errors, res.FirstError))
			}
		}
	}
	return errors.Join(errs...)
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
