//go:build !production

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/demo"
	"github.com/loyalty-bridge/loyalty-bridge/internal/devstack"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/service"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing"
)

// addDev adds the dev command. A production build (-tags production, as the
// container image is built) leaves it out, and with it the embedded Kafka,
// Schema Registry and partner simulator.
func addDev(m map[string]command) { m["dev"] = devCommand() }

func devCommand() command {
	return command{summary: "run everything on this machine: Kafka, Schema Registry, partner API simulator and the bridge", run: runDev}
}

const devUsage = `usage: loyalty-bridge dev [flags]

Runs everything on this machine, in one process and with nothing installed
but Go: a Kafka broker (kfake, reachable by any Kafka client on
--kafka-addr), a Schema Registry (srfake), the partner API simulator with a
generated partner key, and the bridge itself. Schemas are registered and
topics created; Kafka data, schema ids and the partner key persist under
--data-dir, so a restart resumes where it stopped. A banner prints the
addresses, demo credentials and commands to try. Ctrl-C stops everything.

--demo N produces N sample events (purchases, redemptions, onboardings,
link and unlink commands, a few invalid and undecodable on purpose), then,
once their purchases are applied, a refund of every fourth purchase and
one refund of a purchase that never happened (labelled in the table: it is
parked, looked for again and ends as a retryable ORIGINAL_NOT_FOUND error
on purpose). So --demo 2000 answers about 2,300 events. It shows live
progress and ends with a table of outcomes per topic.

--kafka-addr, --registry-addr, --sim-addr and --metrics-addr pick the
listen addresses (port 0: any free port) when the defaults are taken.
dev reads no LOYALTY_BRIDGE_* variables and takes only the flags below, so
that a shell set up for production cannot point it elsewhere.

Examples:
  loyalty-bridge dev
  loyalty-bridge dev --demo 2000 --exit-when-done     # exit status 0 when every event got its output
  loyalty-bridge dev --data-dir /tmp/lb --kafka-addr 127.0.0.1:19092

Flags:
`

type devFlags struct {
	dataDir, kafkaAddr, registryAddr, simAddr, metricsAddr string
	partitions, members, demoN, maxInFlight                int
	ordering, logLevel, tracing                            string
	exitWhenDone                                           bool
	demoTimeout                                            time.Duration
}

func runDev(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var f devFlags
	fs.StringVar(&f.dataDir, "data-dir", ".loyalty-dev", "where Kafka data, schemas and the partner key persist across restarts")
	fs.StringVar(&f.kafkaAddr, "kafka-addr", "127.0.0.1:9092", "Kafka listen address (port 0: any free port)")
	fs.StringVar(&f.registryAddr, "registry-addr", "127.0.0.1:8081", "Schema Registry listen address")
	fs.StringVar(&f.simAddr, "sim-addr", "127.0.0.1:8088", "partner API simulator listen address")
	fs.StringVar(&f.metricsAddr, "metrics-addr", telemetry.LoopbackAddr, "/metrics, /healthz and /readyz (empty: off; loopback by default, as every dev listener)")
	fs.IntVar(&f.partitions, "partitions", 8, "partitions of each topic created")
	fs.IntVar(&f.members, "members", 1000, "members seeded in the simulator (LB00000001 …)")
	fs.IntVar(&f.demoN, "demo", 0, "produce this many sample events, then refunds of a quarter of the purchases and one deliberate orphan refund, and show their progress")
	fs.BoolVar(&f.exitWhenDone, "exit-when-done", false, "with --demo: exit after the summary (0 when every event got its output)")
	fs.DurationVar(&f.demoTimeout, "demo-timeout", 5*time.Minute, "with --exit-when-done: give up after this long")
	fs.StringVar(&f.ordering, "ordering", "key", "order within a partition: key, partition or unordered")
	fs.IntVar(&f.maxInFlight, "max-in-flight", pipeline.DefaultMaxInFlight, "partner API calls in progress at once")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.tracing, "tracing", "off", "OpenTelemetry traces of every record: off, stdout (spans as JSON on standard output) or otlp (to a local Jaeger or collector: OTEL_EXPORTER_OTLP_ENDPOINT, default http://localhost:4318)")
	fs.Usage = func() {
		fmt.Fprint(e.stderr, devUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, func() error { return fs.Parse(args) }); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return &exitError{code: 2, err: fmt.Errorf("unexpected arguments %q", fs.Args())}
	case f.dataDir == "":
		return &exitError{code: 2, err: errors.New("--data-dir: required (the partner key lives there)")}
	case f.exitWhenDone && f.demoN <= 0:
		return &exitError{code: 2, err: errors.New("--exit-when-done needs --demo N")}
	case f.demoN < 0 || f.members < 1 || f.partitions < 1:
		return &exitError{code: 2, err: errors.New("--demo, --members and --partitions must be positive")}
	}
	if _, err := tracing.ParseExporter(f.tracing); err != nil {
		return &exitError{code: 2, err: fmt.Errorf("--tracing %q: %w", f.tracing, err)}
	}

	log, err := telemetry.NewLogger(telemetry.LogOptions{Format: "console", Level: f.logLevel, Output: e.stderr})
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	topics := codec.DefaultTopics()
	stack, err := devstack.Start(ctx, devstack.Options{DataDir: f.dataDir, KafkaAddr: f.kafkaAddr, RegistryAddr: f.registryAddr,
		SimAddr: f.simAddr, Partitions: int32(f.partitions), Topics: topics.All(),
		// The simulator logs every member change; the bridge's own lines
		// are the interesting ones here.
		Sim:    sim.Options{Members: f.members, Logger: log.Named("sim").WithOptions(zap.IncreaseLevel(zap.WarnLevel))},
		Logger: log.Named("dev")})
	if err != nil {
		return err
	}
	defer stack.Close()

	cfg, err := devConfig(stack, f)
	if err != nil {
		return err
	}
	svc, err := service.New(ctx, cfg, service.Options{Logger: log, TraceOutput: e.stdout})
	if err != nil {
		return err
	}
	defer svc.Close()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() {
		err := svc.Run(runCtx)
		stop() // a failed bridge ends the demo too
		done <- err
	}()
	// The banner comes after the start-up lines, so that they do not push
	// it off the screen.
	select {
	case <-svc.Covered():
	case <-runCtx.Done():
	case <-time.After(30 * time.Second):
	}
	printBanner(e.stdout, stack, f, svc.MetricsAddr())

	var demoErr error
	if f.demoN > 0 {
		o := demo.RunOptions{Brokers: stack.Brokers, Codec: svc.Codec, Topics: topics, N: f.demoN, Members: sim.MemberID,
			Count: f.members, Out: e.stdout}
		if f.exitWhenDone {
			o.Timeout = f.demoTimeout
		}
		demoErr = demo.Run(runCtx, o)
		if f.exitWhenDone {
			stop()
		}
	}
	err = <-done
	if ctx.Err() == nil || f.exitWhenDone {
		// Stopped by --exit-when-done or by a failure, not by Ctrl-C.
		if err != nil {
			return err
		}
		return demoErr
	}
	fmt.Fprintln(e.stdout, "\nstopped; data kept in", f.dataDir)
	return err
}

// devOriginalWait is the dev command's --original-wait.
const devOriginalWait = 5 * time.Second

// devConfig is `run`'s configuration pointed at the embedded stack.
func devConfig(stack *devstack.Stack, f devFlags) (*config.Config, error) {
	fs := flag.NewFlagSet("dev-run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, b := config.Define(fs)
	// Defaults only: the dev command does not read LOYALTY_BRIDGE_* so that a
	// shell set up for production cannot point it elsewhere.
	if err := b.Parse(nil, func(string) (string, bool) { return "", false }); err != nil {
		return nil, err
	}
	mode, err := ordering.ParseMode(f.ordering)
	if err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--ordering: %w", err)}
	}
	cfg.Kafka.Brokers = strings.Join(stack.Brokers, ",")
	// Every record traced (the flag was checked): a newcomer wants to see
	// the one they produced.
	cfg.Tracing.Exporter, _ = tracing.ParseExporter(f.tracing)
	cfg.Tracing.SampleRatio = 1
	// A refund of an unknown purchase (the demo sends one) is parked and
	// looks again for its purchase; 15 minutes, run's default, would keep
	// the demo from ending. Seconds show the same path.
	cfg.Parking.OriginalWait, cfg.Parking.Backoff = devOriginalWait, time.Second
	cfg.Registry.URL = stack.RegistryURL
	cfg.RegisterSchemas = true
	cfg.API.BaseURL, cfg.API.AuthURL = stack.SimURL, ""
	cfg.API.ClientID, cfg.API.ClientSecret = sim.DefaultClientID, sim.DefaultClientSecret
	cfg.API.Username, cfg.API.Password = sim.DefaultUsername, sim.DefaultPassword
	cfg.API.PartnerKey, cfg.API.PartnerKeyID = stack.PartnerKeyPath, stack.PartnerKeyID
	cfg.Group.Name = "loyalty-bridge-dev"
	cfg.Processing.Ordering = mode
	cfg.Processing.MaxInFlight = f.maxInFlight
	cfg.Ops.MetricsAddr = f.metricsAddr
	cfg.Ops.LogFormat, cfg.Ops.LogLevel = "console", f.logLevel
	cfg.Processing.BreakerOpen = 2 * time.Second
	if err := cfg.Validate(); err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return cfg, nil
}

func printBanner(w io.Writer, s *devstack.Stack, f devFlags, metricsAddr string) {
	brokers := strings.Join(s.Brokers, ",")
	// Without --metrics-addr nothing serves them: no line rather than an
	// address that answers nothing.
	health := ""
	if metricsAddr != "" {
		health = fmt.Sprintf("\n  Metrics, health   http://%s/metrics  /healthz  /readyz", metricsAddr)
	}
	fmt.Fprintf(w, `
loyalty-bridge dev — everything runs in this process; Ctrl-C stops it (data stays in %s)

  Kafka             %s
  Schema Registry   %s
  Partner API sim   %s   (client_id %s, client_secret %s, user %s / %s)%s
  Input topics      %s
  Members           %s … %s

Try, in another terminal:
  echo '{"transactionId":"tx-1","loyaltyId":"%s","transactionDate":"%s","amount":150000}' \
    | go run ./cmd/loyalty-bridge produce --brokers %s --schema-registry-url %s --topic loyalty.purchase
  go run ./cmd/loyalty-bridge tail --brokers %s --schema-registry-url %s --topic loyalty.purchase.result --from-beginning
  kcat -b %s -L
  LOYALTY_BRIDGE_API_BASE_URL=%s LOYALTY_BRIDGE_API_CLIENT_ID=%s LOYALTY_BRIDGE_API_CLIENT_SECRET=%s \
    LOYALTY_BRIDGE_API_USERNAME=%s LOYALTY_BRIDGE_API_PASSWORD=%s go run ./cmd/loyalty-bridge api lookup --loyalty-id %s --transaction-id tx-1

`, f.dataDir, brokers, s.RegistryURL, s.SimURL, sim.DefaultClientID, sim.DefaultClientSecret, sim.DefaultUsername, sim.DefaultPassword,
		health, strings.Join(codec.DefaultTopics().Inputs(), ", "), sim.MemberID(1), sim.MemberID(f.members),
		sim.MemberID(1), time.Now().UTC().Format(time.RFC3339), brokers, s.RegistryURL, brokers, s.RegistryURL, brokers,
		s.SimURL, sim.DefaultClientID, sim.DefaultClientSecret, sim.DefaultUsername, sim.DefaultPassword, sim.MemberID(1))
}
