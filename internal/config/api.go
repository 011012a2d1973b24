package config

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/callimit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/secretfile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// Grant is how access tokens are obtained.
type Grant string

// Grants.
const (
	GrantPassword Grant = "password"
	GrantExchange Grant = "exchange"
)

// ParseGrant accepts password or exchange.
func ParseGrant(s string) (Grant, error) {
	switch g := Grant(s); g {
	case GrantPassword, GrantExchange:
		return g, nil
	}
	return "", errors.New("want password or exchange")
}

// API is the connection to the partner Loyalty Points API: where it is,
// the credentials, the signing key and the retry policy (what the partner
// answers where the spec is silent, the date formats included, is the
// Partner section). `run`, `replay`, `dev`, `api` and `reconcile` compose
// it, and all of them read the same LOYALTY_BRIDGE_API_* variable for each
// setting.
type API struct {
	BaseURL      string
	AuthURL      string // "" until Validate: then BaseURL
	Realm        string
	ClientID     string
	ClientSecret string
	Username     string
	Password     string
	PartnerKey   string // path of a PEM private key
	PartnerKeyID string
	Grant        Grant
	// RefusedBackoffMax caps the wait before a login is tried again after
	// the partner refused the credentials (tokensource.CacheOptions).
	RefusedBackoffMax time.Duration
	Timeout           time.Duration
	MaxAttempts       int
	MaxElapsed        time.Duration
	MaxConns          int // 0: the caller's default (BuildOptions.MaxConns)
	// MaxResponseBytes bounds the body of one partner answer
	// (loyalty.Options.MaxResponseBytes).
	MaxResponseBytes int
	CAFile           string
	CertFile         string
	KeyFile          string
	// AllowInsecure is --allow-insecure, shared with the other sections.
	AllowInsecure *bool

	prefix string
	binder *flagenv.Binder // which secrets came from *_FILE
	grant  *choice[Grant]
}

// APIEnvPrefix is the prefix of the partner API section's variables:
// --client-id is LOYALTY_BRIDGE_API_CLIENT_ID and --api-base-url (the `api`
// command's --base-url) is LOYALTY_BRIDGE_API_BASE_URL.
const APIEnvPrefix = EnvPrefix + "API_"

// Define defines the section's flags on b's flag set and binds each to
// LOYALTY_BRIDGE_API_<name>. prefix goes before the connection settings'
// flag names (base-url, timeout, max-attempts, max-elapsed, max-conns,
// max-response-bytes and the TLS files): `run` uses "api-" beside its other settings, `api` none.
// The credentials' flags have no prefix in either.
func (a *API) Define(b *flagenv.Binder, prefix string) {
	a.prefix, a.binder = prefix, b
	fs := b.FlagSet()
	conn := func(name string) string { return prefix + name }
	bind := func(flagName, name string) { b.Env(flagName, flagenv.VarName(APIEnvPrefix, name)) }
	fs.StringVar(&a.BaseURL, conn("base-url"), "http://127.0.0.1:8088", "partner API base URL ({base_url}), without credentials: they go in --client-id, --client-secret, --username and --password")
	fs.StringVar(&a.AuthURL, "auth-url", "", "identity provider URL ({auth_url}; default the base URL), without credentials")
	fs.StringVar(&a.Realm, "realm", tokensource.DefaultRealm, "identity provider realm")
	fs.StringVar(&a.ClientID, "client-id", "", "partner client_id")
	fs.StringVar(&a.ClientSecret, "client-secret", "", "partner client_secret")
	fs.StringVar(&a.Username, "username", "", "partner user of the password grant")
	fs.StringVar(&a.Password, "password", "", "password of --username")
	fs.StringVar(&a.PartnerKey, "partner-key", "", "PEM private key file (RS256/ES256) that signs redemptions and partner tokens; read again when it changes")
	fs.StringVar(&a.PartnerKeyID, "partner-key-id", "", "kid header of partner JWTs")
	a.grant = defineChoice(fs, &a.Grant, "grant", GrantPassword, ParseGrant, "how tokens are obtained: password or exchange")
	fs.DurationVar(&a.RefusedBackoffMax, "auth-refused-backoff-max", tokensource.DefaultMaxRefusedBackoff,
		"longest wait before logging in again after the partner refused the credentials (the wait starts at "+
			tokensource.DefaultRefusedBackoff.String()+" and doubles; a rewritten *_FILE secret or --partner-key file is tried at once). "+
			"Retrying a refused password often can trip the partner's brute-force lockout")
	fs.DurationVar(&a.Timeout, conn("timeout"), loyalty.DefaultTimeout, "time limit of one API attempt")
	fs.IntVar(&a.MaxAttempts, conn("max-attempts"), loyalty.DefaultMaxAttempts, "attempts of one API call at retryable failures, the first included")
	fs.DurationVar(&a.MaxElapsed, conn("max-elapsed"), loyalty.DefaultMaxElapsed, "time limit of one API call with its retries")
	fs.IntVar(&a.MaxConns, conn("max-conns"), 0, "connections to the partner API (0: --max-in-flight for run and replay, 4 for api)")
	fs.IntVar(&a.MaxResponseBytes, conn("max-response-bytes"), loyalty.DefaultMaxResponseBytes,
		fmt.Sprintf("largest partner answer body read, in bytes (at most %d); a longer one is a malformed answer. Each call in flight may hold this much", loyalty.MaxResponseBytesLimit))
	fs.StringVar(&a.CAFile, conn("ca-file"), "", "PEM CA bundle to trust for the partner API besides the system roots")
	fs.StringVar(&a.CertFile, conn("cert-file"), "", "client certificate (PEM) for mutual TLS with the partner API")
	fs.StringVar(&a.KeyFile, conn("key-file"), "", "client certificate key (PEM)")
	a.AllowInsecure = allowInsecure(b)
	for _, name := range []string{"base-url", "timeout", "max-attempts", "max-elapsed", "max-conns", "max-response-bytes", "ca-file", "cert-file", "key-file"} {
		bind(conn(name), name)
	}
	for _, name := range []string{"auth-url", "realm", "client-id", "username", "partner-key", "partner-key-id", "grant", "auth-refused-backoff-max"} {
		bind(name, name)
	}
	b.Secret("client-secret", flagenv.VarName(APIEnvPrefix, "client-secret"))
	b.Secret("password", flagenv.VarName(APIEnvPrefix, "password"))
}

func (a *API) flag(name string) string { return "--" + a.prefix + name }

// apiCreds is where the partner's credentials go instead of its URLs.
const apiCreds = "--client-id, --client-secret, --username and --password (or " + APIEnvPrefix + "CLIENT_SECRET_FILE and " +
	APIEnvPrefix + "PASSWORD_FILE)"

// Validate reports every problem of the section, each naming its flag and
// variable, and fills AuthURL from BaseURL when it is not given.
func (a *API) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	baseOK, authOK := false, false
	if a.BaseURL == "" {
		errs = append(errs, missing("%s: required", a.flag("base-url")))
	} else if err := checkURL(a.flag("base-url"), a.BaseURL, apiCreds); err != nil {
		errs = append(errs, err)
	} else {
		baseOK = true
	}
	if a.AuthURL == "" {
		a.AuthURL = a.BaseURL
	} else if err := checkURL("--auth-url", a.AuthURL, apiCreds); err != nil {
		errs = append(errs, err)
	} else {
		authOK = true
	}
	if a.AllowInsecure == nil || !*a.AllowInsecure {
		if baseOK && plaintextURL(a.BaseURL) {
			bad("%s %s: http to a host other than this machine sends tokens, signs and members' personal data in the clear; use https, or pass --%s on a test network",
				a.flag("base-url"), RedactURL(a.BaseURL), InsecureFlag)
		}
		if authOK && a.AuthURL != a.BaseURL && plaintextURL(a.AuthURL) {
			bad("--auth-url %s: http to a host other than this machine sends the client secret and password in the clear; use https, or pass --%s on a test network",
				RedactURL(a.AuthURL), InsecureFlag)
		}
	}
	if a.ClientID == "" {
		errs = append(errs, missing("--client-id (LOYALTY_BRIDGE_API_CLIENT_ID): required"))
	}
	if err := a.grant.check("grant"); err != nil {
		errs = append(errs, err)
	} else {
		switch a.Grant {
		case GrantPassword:
			if a.ClientSecret == "" || a.Username == "" || a.Password == "" {
				errs = append(errs, missing("--grant password needs --client-secret, --username and --password (LOYALTY_BRIDGE_API_CLIENT_SECRET, _USERNAME, _PASSWORD)"))
			}
		case GrantExchange:
			if a.PartnerKey == "" {
				errs = append(errs, missing("--grant exchange needs --partner-key"))
			}
		}
	}
	if a.Timeout <= 0 {
		bad("%s %s: must be positive", a.flag("timeout"), a.Timeout)
	}
	if a.MaxElapsed <= 0 {
		bad("%s %s: must be positive", a.flag("max-elapsed"), a.MaxElapsed)
	}
	if a.MaxAttempts < 1 {
		bad("%s %d: must be at least 1", a.flag("max-attempts"), a.MaxAttempts)
	}
	if a.MaxConns < 0 {
		bad("%s %d: must not be negative", a.flag("max-conns"), a.MaxConns)
	}
	if a.MaxResponseBytes < 1 || a.MaxResponseBytes > loyalty.MaxResponseBytesLimit {
		bad("%s %d: want 1 to %d (the spec's answers are under 1 KB)", a.flag("max-response-bytes"), a.MaxResponseBytes, loyalty.MaxResponseBytesLimit)
	}
	if a.RefusedBackoffMax < 0 {
		bad("--auth-refused-backoff-max %s: must not be negative", a.RefusedBackoffMax)
	}
	if (a.CertFile == "") != (a.KeyFile == "") {
		bad("%s and %s go together", a.flag("cert-file"), a.flag("key-file"))
	}
	return errors.Join(errs...)
}

// secrets re-reads the client secret and password that came from
// LOYALTY_BRIDGE_API_CLIENT_SECRET_FILE and _PASSWORD_FILE before every
// grant, so that a rotated Kubernetes Secret (its files are replaced in
// place) heals the bridge at its next login without a restart. nil when
// neither came from a file: the values given are used as they are.
func (a *API) secrets() func() (string, string, error) {
	if a.binder == nil {
		return nil
	}
	secretFile, passwordFile := a.binder.SecretFile("client-secret"), a.binder.SecretFile("password")
	if secretFile == "" && passwordFile == "" {
		return nil
	}
	read := func(path, value, name string) (string, error) {
		if path == "" {
			return value, nil
		}
		v, err := flagenv.ReadSecretFile(path)
		if err != nil {
			return "", fmt.Errorf("%s_FILE: %w", flagenv.VarName(APIEnvPrefix, name), err)
		}
		return v, nil
	}
	return func() (string, string, error) {
		secret, err := read(secretFile, a.ClientSecret, "client-secret")
		if err != nil {
			return "", "", err
		}
		password, err := read(passwordFile, a.Password, "password")
		return secret, password, err
	}
}

// secretFiles are the files the credentials of the grant are read from:
// a change of one of them is worth a login at once, whatever the back-off.
func (a *API) secretFiles() []string {
	if a.Grant == GrantExchange {
		return []string{a.PartnerKey}
	}
	if a.binder == nil {
		return nil
	}
	return []string{a.binder.SecretFile("client-secret"), a.binder.SecretFile("password")}
}

// BuildOptions are what a command adds to the section when it builds the
// client stack.
type BuildOptions struct {
	Logger *zap.Logger // default no-op
	// MaxConns is the connection bound when the section's is 0.
	MaxConns int
	// MaxCalls bounds partner API requests in progress (see
	// loyalty.Options.MaxCalls); 0: no bound but the connections'.
	// Ignored when Calls is set.
	MaxCalls int
	// Calls, when set, is the limit on requests in progress
	// (Processing.BuildCallLimit).
	Calls *callimit.Limiter
	// OnCalls is told the requests in progress whenever they change.
	OnCalls func(inUse int)
	// WrapTransport instruments the HTTP transport (metrics).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// OnGrant and OnRetry are passed to the token cache and the client.
	OnGrant func(error)
	OnRetry func(endpoint string)
	// Wait is how the client waits before a retry (default a timer); the
	// bridge passes pipeline.Wait, which frees the record's slot meanwhile.
	Wait func(ctx context.Context, d time.Duration) error
	// Profile is the partner profile (Partner.Build): the client sends
	// accrual dates and reads fractional points as it says. Zero value:
	// the simulator's.
	Profile partnerprofile.Profile
	// WriteGate holds each write attempt until it may start; the bridge
	// passes pipeline.LeaseGate (a member the group may remove before the
	// attempt's timeout starts no write).
	WriteGate loyalty.WriteGate
	// Tracer, when set, traces each HTTP attempt and token grant
	// (loyalty.Options.Tracer, tokensource.CacheOptions.Tracer). nil:
	// tracing off.
	Tracer trace.Tracer
}

// APIClient is the partner API client stack: one HTTP client shared by the
// token grant and the calls, the partner-key signer (nil without
// --partner-key), the token cache and the client.
type APIClient struct {
	HTTP   *http.Client
	Signer *signing.Signer
	Tokens *tokensource.Cache
	Client *loyalty.Client
}

// Close releases the stack's connections.
func (c *APIClient) Close() {
	if c.Client != nil {
		c.Client.Close()
	}
	if c.HTTP != nil {
		c.HTTP.CloseIdleConnections()
	}
}

// Build builds the client stack from a validated section. It fetches no
// token: callers decide whether a first token is a start-up check.
func (a *API) Build(o BuildOptions) (_ *APIClient, err error) {
	defer settingError(&err)
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	maxConns := a.MaxConns
	if maxConns == 0 {
		maxConns = o.MaxConns
	}
	hc, err := loyalty.NewHTTPClient(loyalty.TransportOptions{MaxConns: maxConns,
		TLS:  loyalty.TLSOptions{CAFile: a.CAFile, CertFile: a.CertFile, KeyFile: a.KeyFile},
		Wrap: o.WrapTransport})
	if err != nil {
		return nil, fmt.Errorf("partner API transport (%s, %s, %s): %w", a.flag("ca-file"), a.flag("cert-file"), a.flag("key-file"), err)
	}
	c := &APIClient{HTTP: hc}
	if a.PartnerKey != "" {
		// The signer re-reads the key file when it changes (a rotated
		// Secret), keeping the last good key if the new one is unusable.
		keyLog := log.Named("signing")
		onReload := func(warning string, err error) {
			switch {
			case err != nil:
				keyLog.Error("--partner-key: the key file changed but cannot be used; signing with the previous key", zap.Error(err))
			default:
				keyLog.Info("--partner-key: the key file changed; signing with the new key")
				if warning != "" {
					keyLog.Warn("--partner-key: " + warning)
				}
			}
		}
		signer, warning, err := signing.LoadFile(a.PartnerKey, signing.Options{Issuer: a.ClientID, KID: a.PartnerKeyID, OnReload: onReload,
			Profile: o.Profile})
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("--partner-key: %w", err)
		}
		if warning != "" {
			log.Warn("--partner-key: " + warning)
		}
		c.Signer = signer
	}
	var grant tokensource.Source
	if a.Grant == GrantExchange {
		grant, err = tokensource.NewExchange(tokensource.ExchangeOptions{BaseURL: a.BaseURL, Signer: c.Signer, HTTPClient: hc,
			LifetimeUnit: o.Profile.TokenLifetimeUnit.Duration()})
	} else {
		grant, err = tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: a.AuthURL, Realm: a.Realm,
			ClientID: a.ClientID, ClientSecret: a.ClientSecret, Username: a.Username, Password: a.Password,
			Secrets: a.secrets(), HTTPClient: hc, Logger: log.Named("token"), LifetimeUnit: o.Profile.TokenLifetimeUnit.Duration()})
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("partner API token grant: %w", err)
	}
	copts := tokensource.CacheOptions{FetchTimeout: a.Timeout, Logger: log.Named("token"), OnGrant: o.OnGrant,
		MaxRefusedBackoff: a.RefusedBackoffMax, Tracer: o.Tracer}
	if files := a.secretFiles(); slices.ContainsFunc(files, func(f string) bool { return f != "" }) {
		copts.CredentialsChanged = secretfile.NewWatch(files...).Changed
	}
	c.Tokens = tokensource.NewCache(grant, copts)
	opts := loyalty.Options{BaseURL: a.BaseURL, HTTPClient: hc, Tokens: c.Tokens, Timeout: a.Timeout, MaxResponseBytes: a.MaxResponseBytes,
		Retry:   loyalty.RetryPolicy{MaxAttempts: a.MaxAttempts, MaxElapsed: a.MaxElapsed},
		Profile: o.Profile, Logger: log.Named("api"), OnRetry: o.OnRetry, MaxCalls: o.MaxCalls, Calls: o.Calls, OnCalls: o.OnCalls, Sleep: o.Wait,
		WriteGate: o.WriteGate, Tracer: o.Tracer}
	if c.Signer != nil {
		opts.Signer = c.Signer
	}
	if c.Client, err = loyalty.New(opts); err != nil {
		c.Close()
		return nil, fmt.Errorf("partner API client: %w", err)
	}
	return c, nil
}
