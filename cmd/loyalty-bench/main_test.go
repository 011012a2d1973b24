package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/benchkit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
)

// The bench re-executes itself as a worker; under `go test` "itself" is the
// test binary, so TestMain plays the worker when asked to.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, env{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin,
			lookup: func(string) (string, bool) { return "", false }}, os.Args[1:])
		stop()
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

func testEnv(t *testing.T, stdout, stderr io.Writer) env {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return env{stdout: stdout, stderr: stderr, stdin: strings.NewReader(""),
		lookup: func(string) (string, bool) { return "", false }, worker: []string{self, "worker"}}
}

// TestSmoke runs the whole bench end to end at a tiny size and checks the
// report's structure and that every contestant answered every record. It
// is a correctness check; speed is never asserted.
func TestSmoke(t *testing.T) { smoke(t, nil) }

// TestSmokeRealKafka is TestSmoke against the real cluster
// LOYALTY_BRIDGE_TEST_BROKERS names (--brokers), and checks that the bench
// deletes the topics it made there.
func TestSmokeRealKafka(t *testing.T) {
	seeds := realkafka.Brokers(t)
	stderr := smoke(t, []string{"--brokers", strings.Join(seeds, ",")})
	m := regexp.MustCompile(`topics and groups (loyalty-bench-[^ *]+)\*`).FindAllStringSubmatch(stderr, -1)
	if len(m) != 5 {
		t.Fatalf("the bench named %d topic prefixes, want one per contestant (5):\n%s", len(m), stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range topics.Names() {
		for _, p := range m {
			if strings.HasPrefix(name, p[1]) {
				t.Errorf("topic %s left on the cluster", name)
			}
		}
	}
}

// buildBridge builds the bridge into dir for the bench to measure. Only a
// platform without the go command to build it with skips; a bridge that
// does not build, or has no `run` command the bench can drive, fails the
// test: a bench that quietly measures less is no check.
func buildBridge(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command to build the bridge with: %v", err)
	}
	bin, err := benchkit.PrepareBridge(ctx, "", dir)
	if err != nil {
		t.Fatalf("the bridge cannot be measured: %v", err)
	}
	return bin
}

// smoke runs the bench with extra arguments and returns its stderr.
func smoke(t *testing.T, extra []string) string {
	t.Helper()
	ctx, dir, bridgeBin := endToEnd(t)
	contestants := "ceiling,baseline,bridge"
	modes := "key,partition,unordered"
	jsonPath, svgPath := filepath.Join(dir, "report.json"), filepath.Join(dir, "chart.svg")
	var stdout, stderr bytes.Buffer
	args := []string{"--events", "300", "--partitions", "4", "--keys", "50", "--latency", "0",
		"--max-in-flight", "32", "--contestants", contestants, "--modes", modes, "--stall", "30s",
		"--work-dir", filepath.Join(dir, "work"), "--json", jsonPath, "--svg", svgPath}
	args = append(args, extra...)
	args = append(args, "--bridge-bin", bridgeBin)
	rep := runBench(ctx, t, args, jsonPath, &stdout, &stderr)
	if len(rep.Points) != 1 {
		t.Fatalf("%d points, want 1", len(rep.Points))
	}
	want := []string{"ceiling", "baseline", "bridge/key", "bridge/partition", "bridge/unordered"}
	got := rep.Points[0].Results
	if len(got) != len(want) {
		t.Fatalf("%d results, want %v", len(got), want)
	}
	for i, r := range got {
		if r.Contestant != want[i] {
			t.Errorf("result %d is %q, want %q", i, r.Contestant, want[i])
		}
		if r.Exit != "" {
			t.Errorf("%s did not exit cleanly: %s", r.Contestant, r.Exit)
		}
		if !r.OK() || r.Done != 300 || r.Results != 300 || r.Events != 300 {
			t.Errorf("%s: done %d/%d, results %d, errors %d, error %q, first error %q", r.Contestant, r.Done, r.Events,
				r.Results, r.Errors, r.Error, r.FirstError)
		}
		if r.RecordsPerSec <= 0 || r.CPUSec <= 0 || r.PeakRSSMiB <= 0 || r.LatencyP99Ms < r.LatencyP50Ms {
			t.Errorf("%s: implausible figures %+v", r.Contestant, r)
		}
		if r.APICalls["point-accrual"] < 300 {
			t.Errorf("%s: the simulator saw %d accruals, want at least 300", r.Contestant, r.APICalls["point-accrual"])
		}
		if !strings.Contains(stdout.String(), r.Contestant) {
			t.Errorf("table does not mention %s", r.Contestant)
		}
	}
	if len(rep.Points[0].Ratios) != 3 {
		t.Errorf("ratios %+v, want one per bridge mode", rep.Points[0].Ratios)
	}

	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	var root struct{ XMLName xml.Name }
	if err := xml.Unmarshal(svg, &root); err != nil || root.XMLName.Local != "svg" {
		t.Fatalf("chart is not an SVG document: %v, root %q", err, root.XMLName.Local)
	}

	// A saved report prints and draws again without measuring.
	var again bytes.Buffer
	svg2 := filepath.Join(dir, "again.svg")
	if code := run(ctx, testEnv(t, &again, &stderr), []string{"--from", jsonPath, "--svg", svg2}); code != exitOK {
		t.Fatalf("--from: exit %d; stderr:\n%s", code, stderr.String())
	}
	if again.String() != stdout.String() {
		t.Errorf("--from printed\n%s\nwant\n%s", again.String(), stdout.String())
	}
	if b, err := os.ReadFile(svg2); err != nil || !bytes.Equal(b, svg) {
		t.Errorf("--from drew a different chart (%v)", err)
	}
	return stderr.String()
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--events", "0"},
		{"--sweep", "speed=1,2"},
		{"--latency-p99", "10ms"},
		{"--contestants", "nobody"},
		{"extra"},
		{"--brokers", "localhost"},
		{"--scenario", "503=0.1,retry=1s"},
		{"--scenario", "replicas=0"},
		{"--scenario", "503=0.1", "--error-rate", "500=0.1"},
		{"--scenario", "capacity=8", "--capacity", "8"},
		{"--scenario", "503=0.1", "--sweep", "backlog=10,20"},
		{"--scenario", "503=0.1", "--scenario", "503=0.1"},
		{"--ledger-age", "-1h"},
		{"--ledger-age", "24h"},
		{"--ledger-age", "2h", "--scenario", "replicas=3,rolling-restart"},
		{"--ledger-age", "2h", "--bridge-arg=--ledger-topic=other"},
		{"--scenario", "ledger-age"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), testEnv(t, &stdout, &stderr), args); code != exitUsage {
			t.Errorf("%q: exit %d, want %d (stderr %q)", args, code, exitUsage, stderr.String())
		}
	}
}

// --ledger-age, or its variable, ages the base scenario's ledger; a
// scenario's ledger-age knob its own.
func TestLedgerAgeFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []time.Duration // the base, or each scenario
	}{
		{"default", nil, nil, []time.Duration{0}},
		{"flag", []string{"--ledger-age", "2h"}, nil, []time.Duration{2 * time.Hour}},
		{"variable", nil, map[string]string{"LOYALTY_BENCH_LEDGER_AGE": "90m"}, []time.Duration{90 * time.Minute}},
		{"scenarios", []string{"--scenario", "replicas=3,rolling-restart", "--scenario", "replicas=3,rolling-restart,ledger-age=2h"}, nil,
			[]time.Duration{0, 0, 2 * time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := testEnv(t, io.Discard, io.Discard)
			e.lookup = func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			o, err := parse(e, append([]string{"--contestants", "bridge"}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			var got []time.Duration
			if len(o.cfg.Scenarios) == 0 {
				got = append(got, o.cfg.Scenario.LedgerAge)
			}
			for _, n := range o.cfg.Scenarios {
				got = append(got, n.Scenario.LedgerAge)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ledger ages %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLedgerAge runs the bridge on a ledger the bench made two hours old:
// the bridge accepts the topic the bench created (it creates none) and
// answers every record, and the report says how old its ledger was.
func TestLedgerAge(t *testing.T) {
	ctx, dir, bridgeBin := endToEnd(t)
	jsonPath := filepath.Join(dir, "report.json")
	var stdout, stderr bytes.Buffer
	args := []string{"--events", "300", "--partitions", "4", "--keys", "50", "--latency", "0", "--max-in-flight", "32",
		"--contestants", "bridge", "--ledger-age", "2h", "--stall", "30s", "--bridge-bin", bridgeBin,
		"--work-dir", filepath.Join(dir, "work"), "--json", jsonPath}
	rep := runBench(ctx, t, args, jsonPath, &stdout, &stderr)
	if len(rep.Points) != 1 || rep.Points[0].Scenario.LedgerAge != "2h0m0s" || len(rep.Points[0].Results) != 1 {
		t.Fatalf("points %+v, want one with the bridge on a ledger 2h old", rep.Points)
	}
	if r := rep.Points[0].Results[0]; !r.OK() || r.Done != 300 || r.Results != 300 || r.Duplicates != 0 {
		t.Errorf("done %d, results %d, errors %d (%s), %d duplicates, error %q: want every record answered once", r.Done, r.Results,
			r.Errors, r.FirstError, r.Duplicates, r.Error)
	}
	if !strings.Contains(stderr.String(), "the bridge's ledger made 2h0m0s old") || !strings.Contains(stdout.String(), "the bridge's ledger 2h0m0s old") {
		t.Errorf("the run does not say the ledger was aged:\n%s", stderr.String())
	}
	// The bridge found the topic made: it did not create its own.
	log, err := os.ReadFile(filepath.Join(dir, "work", "00-bridge-key.log"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(log, []byte("ledger topic created")) {
		t.Errorf("the bridge created its ledger topic:\n%s", log)
	}
}

// TestScenarios runs a fault-free run and two degraded ones in one
// invocation: two bridge replicas against a partner answering 503 to a
// share of calls, and a credentials outage. It checks the report's
// structure and that no record became an error event; speed is never
// asserted.
func TestScenarios(t *testing.T) {
	ctx, dir, bridgeBin := endToEnd(t)
	jsonPath, svgPath := filepath.Join(dir, "report.json"), filepath.Join(dir, "chart.svg")
	var stdout, stderr bytes.Buffer
	// Written at 150 events/s, so the outage (once a quarter is answered)
	// begins and ends while records are still coming.
	args := []string{"--events", "300", "--rate", "150", "--partitions", "4", "--keys", "50", "--latency", "1ms",
		"--max-in-flight", "16", "--stall", "30s", "--bridge-bin", bridgeBin, "--work-dir", filepath.Join(dir, "work"),
		"--scenario", "503=0.03,retry-after=none,replicas=2", "--scenario", "credentials-outage=1s",
		"--json", jsonPath, "--svg", svgPath}
	rep := runBench(ctx, t, args, jsonPath, &stdout, &stderr)
	want := []string{"clean", "503=0.03,retry-after=none,replicas=2", "credentials-outage=1s"}
	if len(rep.Points) != len(want) {
		t.Fatalf("%d points, want %q", len(rep.Points), want)
	}
	for i, pt := range rep.Points {
		if pt.Name != want[i] {
			t.Errorf("point %d is %q, want %q", i, pt.Name, want[i])
		}
		if len(pt.Results) != 1 || pt.Results[0].Contestant != "bridge/key" {
			t.Fatalf("%s: results %+v, want the bridge alone", pt.Name, pt.Results)
		}
		r := pt.Results[0]
		if !r.OK() || r.Done != 300 || r.VsClean <= 0 || r.SteadyPerSec <= 0 || r.SteadyVsClean <= 0 {
			t.Errorf("%s: done %d, errors %d (%s), × clean %v, steady %v/s (%v× clean), error %q", pt.Name, r.Done, r.Errors,
				r.FirstError, r.VsClean, r.SteadyPerSec, r.SteadyVsClean, r.Error)
		}
	}
	if r := rep.Points[1].Results[0]; r.Replicas != 2 || r.PushedBack == 0 || r.PushedBackShare <= 0 {
		t.Errorf("503 with replicas: replicas %d, pushed back %d (%v)", r.Replicas, r.PushedBack, r.PushedBackShare)
	}
	if o := rep.Points[2].Results[0].Outage; o == nil || o.Note != "" || o.Sec <= 0 {
		t.Errorf("outage %+v, want its figures", o)
	}
	if !strings.Contains(stdout.String(), "scenarios side by side") {
		t.Errorf("no side-by-side table")
	}
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	var root struct{ XMLName xml.Name }
	if err := xml.Unmarshal(svg, &root); err != nil || root.XMLName.Local != "svg" {
		t.Fatalf("chart is not an SVG document: %v, root %q", err, root.XMLName.Local)
	}
}

// TestRollingRestart restarts two exactly-once replicas one after another
// mid-drain (SIGTERM, then a new process), as a rolling deploy does: every
// record is answered once, as a reader of committed replies sees them, and
// the report carries the restarts and the longest partition gap.
func TestRollingRestart(t *testing.T) {
	ctx, dir, bridgeBin := endToEnd(t)
	jsonPath := filepath.Join(dir, "report.json")
	var stdout, stderr bytes.Buffer
	// 4 in flight at 20 ms: a drain of a few seconds, long enough for the
	// replicas to be ready before the first restart is due.
	args := []string{"--events", "1200", "--partitions", "4", "--keys", "200", "--latency", "20ms",
		"--max-in-flight", "4", "--stall", "60s", "--bridge-bin", bridgeBin, "--work-dir", filepath.Join(dir, "work"),
		"--scenario", "replicas=2,rolling-restart,delivery=exactly-once", "--json", jsonPath}
	rep := runBench(ctx, t, args, jsonPath, &stdout, &stderr)
	if len(rep.Points) != 2 || !rep.Points[1].Scenario.RollingRestart {
		t.Fatalf("points %+v, want clean and the rolling restart", rep.Points)
	}
	r := rep.Points[1].Results[0]
	if !r.OK() || r.Done != 1200 || r.Duplicates != 0 {
		t.Errorf("done %d, errors %d (%s), %d duplicate replies, error %q: want every record answered once", r.Done, r.Errors,
			r.FirstError, r.Duplicates, r.Error)
	}
	if r.Restarts < 1 || r.LongestPartitionGapSec <= 0 {
		t.Errorf("restarts %d, longest partition gap %v s: want the restarts and the gap", r.Restarts, r.LongestPartitionGapSec)
	}
	if !strings.Contains(stdout.String(), "restarts ") || !strings.Contains(stdout.String(), "the longest any partition went without a reply") {
		t.Errorf("the report does not say how many processes were restarted")
	}
}

// runBench runs the bench with args, fails the test unless it exits 0,
// and returns the report it wrote to jsonPath; stdout and stderr keep its
// output.
func runBench(ctx context.Context, t *testing.T, args []string, jsonPath string, stdout, stderr *bytes.Buffer) benchkit.Report {
	t.Helper()
	code := run(ctx, testEnv(t, stdout, stderr), args)
	t.Logf("stdout:\n%s", stdout.String())
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	var rep benchkit.Report
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	return rep
}

// endToEnd prepares a run of the whole bench: skipped with -short, a
// temporary directory, a context of four minutes, and the bridge built
// into the directory.
func endToEnd(t *testing.T) (ctx context.Context, dir, bridgeBin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("end to end: builds the bridge and starts several processes")
	}
	dir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx, dir, buildBridge(ctx, t, dir)
}
