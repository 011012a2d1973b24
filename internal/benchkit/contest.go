package benchkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// Contestant kinds (Config.Contestants).
const (
	Ceiling  = "ceiling"
	Baseline = "baseline"
	Bridge   = "bridge"
)

// Consumer-group names of the contestants that read Kafka; the bridge's
// ends in its ordering mode.
const (
	bridgeGroup   = "bench-bridge-"
	baselineGroup = "bench-baseline"
)

// BridgePackage is what the bench builds when Config.BridgeBin is empty.
const BridgePackage = "github.com/loyalty-bridge/loyalty-bridge/cmd/loyalty-bridge"

// Config is one bench run. Zero durations take the documented defaults.
type Config struct {
	Scenario Scenario
	// Sweep, when set, runs the contestants once per value.
	Sweep *Sweep
	// Scenarios, when set, runs the contestants once per scenario instead
	// of once on Scenario, the fault-free one first (see ParseScenarios),
	// and reports each beside it. Not with Sweep.
	Scenarios []NamedScenario
	// Contestants to run, in this order within each point: Ceiling,
	// Baseline, Bridge (default all three).
	Contestants []string
	// Modes are the bridge's ordering modes to run (default key).
	Modes []string
	// WorkerCommand starts this program as a worker: argv to which nothing
	// is appended; the WorkerSpec goes to its stdin (`loyalty-bench
	// worker`). Required for the ceiling and the baseline.
	WorkerCommand []string
	// BridgeBin is a built loyalty-bridge; empty: build BridgePackage with
	// the go command into WorkDir (run the bench inside the module).
	BridgeBin string
	// BridgeArgs are appended to the bridge's command line (after the
	// bench's own flags, so they win).
	BridgeArgs []string
	// BridgeEnv is added to the bridge's environment (KEY=VALUE), e.g.
	// GOMEMLIMIT or GOGC.
	BridgeEnv []string
	// BridgeProfile, when set, runs each bridge mode inside a worker
	// process (the same service, configured by the same flags) under the
	// CPU profiler and writes the profile to BridgeProfile-<mode>.pprof.
	// Its figures are then those of the worker (the profiler costs a
	// little) and are labelled so.
	BridgeProfile string
	// WorkDir holds the built bridge and each contestant's stderr log.
	WorkDir string
	// Stall fails a contestant when no reply comes for this long (default
	// 60s); Timeout bounds one contestant (default 30m).
	Stall, Timeout time.Duration
	// Brokers, when set, is the bootstrap list of an external Kafka
	// cluster the contestants run against instead of an in-process kfake:
	// each contestant gets topics and groups of its own there, deleted
	// when it is done. The broker's CPU and memory are then no one's
	// column.
	Brokers []string
	// Command is recorded in the report as the command line.
	Command string
	// Log receives progress lines (nil: none).
	Log io.Writer
}

// Validate fills the defaults and reports every problem together (Run
// does it too; commands call it early to tell usage errors apart).
func (c *Config) Validate() error {
	var errs []error
	if len(c.Contestants) == 0 {
		c.Contestants = []string{Ceiling, Baseline, Bridge}
	}
	for _, k := range c.Contestants {
		if k != Ceiling && k != Baseline && k != Bridge {
			errs = append(errs, fmt.Errorf("contestant %q: want %s, %s or %s", k, Ceiling, Baseline, Bridge))
		}
	}
	if len(c.Modes) == 0 {
		c.Modes = []string{ordering.Key.String()}
	}
	for _, m := range c.Modes {
		if _, err := ordering.ParseMode(m); err != nil {
			errs = append(errs, fmt.Errorf("mode: %w", err))
		}
	}
	if (slices.Contains(c.Contestants, Ceiling) || slices.Contains(c.Contestants, Baseline) || c.BridgeProfile != "") &&
		len(c.WorkerCommand) == 0 {
		errs = append(errs, errors.New("WorkerCommand is required for the ceiling, the baseline and a profiled bridge"))
	}
	if err := c.Scenario.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Sweep != nil {
		for _, v := range c.Sweep.Values {
			if err := c.Sweep.Apply(c.Scenario, v).Validate(); err != nil {
				errs = append(errs, fmt.Errorf("sweep %s=%d: %w", c.Sweep.Param, v, err))
			}
		}
	}
	for _, b := range c.Brokers {
		if host, port, err := net.SplitHostPort(b); err != nil || host == "" || port == "" {
			errs = append(errs, fmt.Errorf("broker %q: want HOST:PORT", b))
		}
	}
	if c.Sweep != nil && len(c.Scenarios) > 0 {
		errs = append(errs, errors.New("a sweep and scenarios do not go together: run them separately"))
	}
	if len(c.Scenarios) > 0 && !c.Scenarios[0].Clean() {
		errs = append(errs, fmt.Errorf("the first scenario must be %s, the reference of the others", ScenarioClean))
	}
	for _, n := range c.Scenarios {
		if err := n.Scenario.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("scenario %s: %w", n.Name, err))
		}
		if n.Scenario.replicas() > 1 && c.BridgeProfile != "" {
			errs = append(errs, fmt.Errorf("scenario %s: a profiled bridge runs as one process, not %d replicas", n.Name, n.Scenario.replicas()))
		}
	}
	if ledgerAged(*c) {
		for _, a := range c.BridgeArgs {
			if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") &&
				(name == "ledger" || name == "ledger-topic" || name == "dedup-window") {
				errs = append(errs, fmt.Errorf("bridge argument %s: a ledger age is written to the bridge's default ledger, with its default window", a))
			}
		}
	}
	if c.Stall <= 0 {
		c.Stall = 60 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Minute
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return errors.Join(errs...)
}

// Run measures every contestant at every point and returns the report. A
// contestant that fails is reported with its error and the run goes on;
// Run itself fails only on a bad Config or a canceled ctx.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.WorkDir == "" {
		return nil, errors.New("benchkit: Config.WorkDir is required")
	}
	r := newReport(cfg)
	var bridgeErr error
	if slices.Contains(cfg.Contestants, Bridge) && cfg.BridgeProfile == "" {
		cfg.BridgeBin, bridgeErr = PrepareBridge(ctx, cfg.BridgeBin, cfg.WorkDir)
		if bridgeErr != nil {
			fmt.Fprintf(cfg.Log, "bridge not measured: %v\n", bridgeErr)
		}
	}
	type point struct {
		name  string
		sc    Scenario
		value int
	}
	points := []point{{sc: cfg.Scenario}}
	switch {
	case cfg.Sweep != nil:
		points = nil
		for _, v := range cfg.Sweep.Values {
			points = append(points, point{sc: cfg.Sweep.Apply(cfg.Scenario, v), value: v})
		}
	case len(cfg.Scenarios) > 0:
		points = nil
		for _, n := range cfg.Scenarios {
			points = append(points, point{name: n.Name, sc: n.Scenario})
		}
	}
	for pi, ptc := range points {
		sc := ptc.sc
		switch {
		case cfg.Sweep != nil:
			fmt.Fprintf(cfg.Log, "== %s = %d\n", cfg.Sweep.Param, ptc.value)
		case ptc.name != "":
			fmt.Fprintf(cfg.Log, "== scenario %s\n", ptc.name)
		}
		pt := Point{Name: ptc.name, Scenario: scenarioReport(sc), SweepValue: ptc.value}
		for _, k := range cfg.Contestants {
			switch {
			case k == Bridge:
				for _, m := range cfg.Modes {
					pt.Results = append(pt.Results, measure(ctx, cfg, sc, k, m, bridgeErr, pi))
				}
			case sc.bridgeOnly():
				fmt.Fprintf(cfg.Log, "%s: skipped (replicas, a credentials outage and a delivery are the bridge's)\n", k)
			default:
				pt.Results = append(pt.Results, measure(ctx, cfg, sc, k, "", nil, pi))
			}
			if err := ctx.Err(); err != nil {
				r.Points = append(r.Points, pt)
				r.compareWithClean()
				return r, err
			}
		}
		pt.Ratios = ratios(pt.Results, sc.Rate > 0)
		r.Points = append(r.Points, pt)
	}
	r.compareWithClean()
	return r, nil
}

// PrepareBridge returns a loyalty-bridge binary that has a `run` command:
// bin when set, else one built from BridgePackage into dir. The error
// says plainly why the bridge cannot be measured.
func PrepareBridge(ctx context.Context, bin, dir string) (string, error) {
	if bin == "" {
		bin = filepath.Join(dir, "loyalty-bridge")
		out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, BridgePackage).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go build %s: %w\n%s", BridgePackage, err, trimOutput(out))
		}
	}
	out, _ := exec.CommandContext(ctx, bin, "run", "-h").CombinedOutput()
	if !bytes.Contains(out, []byte("-max-in-flight")) {
		return "", fmt.Errorf("%s has no `run` command with --max-in-flight yet; `run -h` says:\n%s", bin, trimOutput(out))
	}
	return bin, nil
}

func trimOutput(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 1500 {
		s = s[:1500] + " …"
	}
	return s
}

// measure runs one contestant on a fresh stack.
func measure(ctx context.Context, cfg Config, sc Scenario, kind, mode string, unavailable error, point int) Result {
	res := Result{Contestant: kind, Kind: kind, Mode: mode, Events: sc.Events}
	if mode != "" {
		res.Contestant = kind + "/" + mode
		if cfg.BridgeProfile != "" {
			res.Contestant += " (profiled)"
		}
	}
	if kind == Baseline {
		res.Events = sc.baselineEvents()
	}
	if unavailable != nil {
		res.Error = "not measured: " + unavailable.Error()
		return res
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	fmt.Fprintf(cfg.Log, "%s: %d events, %d partitions, %d keys, latency %s, in-flight %d\n",
		res.Contestant, res.Events, sc.Partitions, sc.Keys, sc.LatencyText(), sc.MaxInFlight)
	if err := measureInto(ctx, cfg, sc, &res, point); err != nil {
		res.Error = err.Error()
		fmt.Fprintf(cfg.Log, "%s: FAILED: %v\n", res.Contestant, err)
	} else {
		fmt.Fprintf(cfg.Log, "%s: %d records in %.1fs: %.0f records/s, p99 %.0f ms, CPU %.3f s/1k, RSS %.0f MiB\n",
			res.Contestant, res.Done, res.WallSec, res.RecordsPerSec, res.LatencyP99Ms, res.CPUPer1k, res.PeakRSSMiB)
	}
	return res
}

func measureInto(ctx context.Context, cfg Config, sc Scenario, res *Result, point int) error {
	st, err := startStack(ctx, sc, cfg.Brokers)
	if err != nil {
		return err
	}
	defer st.Close()
	if st.external {
		fmt.Fprintf(cfg.Log, "  topics and groups %s* on %s (deleted after)\n", st.prefix, strings.Join(cfg.Brokers, ","))
	}
	n := res.Events
	var coll *collector
	if res.Kind != Ceiling {
		if sc.Rate == 0 {
			t0 := time.Now()
			if err := st.write(ctx, sc, n, func(w int) { fmt.Fprintf(cfg.Log, "  written %d\n", w) }); err != nil {
				return err
			}
			fmt.Fprintf(cfg.Log, "  backlog of %d written in %.1fs\n", n, time.Since(t0).Seconds())
		}
		if coll, err = newCollector(st, n); err != nil {
			return err
		}
		defer coll.close()
	}
	if res.Kind == Bridge && sc.LedgerAge > 0 {
		if err := st.ageLedger(ctx, st.bridgeGroupOf(res.Mode), sc.Partitions, sc.LedgerAge); err != nil {
			return err
		}
		fmt.Fprintf(cfg.Log, "  the bridge's ledger made %s old\n", sc.LedgerAge)
	}
	// Start from a clean heap so that the harness CPU of one contestant
	// does not pay for the garbage of the previous one.
	runtime.GC()
	debug.FreeOSMemory()

	replicas := 1
	if res.Kind == Bridge {
		replicas = sc.replicas()
		res.Replicas = replicas
	}
	harness0, t0 := selfUsage(), time.Now()
	sysBusy0, sysTotal0, sysOK := cpuTimes()
	// Every replica is a process of its own with its own metrics listener
	// and log; they share the consumer group and the simulator.
	var (
		procs        []*proc
		gauges       []*gaugeSampler
		logPaths     []string // by replica
		metricsAddrs []string
	)
	defer func() {
		for _, p := range procs {
			_ = p.stop(5 * time.Second) // only after a failure: a measured run stopped them already
		}
	}()
	for i := range replicas {
		name := strings.Trim(res.Kind+"-"+res.Mode, "-")
		if replicas > 1 {
			name += "-" + strconv.Itoa(i+1)
		}
		logPath := filepath.Join(cfg.WorkDir, fmt.Sprintf("%02d-%s.log", point, name))
		metricsAddr := "127.0.0.1:0"
		if res.Kind == Bridge {
			if metricsAddr, err = freeAddr(); err != nil {
				return err
			}
			gauges = append(gauges, &gaugeSampler{url: "http://" + metricsAddr + "/metrics",
				active: func() bool { d := coll.Done(); return d > 0 && d < n }})
		}
		p, err := launch(cfg, sc, st, res, logPath, metricsAddr, i, replicas)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		logPaths, metricsAddrs = append(logPaths, logPath), append(metricsAddrs, metricsAddr)
	}
	p := procs[0]
	if len(gauges) > 0 {
		gctx, stopGauges := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, g := range gauges {
			wg.Go(func() { g.run(gctx) })
		}
		defer func() {
			stopGauges()
			wg.Wait()
			for _, g := range gauges {
				inFlight, held, _ := g.averages()
				res.AvgInFlight += inFlight
				res.AvgHeld += held
			}
		}()
	}
	// With a rate, the input is written while the contestant runs.
	writeDone := make(chan error, 1)
	if coll != nil && sc.Rate > 0 {
		go func() { writeDone <- st.write(ctx, sc, n, nil) }()
	} else {
		writeDone <- nil
	}
	stall := cfg.Stall
	var out *outage
	if res.Kind == Bridge && sc.CredentialsOutage > 0 && coll != nil {
		out = startOutage(ctx, st, sc.CredentialsOutage, func() bool { return coll.Done() >= n/4 }, cfg.Log)
		defer out.stop()
		stall += sc.CredentialsOutage // nothing is answered meanwhile, by design
	}
	exited := allExited(procs)
	var roll *rolling
	rollCtx, endRolling := context.WithCancel(ctx)
	defer endRolling()
	if res.Kind == Bridge && sc.RollingRestart && coll != nil {
		roll = startRolling(rollCtx, procs, rollingOptions{answered: coll.Done, n: n, log: cfg.Log,
			ready: func(ctx context.Context, i int) bool { return ready(ctx, "http://"+metricsAddrs[i]+"/readyz") },
			relaunch: func(i int) (*proc, error) {
				return launch(cfg, sc, st, res, strings.TrimSuffix(logPaths[i], ".log")+"-restarted.log", metricsAddrs[i], i, replicas)
			}})
		exited = roll.exited()
		// Each stop drains and rejoins: nothing may be answered meanwhile.
		stall += stopGrace
	}
	stopProgress := progress(cfg.Log, res.Contestant, n, p.launch, coll)
	var (
		timing  Timing
		procErr error
	)
	if coll != nil {
		cerr := coll.run(ctx, p.launch, stall, exited)
		stopProgress()
		if roll != nil {
			endRolling()
			var rerr error
			procs, rerr = roll.wait(procs)
			res.Restarts = len(roll.started)
			if rerr != nil && cerr == nil {
				cerr = rerr
			}
		}
		procErr = stopAll(procs, stopGrace)
		werr := <-writeDone
		if cerr != nil {
			if procErr != nil {
				return fmt.Errorf("%d of %d answered: %w; %w", coll.Done(), n, cerr, procErr)
			}
			return fmt.Errorf("%d of %d answered: %w%s", coll.Done(), n, cerr, p.logTail())
		}
		if werr != nil {
			return werr
		}
		var avail []int64
		if sc.Rate > 0 {
			avail = st.inputTS
		}
		var reps replies
		reps, timing = coll.result(avail)
		res.Results, res.Errors, res.Duplicates, res.FirstError = reps.results, reps.errors, reps.duplicates, reps.firstError
		res.Exhausted = reps.exhausted
		if sc.Rate == 0 {
			g := longestPartitionGap(coll.done.done, st.inputPart)
			res.LongestPartitionGapSec = g.gap.Seconds()
			if g.gap > 0 {
				res.LongestPartitionGapAt = &GapAt{Partition: g.partition, FromSec: time.Duration(g.from - p.launch.UnixNano()).Seconds()}
			}
		}
		res.HandlerP50Ms = medianMs(reps.handlerMs)
		if reps.foreign > 0 {
			res.FirstError = strings.TrimSpace(fmt.Sprintf("%s; %d replies with unknown keys", res.FirstError, reps.foreign))
		}
		if out != nil {
			out.stop()
			out.fill(res, coll.done.done)
		}
	} else {
		procErr = p.wait(ctx)
		stopProgress()
		if procErr != nil {
			return procErr
		}
		var wres WorkerResult
		if err := json.Unmarshal(p.stdout.Bytes(), &wres); err != nil || wres.Timing == nil {
			return fmt.Errorf("ceiling result: %v in %q", err, trimOutput(p.stdout.Bytes()))
		}
		timing = *wres.Timing
		res.Results, res.Errors, res.FirstError = wres.Done, wres.Errors, wres.FirstError
		res.HandlerP50Ms = wres.CallP50Ms
	}
	harness1, t1 := selfUsage(), time.Now()
	sysBusy1, sysTotal1, sysOK1 := cpuTimes()
	if procErr != nil {
		// The records were all answered; say how the process ended.
		res.Exit = procErr.Error()
	}
	var u usage
	for _, p := range procs {
		pu := p.usage()
		u.cpu += pu.cpu
		u.maxRSS = max(u.maxRSS, pu.maxRSS)
	}
	res.fill(timing, u, harness1.cpu-harness0.cpu, st.Sim.Counters())
	if res.Kind != Baseline && res.RecordsPerSec > 0 {
		res.SlotMs = float64(sc.MaxInFlight*replicas) / res.RecordsPerSec * 1000
	}
	if d := t1.Sub(t0); d > 0 {
		res.Busy = (res.CPUSec + res.HarnessCPUSec) / d.Seconds() / float64(runtime.NumCPU())
	}
	if sysOK && sysOK1 && sysTotal1 > sysTotal0 {
		res.MachineBusy = float64(sysBusy1-sysBusy0) / float64(sysTotal1-sysTotal0)
	}
	return nil
}

// allExited is closed once every process has exited.
func allExited(procs []*proc) <-chan struct{} {
	if len(procs) == 1 {
		return procs[0].exited
	}
	ch := make(chan struct{})
	go func() {
		for _, p := range procs {
			<-p.exited
		}
		close(ch)
	}()
	return ch
}

// stopAll stops every process at once (replicas leave the group
// together, not one after another taking over each other's partitions).
func stopAll(procs []*proc, grace time.Duration) error {
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.stop(grace) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// The simulator's demo credentials: public on purpose.
var creds = struct{ ClientID, ClientSecret, Username, Password string }{
	sim.DefaultClientID, sim.DefaultClientSecret, sim.DefaultUsername, sim.DefaultPassword}

// launch starts the contestant's process against st; replica i of
// replicas when the bridge runs as several.
func launch(cfg Config, sc Scenario, st *stack, res *Result, logPath, metricsAddr string, replica, replicas int) (*proc, error) {
	if res.Kind == Bridge {
		args := []string{"run",
			"--brokers", strings.Join(st.Brokers, ","),
			"--group", st.bridgeGroupOf(res.Mode),
			"--purchase-topic", st.topics.Purchase,
			"--refund-redemption-topic", st.topics.RefundRedemption,
			"--member-onboarding-topic", st.topics.MemberOnboarding,
			"--schema-registry-url", st.RegistryURL,
			"--api-base-url", st.SimURL,
			"--client-id", creds.ClientID, "--client-secret", creds.ClientSecret,
			"--username", creds.Username, "--password", creds.Password,
			"--ordering", res.Mode,
			"--max-in-flight", strconv.Itoa(sc.MaxInFlight),
			"--metrics-addr", metricsAddr,
			"--log-level", "info",
		}
		if sc.MaxInFlightPerPartition > 0 {
			args = append(args, "--max-in-flight-per-partition", strconv.Itoa(sc.MaxInFlightPerPartition))
		}
		if sc.Delivery != "" {
			args = append(args, "--delivery", sc.Delivery)
		}
		if sc.Delivery == DeliveryExactlyOnce {
			// Replicas on one host would all take the hostname as their
			// TransactionalID and fence one another.
			args = append(args, "--transactional-id", fmt.Sprintf("bench-%s-%d", res.Mode, replica))
		}
		args = append(args, cfg.BridgeArgs...)
		name := res.Contestant
		if replicas > 1 {
			name += fmt.Sprintf(" replica %d", replica+1)
		}
		if cfg.BridgeProfile != "" {
			spec := WorkerSpec{Kind: KindBridge, BridgeArgs: args[1:], Profile: cfg.BridgeProfile + "-" + res.Mode + ".pprof"}
			in, err := json.Marshal(spec)
			if err != nil {
				return nil, err
			}
			return startProc(name, cfg.WorkerCommand, cfg.BridgeEnv, in, logPath)
		}
		if replica == 0 {
			if err := registerSchemas(cfg, st); err != nil {
				return nil, err
			}
		}
		return startProc(name, append([]string{cfg.BridgeBin}, args...), cfg.BridgeEnv, nil, logPath)
	}
	// The worker learns its launch time from the spec, so it is taken
	// just before the start.
	now := time.Now()
	spec := WorkerSpec{Kind: res.Kind, Scenario: sc, Events: res.Events, Base: now, Launch: now.UnixNano(),
		SimURL: st.SimURL, ClientID: creds.ClientID, ClientSecret: creds.ClientSecret,
		Username: creds.Username, Password: creds.Password,
		Brokers: st.Brokers, RegistryURL: st.RegistryURL, Group: st.group(baselineGroup), Topics: st.topics}
	in, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	p, err := startProc(res.Contestant, cfg.WorkerCommand, nil, in, logPath)
	if p != nil {
		p.launch = now
	}
	return p, err
}

// registerSchemas has the contestant's binary register its own schemas
// (`schemas register`), as an operator deploying it would. The stack holds
// this tree's already; a bridge built from another commit (--bridge-bin,
// to compare two versions on one harness) may need versions of its own,
// and refuses to start without them.
func registerSchemas(cfg Config, st *stack) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cfg.BridgeBin, "schemas", "register",
		"--schema-registry-url", st.RegistryURL,
		"--purchase-topic", st.topics.Purchase,
		"--refund-redemption-topic", st.topics.RefundRedemption,
		"--member-onboarding-topic", st.topics.MemberOnboarding)
	cmd.Env = append(os.Environ(), cfg.BridgeEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s schemas register: %w: %s", cfg.BridgeBin, err, bytes.TrimSpace(out))
	}
	return nil
}

// fill sets the figures from the contestant's timing, its process's
// usage, the bench process's CPU meanwhile and the simulator's counters.
func (res *Result) fill(t Timing, u usage, harness time.Duration, c sim.Counters) {
	res.Done = t.Done
	res.Sampled = t.Sampled
	res.RecordsPerSec = t.Rate()
	res.SecondHalfPerSec = t.SecondHalfRate()
	res.SteadyPerSec = t.SteadyRate()
	res.StartupSec = t.Startup().Seconds()
	res.FirstTenthSec = t.FirstTenth().Seconds()
	res.WallSec = t.Wall().Seconds()
	res.LatencyP50Ms = ms(t.P50)
	res.LatencyP99Ms = ms(t.P99)
	res.LatencyMaxMs = ms(t.Max)
	res.CPUSec = u.cpu.Seconds()
	res.PeakRSSMiB = float64(u.maxRSS) / (1 << 20)
	res.HarnessCPUSec = harness.Seconds()
	if res.Done > 0 {
		res.CPUPer1k = res.CPUSec / float64(res.Done) * 1000
		res.HarnessCPUPer1k = res.HarnessCPUSec / float64(res.Done) * 1000
	}
	res.APICalls = map[string]int{}
	total, business := 0, 0
	for ep, n := range c.Totals {
		if n > 0 {
			res.APICalls[ep] = n
			if ep != sim.EndpointToken {
				total += n
			}
			if ep != sim.EndpointToken && ep != sim.EndpointExchangeToken {
				business += n
				res.PushedBack += c.Calls[ep][http.StatusTooManyRequests] + c.Calls[ep][http.StatusServiceUnavailable]
			}
		}
	}
	if res.Done > 0 {
		res.APICallsPerRecord = float64(total) / float64(res.Done)
	}
	if business > 0 {
		res.PushedBackShare = float64(res.PushedBack) / float64(business)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// progress prints a line every 5 seconds until the returned func is
// called.
func progress(w io.Writer, name string, n int, launch time.Time, coll *collector) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if coll != nil {
					fmt.Fprintf(w, "  %s: %d/%d answered after %.0fs\n", name, coll.Done(), n, time.Since(launch).Seconds())
				} else {
					fmt.Fprintf(w, "  %s: running for %.0fs\n", name, time.Since(launch).Seconds())
				}
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// WorkDir makes a fresh directory for a run's logs and binaries.
func WorkDir() (string, error) { return os.MkdirTemp("", "loyalty-bench-") }
