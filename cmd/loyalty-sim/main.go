// Command loyalty-sim runs the partner API simulator (internal/sim) on one
// address that serves both {base_url} and {auth_url}. Flags may also come
// from LOYALTY_SIM_* environment variables; the three secrets also from
// LOYALTY_SIM_<NAME>_FILE. main only wires: the simulator lives in
// internal/sim.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	bridgeconfig "github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// EnvPrefix is the prefix of the simulator's variables: --members is
// LOYALTY_SIM_MEMBERS.
const EnvPrefix = "LOYALTY_SIM_"

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // could not listen or serve
	exitUsage = 2 // bad flags, environment or key files
)

// env is what run may touch of the outside world; tests pass their own.
type env struct {
	stdout, stderr io.Writer
	lookup         func(string) (string, bool)
	// ready, when set, is told the listening address once serving.
	ready func(addr string)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, env{stdout: os.Stdout, stderr: os.Stderr, lookup: os.LookupEnv}, os.Args[1:])
	stop()
	os.Exit(code)
}

// config is the command line, turned into sim.Options by options.
type config struct {
	addr            string
	shutdownTimeout time.Duration
	logLevel        string
	opts            sim.Options
	duplicatePolicy string
	keys            keyFiles
	errorRates      errorRates
	faultEndpoints  string
	profileFile     string
	partner         bridgeconfig.Partner
	// warnings name settings worth a second look (a secret given as a
	// flag, a readable --profile file), never their values.
	warnings []string
}

func parse(e env, args []string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("loyalty-sim", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	o := &c.opts
	f := &o.Faults
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8088", "listen address (host:port; port 0 picks a free one)")
	fs.StringVar(&o.ClientID, "client-id", sim.DefaultClientID, "partner client_id")
	fs.StringVar(&o.ClientSecret, "client-secret", sim.DefaultClientSecret, "partner client_secret")
	fs.StringVar(&o.Username, "username", sim.DefaultUsername, "password-grant user")
	fs.StringVar(&o.Password, "password", sim.DefaultPassword, "password-grant password")
	fs.Var(&c.keys, "partner-public-key", "partner public key PEM `FILE[#kid]` for exchange-token and redemption signs (repeatable; comma-separated in the environment)")
	fs.StringVar(&o.AdminToken, "admin-token", "", "enables the admin API under /__sim/ (header "+sim.AdminHeader+"); off when empty")
	fs.IntVar(&o.Members, "members", sim.DefaultMembers, "seeded members LB00000001…")
	fs.Int64Var(&o.InitialBalance, "initial-balance", sim.DefaultInitialBalance, "points of each seeded member")
	fs.Float64Var(&o.EarnRate, "earn-rate", sim.DefaultEarnRate, "points per currency unit of an accrual (floor)")
	fs.DurationVar(&o.AccessTokenTTL, "access-token-ttl", sim.DefaultAccessTokenTTL, "access token lifetime")
	fs.DurationVar(&o.RefreshTokenTTL, "refresh-token-ttl", sim.DefaultRefreshTokenTTL, "refresh token lifetime")
	fs.DurationVar(&o.ClockSkew, "clock-skew", sim.DefaultClockSkew, "partner JWTs: how far the partner's clock may be off (iat ahead, exp behind; at most "+sim.MaxClockSkew.String()+")")
	fs.DurationVar(&o.MaxSignLifetime, "max-sign-lifetime", sim.DefaultMaxSignLifetime, "redemption sign: longest exp - iat accepted")
	fs.IntVar(&o.ReplayCacheSize, "replay-cache-size", sim.DefaultReplayCacheSize, "partner JWTs: most jtis remembered to refuse replays (when full of unexpired ones, new JWTs are refused)")
	fs.BoolVar(&o.StrictWire, "strict-wire", false, "require the profile's wire choices where the spec leaves them open, as a strict partner would: "+
		"each transactionDate in --partner-*-date-format and -type only, an unset idNumber/passportNumber as --partner-unset-keyed-fields says "+
		"(the sign's and partner token's claims are always the profile's)")
	fs.StringVar(&c.duplicatePolicy, "duplicate-policy", "reject", "a transactionId sent twice: reject (400, the duplicate code), return-original (200, the first answer again) or apply (applied again, as a partner without duplicate detection)")
	fs.IntVar(&o.Capacity, "capacity", sim.DefaultCapacity, "business requests handled at once (0: unlimited); the excess is answered --over-capacity-status at once (token endpoints are not limited)")
	fs.IntVar(&o.OverCapacityStatus, "over-capacity-status", sim.DefaultOverCapacityStatus, "status of a business request beyond --capacity: 429 or 503 (with --retry-after)")
	fs.DurationVar(&f.Latency, "latency", 0, "fault: fixed added latency")
	fs.DurationVar(&f.LatencyP50, "latency-p50", 0, "fault: log-normal added latency, median")
	fs.DurationVar(&f.LatencyP99, "latency-p99", 0, "fault: log-normal added latency, 99th percentile (needs --latency-p50)")
	fs.Var(&c.errorRates, "error-rate", "fault: `STATUS=RATE` answered instead of handling, e.g. 503=0.1 (repeatable; comma-separated)")
	fs.DurationVar(&f.RetryAfter, "retry-after", sim.DefaultRetryAfter, "Retry-After of injected 429 and 503 and of over-capacity answers (whole seconds, rounded up); 0s sends none")
	fs.Float64Var(&f.DropRate, "drop-rate", 0, "fault: probability of closing the connection unanswered")
	fs.Float64Var(&f.HangRate, "hang-rate", 0, "fault: probability of never answering")
	fs.Float64Var(&f.ApplyThen500Rate, "apply-then-500-rate", 0, "fault: probability of applying a write and answering 500")
	fs.Float64Var(&f.LateApplyRate, "late-apply-rate", 0, "fault: probability of answering an accrual or redemption 504 (or letting the client give up under --latency) and applying it --late-apply-delay later")
	fs.DurationVar(&f.LateApplyDelay, "late-apply-delay", sim.DefaultLateApplyDelay, "fault: how long after its answer a late write is applied")
	fs.DurationVar(&f.LookupLag, "lookup-lag", 0, "fault: lookups see a transaction only this long after it was applied")
	fs.Float64Var(&f.NullNumbersRate, "null-numbers-rate", 0, "fault: probability of a 200 answer's numbers being null, or (even odds) left out")
	fs.StringVar(&f.SharedIDLookup, "shared-id-lookup", sim.SharedIDAccrual, "a lookup by a transactionId that an accrual and a redemption share answers: "+
		strings.Join([]string{sim.SharedIDAccrual, sim.SharedIDRedemption, sim.SharedIDLatest}, ", ")+" (the one applied last)")
	fs.StringVar(&c.faultEndpoints, "fault-endpoints", "", "comma-separated endpoints the faults apply to (default all): "+strings.Join(sim.AllEndpoints, ","))
	fs.Int64Var(&o.Seed, "seed", 1, "seed of fault randomness")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight requests may finish after SIGINT/SIGTERM")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error (JSON logs on stderr; never secrets, tokens or personal data)")

	fs.StringVar(&c.profileFile, "profile", "", "YAML `FILE` of the partner profile, keyed by the --partner-* flag names (the bridge's --config takes the same keys; flags and environment override it)")

	b := flagenv.New(fs, EnvPrefix)
	// What the simulated partner answers where the spec is silent; the
	// same settings as the bridge's, under LOYALTY_SIM_PARTNER_*.
	c.partner.Define(b, EnvPrefix)
	b.Secret("client-secret", "")
	b.Secret("password", "")
	b.Secret("admin-token", "")
	b.All()
	if err := b.ParseWithFile(args, e.lookup, "profile"); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var errs []error
	var err error
	if err := c.partner.Validate(); err != nil {
		errs = append(errs, err)
	}
	o.Profile = c.partner.Build()
	if o.Profile.Key() != partnerprofile.KeyIDAndType {
		// The simulator keys transactions by id and type, whatever its
		// profile says: a profile file shared with the bridge must not
		// make it look like a partner keyed by id alone.
		errs = append(errs, fmt.Errorf("--partner-transaction-key %s: the simulator keys transactions by id and type (%s) only", o.Profile.Key(), partnerprofile.KeyIDAndType))
	}
	if o.DuplicatePolicy, err = sim.ParseDuplicatePolicy(c.duplicatePolicy); err != nil {
		errs = append(errs, err)
	}
	o.PartnerKeys = c.keys.keys
	f.ErrorRates = c.errorRates.rates
	if c.faultEndpoints != "" {
		for _, ep := range strings.Split(c.faultEndpoints, ",") {
			f.Endpoints = append(f.Endpoints, strings.TrimSpace(ep))
		}
	}
	switch {
	case f.RetryAfter < 0:
		errs = append(errs, errors.New("--retry-after must not be negative (0s sends no Retry-After)"))
	case f.RetryAfter == 0:
		f.RetryAfter = sim.NoRetryAfter
	}
	if err := f.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("faults: %w", err))
	}
	if c.shutdownTimeout <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout must be positive"))
	}
	c.warnings = b.Warnings()
	return c, errors.Join(errs...)
}

// keyFiles is the repeatable --partner-public-key FILE[#kid].
type keyFiles struct {
	names []string
	keys  []sim.PartnerKey
}

func (k *keyFiles) String() string { return strings.Join(k.names, ",") }

func (k *keyFiles) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		path, kid, _ := strings.Cut(item, "#")
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pub, err := sim.ParsePublicKeyPEM(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		k.names = append(k.names, item)
		k.keys = append(k.keys, sim.PartnerKey{KID: kid, Key: pub})
	}
	return nil
}

// errorRates is the repeatable --error-rate STATUS=RATE.
type errorRates struct{ rates map[int]float64 }

func (r *errorRates) String() string {
	var parts []string
	for s, p := range r.rates {
		parts = append(parts, fmt.Sprintf("%d=%g", s, p))
	}
	return strings.Join(parts, ",")
}

func (r *errorRates) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		status, rate, ok := strings.Cut(strings.TrimSpace(item), "=")
		s, err1 := strconv.Atoi(status)
		p, err2 := strconv.ParseFloat(rate, 64)
		if !ok || err1 != nil || err2 != nil {
			return errors.New("want STATUS=RATE, e.g. 503=0.1")
		}
		if r.rates == nil {
			r.rates = map[int]float64{}
		}
		r.rates[s] = p
	}
	return nil
}

func newLogger(level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(w), lvl)), nil
}

func run(ctx context.Context, e env, args []string) int {
	c, err := parse(e, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		fmt.Fprintf(e.stderr, "loyalty-sim: %v\n", err)
		return exitUsage
	}
	log, err := newLogger(c.logLevel, e.stderr)
	if err != nil {
		fmt.Fprintf(e.stderr, "loyalty-sim: %v\n", err)
		return exitUsage
	}
	defer func() { _ = log.Sync() }()
	for _, w := range c.warnings {
		log.Warn(w)
	}
	c.opts.Logger = log
	s, err := sim.New(c.opts)
	if err != nil {
		fmt.Fprintf(e.stderr, "loyalty-sim: %v\n", err)
		return exitUsage
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "loyalty-sim: %v\n", err)
		return exitFail
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ErrorLog: zap.NewStdLog(log)}
	srv.RegisterOnShutdown(s.Close) // hung requests end at shutdown
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	addr := ln.Addr().String()
	banner(e.stdout, addr, c)
	log.Info("listening", zap.String("addr", addr))
	if e.ready != nil {
		e.ready(addr)
	}

	select {
	case err := <-served:
		fmt.Fprintf(e.stderr, "loyalty-sim: %v\n", err)
		return exitFail
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown deadline passed; closing connections", zap.Error(err))
		_ = srv.Close()
	}
	<-served
	return exitOK
}

// shown prints a secret only when it is the public demo default.
func shown(v, demo string) string {
	if v == demo {
		return v
	}
	return "(set, not shown)"
}

func banner(w io.Writer, addr string, c *config) {
	o := c.opts
	base := "http://" + addr
	capacity := "unlimited"
	if o.Capacity > 0 {
		capacity = fmt.Sprintf("%d business requests at once, then %d", o.Capacity, o.OverCapacityStatus)
	}
	admin := "off (set --admin-token)"
	if o.AdminToken != "" {
		admin = "on: " + base + sim.PathAdmin + "{faults,revoke-tokens,credentials,token-ttl,counters,ledger,members/ID} with header " + sim.AdminHeader
	}
	fmt.Fprintf(w, `loyalty-sim: partner loyalty API simulator
  base_url = auth_url = %s
  token:         POST %s%s (password and refresh_token grants)
  client_id:     %s
  client_secret: %s
  username:      %s
  password:      %s
  members:       %s … %s, %d points each; earn rate %g point/unit; duplicates: %s
  profile:       not found %s, member not found %s, duplicate %s, types %s/%s, status %s
  wire:          accrual date %s, redemption date %s, unset id documents %s (%s)
  sign claims:   %s; iss %s, aud %s, typ %s, jti %s
  partner keys:  %d registered (exchange-token, redemption sign)
  partner JWTs:  clock skew %s, sign lifetime at most %s, each jti once (%d remembered at most)
  capacity:      %s
  admin API:     %s
`, base, base, sim.PathToken, o.ClientID, shown(o.ClientSecret, sim.DefaultClientSecret), o.Username,
		shown(o.Password, sim.DefaultPassword), sim.MemberID(1), sim.MemberID(o.Members), o.InitialBalance, o.EarnRate,
		o.DuplicatePolicy, o.Profile.NotFoundCodes[0], o.Profile.MemberNotFoundCodes[0], o.Profile.DuplicateCodes[0], o.Profile.AccrualType, o.Profile.RedemptionType,
		o.Profile.AppliedStatuses[0], o.Profile.AccrualDate(), o.Profile.RedemptionDateEncoding(), o.Profile.Keyed(), strictness(o.StrictWire),
		signClaims(o.Profile.JWT.SignClaims), o.Profile.JWT.IssuerFor(o.ClientID), o.Profile.JWT.Sign.Audience, o.Profile.JWT.Sign.Type, o.Profile.JWT.Sign.JTI,
		len(o.PartnerKeys), o.ClockSkew, o.MaxSignLifetime, o.ReplayCacheSize, capacity, admin)
}

func strictness(strict bool) string {
	if strict {
		return "required: --strict-wire"
	}
	return "either form read"
}

func signClaims(cs []partnerprofile.SignClaim) string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return strings.Join(out, ",")
}
