package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/apicall"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
)

// Exit codes of `api` besides 0, 1 (other failure) and 2 (usage).
const (
	apiExitBusiness  = 3 // the API answered with its error envelope
	apiExitAuth      = 4 // credentials refused
	apiExitTransient = 5 // no definitive answer (retries exhausted, or ambiguous)
)

func runAPI(ctx context.Context, e env, args []string) error {
	calls := apicall.Calls()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		apiUsage(e.stderr, calls)
		if len(args) == 0 {
			return &exitError{code: 2, err: errors.New("which call?")}
		}
		return flag.ErrHelp
	}
	call, ok := calls[args[0]]
	if !ok {
		apiUsage(e.stderr, calls)
		return &exitError{code: 2, err: fmt.Errorf("unknown call %q", args[0])}
	}
	fs := flag.NewFlagSet("loyalty-bridge api "+args[0], flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	// The partner API section without a flag prefix (--base-url,
	// --timeout): each setting reads the same LOYALTY_BRIDGE_API_* variable
	// as run's.
	b := flagenv.New(fs, config.APIEnvPrefix)
	var cfg config.API
	cfg.Define(b, "")
	// The partner profile, read from the same LOYALTY_BRIDGE_PARTNER_*
	// variables as run's: accrual dates and fractional points.
	var partner config.Partner
	partner.Define(b, config.EnvPrefix)
	partner.DefineLegacy(b)
	verbose := fs.Bool("verbose", false, "log each attempt (redacted) to stderr")
	b.All()
	// Defined after All: request fields are not configuration.
	jsonFile := fs.String("json", "", "read the request body as JSON from FILE (- for stdin); flags given too override its fields")
	exec := call.Define(fs)
	if err := parseFlags(fs, func() error { return b.Parse(args[1:], e.lookup) }); err != nil {
		return err
	}
	src := *jsonFile
	if fs.NArg() == 1 && fs.Arg(0) == "-" {
		src = "-"
	} else if fs.NArg() > 0 && !call.Arg {
		return &exitError{code: 2, err: fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	body, err := apicall.ReadBody(src, e.stdin)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if err := errors.Join(cfg.Validate(), partner.Validate()); err != nil {
		return &exitError{code: 2, err: err}
	}
	// stdout is the answer; warnings (a secret given as a flag, a secret
	// file others may read) go beside the errors.
	for _, w := range b.Warnings() {
		fmt.Fprintln(e.stderr, "warning:", w)
	}
	log := zap.NewNop()
	if *verbose {
		l, err := telemetry.NewLogger(telemetry.LogOptions{Format: "console", Level: "debug", Output: e.stderr})
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		log = l
	}
	// The stack fetches no token until a call needs one.
	stack, err := cfg.Build(config.BuildOptions{Logger: log, MaxConns: 4, Profile: partner.Build()})
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	defer stack.Close()
	out, err := exec(ctx, apicall.Conn{Client: stack.Client, Tokens: stack.Tokens, Grant: string(cfg.Grant), Signer: stack.Signer,
		Profile: partner.Build()}, body)
	if err != nil {
		return apiFailure(e, err)
	}
	return printJSON(e.stdout, out)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// apiFailure prints the API's error envelope (business errors) or code to
// stdout and maps the error to an exit code.
func apiFailure(e env, err error) error {
	var (
		be *loyalty.BusinessError
		ae *loyalty.AuthError
		ve *loyalty.ValidationError
		ue *apicall.UsageError
	)
	switch {
	case errors.As(err, &be):
		_ = printJSON(e.stdout, apicall.Envelope(be))
		return &exitError{code: apiExitBusiness, err: fmt.Errorf("API error %s: %w", be.APICode(), err)}
	case errors.As(err, &ae):
		return &exitError{code: apiExitAuth, err: err}
	case errors.As(err, &ve), errors.As(err, &ue):
		return &exitError{code: 2, err: err}
	case loyalty.Category(err) == loyalty.CategoryTransientExhausted:
		if loyalty.IsAmbiguous(err) {
			err = fmt.Errorf("%w (look the transaction up before sending it again)", err)
		}
		return &exitError{code: apiExitTransient, err: err}
	}
	return err
}

func apiUsage(w io.Writer, calls map[string]apicall.Call) {
	fmt.Fprintln(w, "usage: loyalty-bridge api <call> [flags] [-]")
	fmt.Fprintln(w, "\ncalls:")
	for _, n := range slices.Sorted(maps.Keys(calls)) {
		fmt.Fprintf(w, "  %-12s %s\n", n, calls[n].Summary)
	}
	fmt.Fprintln(w, "\nConnection flags come from "+config.APIEnvPrefix+"<FLAG> too (secrets also from <VAR>_FILE);")
	fmt.Fprintln(w, "run 'loyalty-bridge api <call> -h' for them. Exit codes: 3 API error, 4 auth, 5 no definitive answer.")
}
