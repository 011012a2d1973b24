package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/service"
)

func runCommand() command {
	return command{summary: "run the bridge: consume the input topics, call the partner API, reply (production)", run: runBridge}
}

const runUsage = `usage: loyalty-bridge run [flags]

Consumes the input topics as a member of a consumer group, calls the partner
Loyalty Points API for each event (retries, token refresh, idempotency guard,
circuit breaker) and writes a result or error event keyed by transactionId to
<topic>.result / <topic>.error. Runs until SIGINT or SIGTERM, then drains
in-flight records, commits and leaves the group.

Every flag can also be set by its environment variable (shown with it; the
partner API connection shares LOYALTY_BRIDGE_API_* with the api command;
secrets also accept <VAR>_FILE) or by a YAML file of flag names given with
--config. Precedence: flag, environment, file, default. All problems are
reported at once before anything connects. --print-config shows the result
with secrets masked.

Example:
  LOYALTY_BRIDGE_API_CLIENT_SECRET_FILE=/run/secrets/client-secret \
  LOYALTY_BRIDGE_API_PASSWORD_FILE=/run/secrets/password \
  loyalty-bridge run --brokers kafka-1:9092,kafka-2:9092 \
    --schema-registry-url http://registry:8081 \
    --api-base-url https://loyalty.partner.example --client-id shop \
    --username shop-bridge --partner-key /run/secrets/partner-key.pem

Flags:
`

func runBridge(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	cfg, b := config.Define(fs)
	printConfig := fs.Bool("print-config", false, "print the effective configuration (secrets masked) and exit")
	fs.Usage = func() {
		fmt.Fprint(e.stderr, runUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, func() error { return b.ParseWithFile(args, e.lookup, "config") }); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &exitError{code: 2, err: fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	verr := cfg.Validate()
	if *printConfig {
		config.WriteYAML(e.stdout, b, "print-config", "config")
		switch {
		case config.OnlyMissing(verr):
			// Printing needs no credentials; say what run still needs.
			fmt.Fprintf(e.stderr, "loyalty-bridge run: printed; run also needs:\n%v\n", verr)
		case verr != nil:
			return &exitError{code: 2, err: verr}
		}
		return nil
	}
	if verr != nil {
		return &exitError{code: 2, err: verr}
	}
	svc, err := service.New(ctx, cfg, service.Options{Warnings: b.Warnings(), LogOutput: e.stderr})
	if err != nil {
		return usageIf[*config.SettingError](err)
	}
	defer svc.Close()
	return svc.Run(ctx)
}
