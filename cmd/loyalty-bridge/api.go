package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// Exit codes of `api` besides 0, 1 (other failure) and 2 (usage).
const (
	apiExitBusiness  = 3 // the API answered with its error envelope
	apiExitAuth      = 4 // credentials refused
	apiExitTransient = 5 // no definitive answer (retries exhausted, or ambiguous)
)

type apiCall struct {
	summary string
	// flags defines the call's own flags and returns the function that runs
	// it (after parsing) and prints its answer.
	flags func(fs *flag.FlagSet) func(ctx context.Context, a *apiConn, e env, body []byte, set map[string]bool) (any, error)
}

func apiCalls() map[string]apiCall {
	return map[string]apiCall{
		"token":       {"obtain an access token; prints type and expiry, never the token", apiToken},
		"profile":     {"Customer Info: GET user-profile/{loyaltyId}", apiProfile(false)},
		"profile-ext": {"Customer Profile: GET user-profile-ext/{loyaltyId}", apiProfile(true)},
		"onboard":     {"User Onboarding: JSON body on stdin (-) or --json FILE", apiOnboard},
		"link":        {"link-member: --loyalty-id --partner-member-id", apiLink(false)},
		"unlink":      {"unlink-member: --loyalty-id --partner-member-id", apiLink(true)},
		"accrue":      {"Point Accrual: --loyalty-id --transaction-id --amount [--date --currency ...]", apiAccrue},
		"redeem":      {"Point Redemption With Token: --loyalty-id --transaction-id --amount --points (signs with --partner-key)", apiRedeem},
		"lookup":      {"Lookup Transaction: --loyalty-id and --transaction-id or --bit-reference", apiLookup},
	}
}

// apiConn holds the connection settings and, once built, the client.
type apiConn struct {
	cfg      config.API
	verbose  bool
	jsonFile string

	stack  *config.APIClient
	client *loyalty.Client
}

// define puts the partner API section on fs without a flag prefix
// (--base-url, --timeout); each setting reads the same
// LOYALTY_BRIDGE_API_* variable as run's.
func (a *apiConn) define(fs *flag.FlagSet) *flagenv.Binder {
	b := flagenv.New(fs, config.APIEnvPrefix)
	a.cfg.Define(b, "")
	fs.BoolVar(&a.verbose, "verbose", false, "log each attempt (redacted) to stderr")
	b.All()
	// Defined after All: request fields are not configuration.
	fs.StringVar(&a.jsonFile, "json", "", "read the request body as JSON from FILE (- for stdin); flags given too override its fields")
	return b
}

// build wires the client stack; it fetches no token until a call needs one.
func (a *apiConn) build(e env) error {
	log := zap.NewNop()
	if a.verbose {
		l, err := telemetry.NewLogger(telemetry.LogOptions{Format: "console", Level: "debug", Output: e.stderr})
		if err != nil {
			return err
		}
		log = l
	}
	stack, err := a.cfg.Build(config.BuildOptions{Logger: log, MaxConns: 4})
	if err != nil {
		return err
	}
	a.stack, a.client = stack, stack.Client
	return nil
}

func runAPI(ctx context.Context, e env, args []string) error {
	calls := apiCalls()
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
	var a apiConn
	b := a.define(fs)
	exec := call.flags(fs)
	if err := b.Parse(args[1:], e.lookup); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: 2, err: err}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var body []byte
	src := a.jsonFile
	if fs.NArg() == 1 && fs.Arg(0) == "-" {
		src = "-"
	} else if fs.NArg() > 0 && args[0] != "profile" && args[0] != "profile-ext" {
		return &exitError{code: 2, err: fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if src != "" {
		var err error
		if src == "-" {
			body, err = io.ReadAll(io.LimitReader(e.stdin, 1<<20))
		} else {
			body, err = os.ReadFile(src)
		}
		if err != nil {
			return &exitError{code: 2, err: fmt.Errorf("request JSON: %w", err)}
		}
	}
	if err := a.cfg.Validate(); err != nil {
		return &exitError{code: 2, err: err}
	}
	if err := a.build(e); err != nil {
		return &exitError{code: 2, err: err}
	}
	defer a.stack.Close()
	out, err := exec(ctx, &a, e, body, set)
	if err != nil {
		return apiFailure(e, err)
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// apiFailure prints the API's error envelope (business errors) or code to
// stdout and maps the error to an exit code.
func apiFailure(e env, err error) error {
	var (
		be *loyalty.BusinessError
		ae *loyalty.AuthError
		ve *loyalty.ValidationError
		ue *apiUsageError
	)
	switch {
	case errors.As(err, &be):
		env := map[string]any{"statusCode": be.StatusCode, "message": be.StatusMessage}
		errs := map[string]string{"code": be.Code, "message": be.Message}
		if be.ErrorCode != "" {
			errs["errorCode"] = be.ErrorCode
		}
		if be.Name != "" {
			errs["name"] = be.Name
		}
		env["errors"] = errs
		if be.ResultURL != "" {
			env["data"] = map[string]string{"resultUrl": be.ResultURL}
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(env)
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

type apiUsageError struct{ msg string }

func (u *apiUsageError) Error() string { return u.msg }

func apiUsage(w io.Writer, calls map[string]apiCall) {
	fmt.Fprintln(w, "usage: loyalty-bridge api <call> [flags] [-]")
	fmt.Fprintln(w, "\ncalls:")
	names := make([]string, 0, len(calls))
	for n := range calls {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, calls[n].summary)
	}
	fmt.Fprintln(w, "\nConnection flags come from "+config.APIEnvPrefix+"<FLAG> too (secrets also from <VAR>_FILE);")
	fmt.Fprintln(w, "run 'loyalty-bridge api <call> -h' for them. Exit codes: 3 API error, 4 auth, 5 no definitive answer.")
}

// apiDecode reads the --json body (if any) into v.
func apiDecode(body []byte, v any) error {
	if len(body) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &apiUsageError{"request JSON: " + err.Error()}
	}
	return nil
}

type apiTokenInfo struct {
	Grant            string `json:"grant"`
	TokenType        string `json:"token_type"`
	ExpiresIn        int64  `json:"expires_in"`
	ExpiresAt        string `json:"expires_at"`
	RefreshExpiresIn int64  `json:"refresh_expires_in,omitempty"`
	RefreshExpiresAt string `json:"refresh_expires_at,omitempty"`
	Scope            string `json:"scope,omitempty"`
}

func apiToken(*flag.FlagSet) func(context.Context, *apiConn, env, []byte, map[string]bool) (any, error) {
	return func(ctx context.Context, a *apiConn, _ env, _ []byte, _ map[string]bool) (any, error) {
		tok, err := a.stack.Tokens.Token(ctx)
		if err != nil {
			var te *tokensource.Error
			if errors.As(err, &te) && !te.Transient() {
				return nil, &loyalty.AuthError{Op: "token", HTTPStatus: te.Status, Code: te.Code, Err: err}
			}
			return nil, &loyalty.TransientError{Op: "token", Status: 0, Attempts: 1, Err: err}
		}
		info := apiTokenInfo{Grant: string(a.cfg.Grant), TokenType: tok.TokenType, ExpiresIn: int64(tok.Lifetime().Seconds()),
			ExpiresAt: tok.Expiry.UTC().Format(time.RFC3339), Scope: tok.Scope}
		if !tok.RefreshExpiry.IsZero() {
			info.RefreshExpiresIn = int64(tok.RefreshExpiry.Sub(tok.IssuedAt).Seconds())
			info.RefreshExpiresAt = tok.RefreshExpiry.UTC().Format(time.RFC3339)
		}
		return info, nil
	}
}

func apiProfile(ext bool) func(*flag.FlagSet) func(context.Context, *apiConn, env, []byte, map[string]bool) (any, error) {
	return func(fs *flag.FlagSet) func(context.Context, *apiConn, env, []byte, map[string]bool) (any, error) {
		id := fs.String("loyalty-id", "", "member loyaltyId (or give it as the argument)")
		return func(ctx context.Context, a *apiConn, _ env, _ []byte, _ map[string]bool) (any, error) {
			if *id == "" && fs.NArg() == 1 {
				*id = fs.Arg(0)
			}
			if ext {
				v, _, err := a.client.CustomerProfile(ctx, *id)
				return v, err
			}
			v, _, err := a.client.CustomerInfo(ctx, *id)
			return v, err
		}
	}
}

func apiOnboard(*flag.FlagSet) func(context.Context, *apiConn, env, []byte, map[string]bool) (any, error) {
	return func(ctx context.Context, a *apiConn, _ env, body []byte, _ map[string]bool) (any, error) {
		if len(body) == 0 {
			return nil, &apiUsageError{"onboard takes its body as JSON: --json FILE or - for stdin"}
		}
		var r loyalty.OnboardRequest
		if err := apiDecode(body, &r); err != nil {
			return nil, err
		}
		v, _, err := a.client.Onboard(ctx, r)
		return v, err
	}
}

func apiLink(unlink bool) func(*flag.FlagSet) func(context.Context, *apiConn, env, []byte, map[string]bool) (any, error) {
	return func(fs *flag.FlagSet) func(context.Context, *apiConn, env, []byte, map[string]bool) (any, error) {
		var f loyalty.LinkRequest
		fs.StringVar(&f.LoyaltyID, "loyalty-id", "", "member loyaltyId")
		fs.StringVar(&f.PartnerMemberID, "partner-member-id", "", "the partner's member id")
		return func(ctx context.Context, a *apiConn, _ env, body []byte, set map[string]bool) (any, error) {
			var r loyalty.LinkRequest
			if err := apiDecode(body, &r); err != nil {
				return nil, err
			}
			over(set, "loyalty-id", &r.LoyaltyID, f.LoyaltyID)
			over(set, "partner-member-id", &r.PartnerMemberID, f.PartnerMemberID)
			if unlink {
				v, _, err := a.client.Unlink(ctx, r)
				return v, err
			}
			v, _, err := a.client.Link(ctx, r)
			return v, err
		}
	}
}

// over sets *dst to v when the flag was given or *dst is still empty.
func over[T comparable](set map[string]bool, name string, dst *T, v T) {
	var zero T
	if set[name] || *dst == zero {
		*dst = v
	}
}

func apiAccrue(fs *flag.FlagSet) func(context.Context, *apiConn, env, []byte, map[string]bool) (any, error) {
	var (
		f                 loyalty.AccrualRequest
		date, desc, extra string
	)
	fs.StringVar(&f.LoyaltyID, "loyalty-id", "", "member loyaltyId")
	fs.StringVar(&f.TransactionID, "transaction-id", "", "partner transaction id")
	fs.StringVar(&f.ItemID, "item-id", "", "partner transaction item id")
	fs.Float64Var(&f.TransactionAmount, "amount", 0, "transactionAmount (≥ 0)")
	fs.StringVar(&f.TransactionCurrency, "currency", "VND", "transactionCurrency")
	fs.StringVar(&date, "date", "", "transactionDate: RFC 3339 or epoch milliseconds (default now)")
	fs.StringVar(&desc, "description", "", "transactionDes as a JSON object")
	fs.StringVar(&extra, "extra-data", "", "extraData as a JSON object")
	return func(ctx context.Context, a *apiConn, _ env, body []byte, set map[string]bool) (any, error) {
		var r loyalty.AccrualRequest
		if err := apiDecode(body, &r); err != nil {
			return nil, err
		}
		over(set, "loyalty-id", &r.LoyaltyID, f.LoyaltyID)
		over(set, "transaction-id", &r.TransactionID, f.TransactionID)
		over(set, "item-id", &r.ItemID, f.ItemID)
		over(set, "amount", &r.TransactionAmount, f.TransactionAmount)
		over(set, "currency", &r.TransactionCurrency, f.TransactionCurrency)
		if date != "" {
			if err := r.TransactionDate.UnmarshalJSON([]byte(strconv.Quote(date))); err != nil {
				return nil, &apiUsageError{"--date: " + err.Error()}
			}
		}
		if r.TransactionDate.Time.IsZero() {
			r.TransactionDate.Time = time.Now()
		}
		r.TransactionDate.Format = "" // the wire format is --date-format's, whatever the input's

		for _, j := range []struct {
			name, v string
			dst     *json.RawMessage
		}{{"description", desc, &r.TransactionDes}, {"extra-data", extra, &r.ExtraData}} {
			if j.v == "" {
				continue
			}
			if !json.Valid([]byte(j.v)) || !strings.HasPrefix(strings.TrimSpace(j.v), "{") {
				return nil, &apiUsageError{"--" + j.name + " must be a JSON object"}
			}
			*j.dst = json.RawMessage(j.v)
		}
		v, _, err := a.client.Accrue(ctx, r)
		return v, err
	}
}

func apiRedeem(fs *flag.FlagSet) func(context.Context, *apiConn, env, []byte, map[string]bool) (any, error) {
	var f loyalty.RedemptionRequest
	fs.StringVar(&f.LoyaltyID, "loyalty-id", "", "member loyaltyId")
	fs.StringVar(&f.TransactionID, "transaction-id", "", "partner transaction id")
	fs.StringVar(&f.TransactionDes, "description", "", "transactionDes")
	fs.StringVar(&f.TransactionDate, "date", "", "transactionDate string (default now, RFC 3339)")
	fs.Float64Var(&f.TransactionAmount, "amount", 0, "transactionAmount (≥ 0)")
	fs.Int64Var(&f.UsedPoint, "points", 0, "usedPoint (> 0)")
	fs.StringVar(&f.Sign, "sign", "", "a ready-made sign JWT (default: signed with --partner-key)")
	return func(ctx context.Context, a *apiConn, _ env, body []byte, set map[string]bool) (any, error) {
		var r loyalty.RedemptionRequest
		if err := apiDecode(body, &r); err != nil {
			return nil, err
		}
		over(set, "loyalty-id", &r.LoyaltyID, f.LoyaltyID)
		over(set, "transaction-id", &r.TransactionID, f.TransactionID)
		over(set, "description", &r.TransactionDes, f.TransactionDes)
		over(set, "date", &r.TransactionDate, f.TransactionDate)
		over(set, "amount", &r.TransactionAmount, f.TransactionAmount)
		over(set, "points", &r.UsedPoint, f.UsedPoint)
		over(set, "sign", &r.Sign, f.Sign)
		if r.TransactionDate == "" {
			r.TransactionDate = time.Now().UTC().Format(time.RFC3339)
		}
		v, _, err := a.client.Redeem(ctx, r)
		return v, err
	}
}

func apiLookup(fs *flag.FlagSet) func(context.Context, *apiConn, env, []byte, map[string]bool) (any, error) {
	var f loyalty.LookupRequest
	fs.StringVar(&f.LoyaltyID, "loyalty-id", "", "member loyaltyId")
	fs.StringVar(&f.TransactionID, "transaction-id", "", "partner transaction id")
	fs.StringVar(&f.BitReference, "bit-reference", "", "service transaction reference")
	return func(ctx context.Context, a *apiConn, _ env, body []byte, set map[string]bool) (any, error) {
		var r loyalty.LookupRequest
		if err := apiDecode(body, &r); err != nil {
			return nil, err
		}
		over(set, "loyalty-id", &r.LoyaltyID, f.LoyaltyID)
		over(set, "transaction-id", &r.TransactionID, f.TransactionID)
		over(set, "bit-reference", &r.BitReference, f.BitReference)
		v, _, err := a.client.LookupTransaction(ctx, r)
		return v, err
	}
}
