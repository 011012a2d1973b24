// Command loyalty-bench measures loyalty-bridge against a ceiling (plain
// API calls, no Kafka) and a baseline (a one-record-at-a-time consumer) on
// the same backlog, in one run, and prints throughput, end-to-end latency,
// CPU per record and peak RSS side by side (see internal/benchkit).
//
//	go run ./cmd/loyalty-bench --events 100000 --latency 20ms
//	go run ./cmd/loyalty-bench --events 100000 --latency 0 --contestants ceiling,bridge
//	go run ./cmd/loyalty-bench --sweep backlog=10000,100000,1000000 --contestants bridge --svg scaling.svg
//	go run ./cmd/loyalty-bench --events 20000 --latency 5ms --max-in-flight 64 \
//	    --scenario 503=0.1,retry-after=1s --scenario 500=0.1 --scenario capacity=32,replicas=3 --scenario credentials-outage=30s
//
// Flags may also come from LOYALTY_BENCH_* environment variables. Run it
// from inside the module: it builds ./cmd/loyalty-bridge unless
// --bridge-bin names a binary. `loyalty-bench worker` is internal: the
// bench re-executes itself that way to run the ceiling and the baseline as
// processes of their own.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/benchkit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // a contestant failed, or the run could not start
	exitUsage = 2 // bad flags
)

// env is what run may touch of the outside world; tests pass their own.
type env struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	lookup         func(string) (string, bool)
	// worker is the command line that runs this program as a worker.
	worker []string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	code := run(ctx, env{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin, lookup: os.LookupEnv,
		worker: []string{self, "worker"}}, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, e env, args []string) int {
	if len(args) > 0 && args[0] == "worker" {
		if err := benchkit.RunWorker(ctx, e.stdin, e.stdout); err != nil {
			fmt.Fprintf(e.stderr, "loyalty-bench worker: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	o, err := parse(e, args)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "loyalty-bench: %v\n", err)
		return exitUsage
	}
	if err := bench(ctx, e, o); err != nil {
		fmt.Fprintf(e.stderr, "loyalty-bench: %v\n", err)
		return exitFail
	}
	return exitOK
}

// options is the parsed command line.
type options struct {
	cfg        benchkit.Config
	jsonPath   string
	svgPath    string
	keepDir    bool
	cpuProfile string
	from       string
}

// listFlag is a comma-separated (or repeated) list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	*l = nil
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// repeatFlag collects each occurrence whole.
type repeatFlag []string

func (r *repeatFlag) String() string     { return strings.Join(*r, " ") }
func (r *repeatFlag) Set(v string) error { *r = append(*r, v); return nil }

func parse(e env, args []string) (*options, error) {
	o := &options{}
	sc := benchkit.DefaultScenario()
	contestants := listFlag{benchkit.Ceiling, benchkit.Baseline, benchkit.Bridge}
	modes := listFlag{"key"}
	var brokers listFlag
	var (
		partitions                int
		sweep, workDir            string
		bridgeArgs, bridgeEnv     repeatFlag
		scenarios                 repeatFlag
		stall, timeout            time.Duration
		bridgeBin                 string
		latency, latP50, latP99   time.Duration
		maxInFlight, perPartition int
	)
	fs := flag.NewFlagSet("loyalty-bench", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.IntVar(&sc.Events, "events", sc.Events, "backlog size: PurchaseCompleted events pre-loaded for each contestant")
	fs.IntVar(&partitions, "partitions", int(sc.Partitions), "partitions of the input and reply topics")
	fs.IntVar(&sc.Keys, "keys", sc.Keys, "distinct record keys (loyaltyIds); the simulator seeds that many members")
	fs.DurationVar(&latency, "latency", sc.Latency, "fixed latency the simulator adds to every API call (0: CPU-bound)")
	fs.DurationVar(&latP50, "latency-p50", 0, "adds a log-normal latency with this median (a tail; with --latency-p99)")
	fs.DurationVar(&latP99, "latency-p99", 0, "99th percentile of the log-normal latency (needs --latency-p50)")
	fs.Func("error-rate", "`STATUS=RATE`: the simulator answers this share of business calls with STATUS instead of handling them, e.g. 503=0.1 (repeatable)", func(v string) error {
		st, r, ok := strings.Cut(v, "=")
		status, serr := strconv.Atoi(st)
		rate, rerr := strconv.ParseFloat(r, 64)
		if !ok || serr != nil || rerr != nil {
			return fmt.Errorf("want STATUS=RATE, e.g. 503=0.1")
		}
		if sc.ErrorRates == nil {
			sc.ErrorRates = map[int]float64{}
		}
		sc.ErrorRates[status] = rate
		return nil
	})
	fs.DurationVar(&sc.RetryAfter, "retry-after", 0, "Retry-After of the simulator's 429 and 503 answers (0: its default, 1s; negative: none)")
	fs.IntVar(&sc.Capacity, "capacity", 0, "business requests the simulator handles at once; the excess is answered at once with --over-capacity-status and Retry-After (0: unlimited)")
	fs.IntVar(&sc.OverCapacityStatus, "over-capacity-status", 0, "429 or 503 (0: the simulator's default, 503)")
	fs.IntVar(&maxInFlight, "max-in-flight", sc.MaxInFlight, "bridge --max-in-flight, and the ceiling's concurrent callers")
	fs.IntVar(&perPartition, "max-in-flight-per-partition", 0, "bridge --max-in-flight-per-partition (0: the bridge's default)")
	fs.IntVar(&sc.Rate, "rate", 0, "write the events at this many per second while each contestant runs (open loop; latency then measures the pipeline); 0: a backlog written before it starts")
	fs.IntVar(&sc.BaselineEvents, "baseline-events", sc.BaselineEvents, "the baseline drains at most this many events (0: all); it is slow by design")
	fs.Int64Var(&sc.Seed, "seed", sc.Seed, "seed of keys, amounts and latency samples")
	fs.DurationVar(&sc.LedgerAge, "ledger-age", 0, "make the bridge's transaction ledger this old before it starts, as a deployment's is this long after the ledger's rollout: "+
		"past the ledger's rollout margin (1h) a partition's new owner looks up at the partner only the records the ledger has intents for (0: a new ledger, the first hour after a rollout; less than the ledger's window, 24h)")
	fs.Var(&contestants, "contestants", "comma-separated: ceiling, baseline, bridge")
	fs.Var(&modes, "modes", "bridge ordering modes to run, comma-separated: key, partition, unordered")
	fs.Var(&scenarios, "scenario", "`SPEC`: run this partner behaviour too, beside a fault-free run of the same invocation (repeatable; default contestants: bridge). "+
		"SPEC is clean, or comma-separated knobs: STATUS=RATE (as --error-rate), retry-after=1s|none, capacity=N, over-capacity-status=429|503, "+
		"latency=10ms, max-in-flight=N, replicas=N (bridge processes in one group), credentials-outage[=30s] (credentials refused mid-run), ledger-age=2h (as --ledger-age); "+
		"the other flags are the base of every scenario, e.g. --scenario 503=0.1,retry-after=1s --scenario capacity=32,replicas=3")
	fs.Var(&brokers, "brokers", "`HOST:PORT,...`: run the contestants against this Kafka cluster instead of an in-process kfake (each gets topics and groups of its own, deleted after it; e.g. scripts/kafka start)")
	fs.StringVar(&sweep, "sweep", "", "run once per value: backlog=10000,100000,1000000 or in-flight=16,64,256")
	fs.StringVar(&o.jsonPath, "json", "", "write the report as JSON to this file")
	fs.StringVar(&o.svgPath, "svg", "", "write a chart (throughput, p99, CPU per record, peak RSS) as SVG to this file")
	fs.StringVar(&bridgeBin, "bridge-bin", "", "a built loyalty-bridge (default: go build ./cmd/loyalty-bridge)")
	fs.Var(&bridgeArgs, "bridge-arg", "`ARG` added to the bridge's run command line, e.g. --bridge-arg=--linger=5ms (repeatable)")
	fs.Var(&bridgeEnv, "bridge-env", "`KEY=VALUE` added to the bridge's environment, e.g. GOMEMLIMIT=48MiB (repeatable)")
	fs.StringVar(&workDir, "work-dir", "", "directory for the built bridge and contestants' logs, kept (default: a temporary one, kept only on failure)")
	fs.DurationVar(&stall, "stall", time.Minute, "fail a contestant when no reply comes for this long")
	fs.DurationVar(&timeout, "timeout", 30*time.Minute, "bound on one contestant")
	fs.StringVar(&o.cfg.BridgeProfile, "bridge-cpuprofile", "", "run the bridge in-process in a bench worker under the CPU profiler and write `PREFIX`-<mode>.pprof, with PREFIX-<mode>-heap.pprof (near the heap's peak) and PREFIX-<mode>-allocs.pprof (every allocation of the run; -sample_index=alloc_objects) beside it (its figures are then the worker's)")
	fs.StringVar(&o.from, "from", "", "measure nothing: read a report written by --json and print it (and --svg, --json) again")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the bench process (simulator, Kafka, collector) to this file")
	b := flagenv.New(fs, "LOYALTY_BENCH_")
	b.All()
	if err := b.Parse(args, e.lookup); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var errs []error
	sc.Partitions = int32(min(max(partitions, 0), 1<<20))
	sc.Latency, sc.LatencyP50, sc.LatencyP99 = latency, latP50, latP99
	sc.MaxInFlight, sc.MaxInFlightPerPartition = maxInFlight, perPartition
	o.cfg = benchkit.Config{Command: strings.Join(append([]string{"loyalty-bench"}, args...), " "), BridgeProfile: o.cfg.BridgeProfile, Scenario: sc, Contestants: contestants, Modes: modes, WorkerCommand: e.worker,
		Brokers: brokers, BridgeBin: bridgeBin, BridgeArgs: bridgeArgs, BridgeEnv: bridgeEnv, Stall: stall, Timeout: timeout, Log: e.stderr}
	if sweep != "" {
		w, err := benchkit.ParseSweep(sweep)
		if err != nil {
			errs = append(errs, fmt.Errorf("--sweep: %w", err))
		}
		o.cfg.Sweep = w
	}
	for _, kv := range bridgeEnv {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			errs = append(errs, fmt.Errorf("--bridge-env %q: want KEY=VALUE", kv))
		}
	}
	if len(scenarios) > 0 {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for _, name := range []string{"error-rate", "retry-after", "capacity", "over-capacity-status"} {
			if given[name] {
				errs = append(errs, fmt.Errorf("--%s with --scenario: give the partner's faults in each scenario instead, e.g. --scenario 503=0.1,retry-after=1s", name))
			}
		}
		if given["ledger-age"] {
			errs = append(errs, errors.New("--ledger-age with --scenario: give it in each scenario instead, e.g. --scenario replicas=3,rolling-restart,ledger-age=2h"))
		}
		if !given["contestants"] {
			o.cfg.Contestants = []string{benchkit.Bridge}
		}
		var err error
		if o.cfg.Scenarios, err = benchkit.ParseScenarios(scenarios, sc); err != nil {
			errs = append(errs, fmt.Errorf("--scenario: %w", err))
		}
	}
	if stall <= 0 || timeout <= 0 {
		errs = append(errs, errors.New("--stall and --timeout must be positive"))
	}
	if err := o.cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	o.cfg.WorkDir, o.keepDir = workDir, workDir != ""
	return o, errors.Join(errs...)
}

func bench(ctx context.Context, e env, o *options) (err error) {
	if o.from != "" {
		return rewrite(e, o)
	}
	if o.cfg.WorkDir == "" {
		if o.cfg.WorkDir, err = benchkit.WorkDir(); err != nil {
			return err
		}
	} else if err := os.MkdirAll(o.cfg.WorkDir, 0o755); err != nil {
		return err
	}
	keep := o.keepDir
	defer func() {
		if keep {
			fmt.Fprintf(e.stderr, "logs kept in %s\n", o.cfg.WorkDir)
		} else {
			_ = os.RemoveAll(o.cfg.WorkDir)
		}
	}()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := benchkit.Run(ctx, o.cfg)
	if rep == nil {
		keep = true
		return err
	}
	if werr := rep.WriteText(e.stdout); werr != nil {
		return werr
	}
	if o.jsonPath != "" {
		if werr := writeFile(o.jsonPath, rep.WriteJSON); werr != nil {
			return werr
		}
	}
	if o.svgPath != "" {
		if werr := writeFile(o.svgPath, rep.WriteSVG); werr != nil {
			return werr
		}
	}
	if err != nil {
		keep = true
		return err
	}
	if ferr := rep.Failed(); ferr != nil {
		keep = true
		return fmt.Errorf("not every contestant answered every record:\n%w", ferr)
	}
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// rewrite prints a saved report again, e.g. to draw its chart anew.
func rewrite(e env, o *options) error {
	data, err := os.ReadFile(o.from)
	if err != nil {
		return err
	}
	var rep benchkit.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("%s: %w", o.from, err)
	}
	if err := rep.WriteText(e.stdout); err != nil {
		return err
	}
	if o.svgPath != "" {
		if err := writeFile(o.svgPath, rep.WriteSVG); err != nil {
			return err
		}
	}
	if o.jsonPath != "" {
		return writeFile(o.jsonPath, rep.WriteJSON)
	}
	return nil
}
