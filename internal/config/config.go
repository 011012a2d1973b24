package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// EnvPrefix is the prefix of every variable the service reads: --brokers is
// LOYALTY_BRIDGE_BROKERS.
const EnvPrefix = "LOYALTY_BRIDGE_"

// APIEnvPrefix is the prefix of the partner API connection's variables,
// shared with the `api` command so one set of variables configures both:
// --client-id is LOYALTY_BRIDGE_API_CLIENT_ID, --api-base-url is
// LOYALTY_BRIDGE_API_BASE_URL.
const APIEnvPrefix = "LOYALTY_BRIDGE_API_"

// Config is everything `loyalty-bridge run` is told. Build it with Define
// and a flagenv parse, then call Validate.
type Config struct {
	// Kafka.
	Brokers           string
	Group             string
	KafkaClientID     string
	KafkaTLS          bool
	KafkaTLSCAFile    string
	KafkaTLSCertFile  string
	KafkaTLSKeyFile   string
	KafkaTLSServer    string
	SASLMechanism     string
	SASLUsername      string
	SASLPassword      string
	PurchaseTopic     string
	RefundTopic       string
	MemberTopic       string
	RegistryURL       string
	RegistryUsername  string
	RegistryPassword  string
	RegisterSchemas   bool
	Ordering          string
	MaxInFlight       int
	MaxInFlightPerP   int
	MaxBuffered       int
	CommitInterval    time.Duration
	FreshWindow       int
	Delivery          string
	TransactionalID   string
	TransactionTTL    time.Duration
	DrainTimeout      time.Duration
	Linger            time.Duration
	RecordAttempts    int
	RecordBackoff     time.Duration
	BreakerFailures   int
	BreakerRatio      float64
	BreakerOpen       time.Duration
	Enrich            bool
	IncludeOriginal   bool
	MetricsAddr       string
	LogFormat         string
	LogLevel          string
	ShutdownTimeout   time.Duration
	StartupTimeout    time.Duration
	LagInterval       time.Duration
	APIBaseURL        string
	AuthURL           string
	Realm             string
	ClientID          string
	ClientSecret      string
	Username          string
	Password          string
	PartnerKey        string
	PartnerKeyID      string
	Grant             string
	APITimeout        time.Duration
	APIMaxAttempts    int
	APIMaxElapsed     time.Duration
	APIMaxConns       int
	APICAFile         string
	APICertFile       string
	APIKeyFile        string
	TransactionFormat string
	ConfigFile        string
}

// Vars returns every environment variable the configuration reads, by flag
// name.
func Vars() map[string]flagenv.Var {
	fs := flag.NewFlagSet("vars", flag.ContinueOnError)
	_, b := Define(fs)
	return b.Vars()
}

// Define defines the service's flags on fs with their defaults and binds
// every one of them to its environment variable. Parse with
// b.ParseWithFile(args, lookup, "config").
func Define(fs *flag.FlagSet) (*Config, *flagenv.Binder) {
	c := &Config{}
	d := codec.DefaultTopics()
	fs.StringVar(&c.Brokers, "brokers", "127.0.0.1:9092", "Kafka seed brokers, comma-separated")
	fs.StringVar(&c.Group, "group", "loyalty-bridge", "consumer group")
	fs.StringVar(&c.KafkaClientID, "kafka-client-id", "loyalty-bridge", "Kafka client.id (broker logs and quotas)")
	fs.BoolVar(&c.KafkaTLS, "kafka-tls", false, "connect to Kafka over TLS (implied by any --kafka-tls-* file)")
	fs.StringVar(&c.KafkaTLSCAFile, "kafka-tls-ca-file", "", "PEM CA bundle for the brokers' certificates (default: system roots)")
	fs.StringVar(&c.KafkaTLSCertFile, "kafka-tls-cert-file", "", "client certificate (PEM) for mutual TLS")
	fs.StringVar(&c.KafkaTLSKeyFile, "kafka-tls-key-file", "", "client certificate key (PEM)")
	fs.StringVar(&c.KafkaTLSServer, "kafka-tls-server-name", "", "server name to verify (default: the broker's host)")
	fs.StringVar(&c.SASLMechanism, "kafka-sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: none)")
	fs.StringVar(&c.SASLUsername, "kafka-sasl-username", "", "SASL user")
	fs.StringVar(&c.SASLPassword, "kafka-sasl-password", "", "SASL password")
	fs.StringVar(&c.PurchaseTopic, "purchase-topic", d.Purchase, "input topic of PurchaseCompleted")
	fs.StringVar(&c.RefundTopic, "refund-redemption-topic", d.RefundRedemption, "input topic of RedemptionRequested and PurchaseRefunded")
	fs.StringVar(&c.MemberTopic, "member-onboarding-topic", d.MemberOnboarding, "input topic of member commands")
	fs.StringVar(&c.RegistryURL, "schema-registry-url", "http://127.0.0.1:8081", "Schema Registry URL")
	fs.StringVar(&c.RegistryUsername, "schema-registry-username", "", "Schema Registry basic-auth user")
	fs.StringVar(&c.RegistryPassword, "schema-registry-password", "", "Schema Registry basic-auth password")
	fs.BoolVar(&c.RegisterSchemas, "register-schemas", false, "register the bridge's schemas at start-up (otherwise they must already be registered)")
	fs.StringVar(&c.Ordering, "ordering", "key", "order within a partition: key, partition or unordered")
	fs.IntVar(&c.MaxInFlight, "max-in-flight", 256, "records in flight across all partitions")
	fs.IntVar(&c.MaxInFlightPerP, "max-in-flight-per-partition", 0, "records in flight per partition (0: no bound of its own)")
	fs.IntVar(&c.MaxBuffered, "max-buffered", 0, "records taken from Kafka and not yet committed (0: 4 × --max-in-flight)")
	fs.DurationVar(&c.CommitInterval, "commit-interval", time.Second, "how often completed offsets are committed")
	fs.StringVar(&c.Delivery, "delivery", "at-least-once", "at-least-once, or exactly-once: outputs and input offsets commit in one Kafka transaction (readers of the reply topics then use isolation.level=read_committed)")
	fs.StringVar(&c.TransactionalID, "transactional-id", "", "exactly-once: this member's transactional id, unique per live member and kept across its restarts (default loyalty-bridge-<hostname>, the pod name in Kubernetes)")
	fs.DurationVar(&c.TransactionTTL, "transaction-timeout", 10*time.Second, "exactly-once: bound on one transaction")
	fs.IntVar(&c.FreshWindow, "fresh-window", 0, "records per newly assigned partition that are guarded by a lookup (0: what a previous owner may have had in flight, --max-buffered/2; raise it to cover rate × --commit-interval when the partner API applies duplicate transaction ids twice)")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 10*time.Second, "how long a revoke or shutdown waits for in-flight records")
	fs.DurationVar(&c.Linger, "linger", 2*time.Millisecond, "producer linger")
	fs.IntVar(&c.RecordAttempts, "record-attempts", 5, "attempts per record at transient API failures while the circuit allows them, then TRANSIENT_EXHAUSTED")
	fs.DurationVar(&c.RecordBackoff, "record-backoff", 200*time.Millisecond, "base back-off between a record's attempts (full jitter)")
	fs.IntVar(&c.BreakerFailures, "breaker-failures", 5, "consecutive failed API attempts that open the circuit")
	fs.Float64Var(&c.BreakerRatio, "breaker-failure-ratio", 0.5, "share of failed attempts (of 20 or more in 30 s) that opens the circuit; 0 turns it off")
	fs.DurationVar(&c.BreakerOpen, "breaker-open-timeout", 5*time.Second, "how long the circuit stays open before a probe")
	fs.BoolVar(&c.Enrich, "enrich", false, "add non-PII profile fields (tierClass, status, eKycStatus) to member results")
	fs.BoolVar(&c.IncludeOriginal, "include-original", false, "carry the original record key and value in error events; they may hold personal data, which every reader of the error topics would see (off: replay reads originals from their source position)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", ":9464", "address of /metrics, /healthz and /readyz (empty: off)")
	fs.StringVar(&c.LogFormat, "log-format", "json", "json or console")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "bound on a graceful shutdown, from the signal to exit: drain, produce, commit, leave the group (must exceed --drain-timeout)")
	fs.DurationVar(&c.StartupTimeout, "startup-timeout", 30*time.Second, "bound on start-up checks (brokers, registry, first token)")
	fs.DurationVar(&c.LagInterval, "lag-interval", 15*time.Second, "how often consumer lag is measured for metrics")

	fs.StringVar(&c.APIBaseURL, "api-base-url", "http://127.0.0.1:8088", "partner API base URL ({base_url})")
	fs.StringVar(&c.AuthURL, "auth-url", "", "identity provider URL ({auth_url}; default --api-base-url)")
	fs.StringVar(&c.Realm, "realm", tokensource.DefaultRealm, "identity provider realm")
	fs.StringVar(&c.ClientID, "client-id", "", "partner client_id")
	fs.StringVar(&c.ClientSecret, "client-secret", "", "partner client_secret")
	fs.StringVar(&c.Username, "username", "", "partner user of the password grant")
	fs.StringVar(&c.Password, "password", "", "password of --username")
	fs.StringVar(&c.PartnerKey, "partner-key", "", "PEM private key file (RS256/ES256) that signs redemptions and partner tokens")
	fs.StringVar(&c.PartnerKeyID, "partner-key-id", "", "kid header of partner JWTs")
	fs.StringVar(&c.Grant, "grant", "password", "how tokens are obtained: password or exchange")
	fs.DurationVar(&c.APITimeout, "api-timeout", 10*time.Second, "time limit of one API attempt")
	fs.IntVar(&c.APIMaxAttempts, "api-max-attempts", loyalty.DefaultMaxAttempts, "attempts of one API call at retryable failures")
	fs.DurationVar(&c.APIMaxElapsed, "api-max-elapsed", 30*time.Second, "time limit of one API call with its retries")
	fs.IntVar(&c.APIMaxConns, "api-max-conns", 0, "connections to the partner API (0: --max-in-flight)")
	fs.StringVar(&c.APICAFile, "api-ca-file", "", "PEM CA bundle to trust for the partner API besides the system roots")
	fs.StringVar(&c.APICertFile, "api-cert-file", "", "client certificate (PEM) for mutual TLS with the partner API")
	fs.StringVar(&c.APIKeyFile, "api-key-file", "", "client certificate key (PEM)")
	fs.StringVar(&c.TransactionFormat, "transaction-date-format", string(loyalty.DateEpochMillis), "accrual transactionDate on the wire: epoch-millis or iso8601")
	fs.StringVar(&c.ConfigFile, "config", "", "YAML file of settings keyed by flag name (flags and env override it)")

	b := flagenv.New(fs, EnvPrefix)
	// The partner connection reads the same variables as `api`.
	for _, name := range []string{"auth-url", "realm", "client-id", "username", "partner-key", "partner-key-id", "grant",
		"transaction-date-format"} {
		b.Env(name, flagenv.VarName(APIEnvPrefix, name))
	}
	for _, name := range []string{"api-base-url", "api-timeout", "api-max-attempts", "api-max-elapsed", "api-max-conns",
		"api-ca-file", "api-cert-file", "api-key-file"} {
		b.Env(name, flagenv.VarName(EnvPrefix, name))
	}
	b.Secret("client-secret", flagenv.VarName(APIEnvPrefix, "client-secret"))
	b.Secret("password", flagenv.VarName(APIEnvPrefix, "password"))
	b.Secret("kafka-sasl-password", "")
	b.Secret("schema-registry-password", "")
	b.All()
	return c, b
}

// Topics is the configured topic set.
func (c *Config) Topics() codec.Topics {
	return codec.Topics{Purchase: c.PurchaseTopic, RefundRedemption: c.RefundTopic, MemberOnboarding: c.MemberTopic}
}

// BrokerList is --brokers split.
func (c *Config) BrokerList() []string {
	var out []string
	for _, b := range strings.Split(c.Brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// Validate reports every problem at once, each naming its flag, before
// anything connects. It fills derived defaults (auth URL).
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.BrokerList()) == 0 {
		bad("--brokers: at least one broker is required")
	}
	if c.Group == "" {
		bad("--group: required")
	}
	seen := map[string]string{}
	for _, t := range []struct{ flag, name string }{{"purchase-topic", c.PurchaseTopic},
		{"refund-redemption-topic", c.RefundTopic}, {"member-onboarding-topic", c.MemberTopic}} {
		if err := checkTopicName(t.name); err != nil {
			bad("--%s: %v", t.flag, err)
		} else if other, dup := seen[t.name]; dup {
			bad("--%s: %q is also --%s", t.flag, t.name, other)
		}
		seen[t.name] = t.flag
	}
	if c.RegistryURL == "" {
		bad("--schema-registry-url: required")
	}
	if _, err := ordering.ParseMode(c.Ordering); err != nil {
		bad("--ordering: %v", err)
	}
	if c.MaxInFlight < 1 {
		bad("--max-in-flight %d: must be at least 1", c.MaxInFlight)
	}
	if c.MaxInFlightPerP < 0 {
		bad("--max-in-flight-per-partition %d: must not be negative", c.MaxInFlightPerP)
	}
	if _, err := pipeline.ParseDelivery(c.Delivery); err != nil {
		bad("--delivery: %v", err)
	}
	if c.Delivery == "exactly-once" && c.TransactionalID == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			bad("--transactional-id: required with --delivery exactly-once (the hostname is unknown)")
		} else {
			c.TransactionalID = "loyalty-bridge-" + host
		}
	}
	if c.TransactionTTL <= 0 {
		bad("--transaction-timeout %s: must be positive", c.TransactionTTL)
	}
	if c.FreshWindow < 0 {
		bad("--fresh-window %d: must not be negative", c.FreshWindow)
	}
	if c.MaxBuffered != 0 && c.MaxBuffered < c.MaxInFlight {
		bad("--max-buffered %d: must be at least --max-in-flight (%d)", c.MaxBuffered, c.MaxInFlight)
	}
	if c.RecordAttempts < 1 {
		bad("--record-attempts %d: must be at least 1", c.RecordAttempts)
	}
	if c.BreakerFailures < 1 {
		bad("--breaker-failures %d: must be at least 1", c.BreakerFailures)
	}
	if c.BreakerRatio < 0 || c.BreakerRatio > 1 {
		bad("--breaker-failure-ratio %v: want 0 to 1", c.BreakerRatio)
	}
	for name, d := range map[string]time.Duration{"commit-interval": c.CommitInterval, "drain-timeout": c.DrainTimeout,
		"breaker-open-timeout": c.BreakerOpen, "api-timeout": c.APITimeout, "api-max-elapsed": c.APIMaxElapsed,
		"shutdown-timeout": c.ShutdownTimeout, "startup-timeout": c.StartupTimeout, "lag-interval": c.LagInterval} {
		if d <= 0 {
			bad("--%s %s: must be positive", name, d)
		}
	}
	if c.DrainTimeout > 0 && c.ShutdownTimeout > 0 && c.ShutdownTimeout <= c.DrainTimeout {
		bad("--shutdown-timeout %s: must exceed --drain-timeout (%s), which is part of the shutdown", c.ShutdownTimeout, c.DrainTimeout)
	}
	if c.Linger < 0 || c.RecordBackoff < 0 {
		bad("--linger and --record-backoff must not be negative")
	}
	if c.APIMaxAttempts < 1 {
		bad("--api-max-attempts %d: must be at least 1", c.APIMaxAttempts)
	}
	if c.APIMaxConns < 0 {
		bad("--api-max-conns %d: must not be negative", c.APIMaxConns)
	}
	if c.LogFormat != "json" && c.LogFormat != "console" {
		bad("--log-format %q: want json or console", c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("--log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	if c.APIBaseURL == "" {
		bad("--api-base-url: required")
	}
	if c.AuthURL == "" {
		c.AuthURL = c.APIBaseURL
	}
	if c.ClientID == "" {
		bad("--client-id (LOYALTY_BRIDGE_API_CLIENT_ID): required")
	}
	switch c.Grant {
	case "password":
		if c.ClientSecret == "" || c.Username == "" || c.Password == "" {
			bad("--grant password needs --client-secret, --username and --password (LOYALTY_BRIDGE_API_CLIENT_SECRET, _USERNAME, _PASSWORD)")
		}
	case "exchange":
		if c.PartnerKey == "" {
			bad("--grant exchange needs --partner-key")
		}
	default:
		bad("--grant %q: want password or exchange", c.Grant)
	}
	switch loyalty.DateFormat(c.TransactionFormat) {
	case loyalty.DateEpochMillis, loyalty.DateISO8601:
	default:
		bad("--transaction-date-format %q: want %s or %s", c.TransactionFormat, loyalty.DateEpochMillis, loyalty.DateISO8601)
	}
	if (c.APICertFile == "") != (c.APIKeyFile == "") {
		bad("--api-cert-file and --api-key-file go together")
	}
	if (c.KafkaTLSCertFile == "") != (c.KafkaTLSKeyFile == "") {
		bad("--kafka-tls-cert-file and --kafka-tls-key-file go together")
	}
	switch strings.ToUpper(c.SASLMechanism) {
	case "":
		if c.SASLUsername != "" || c.SASLPassword != "" {
			bad("--kafka-sasl-username/--kafka-sasl-password given without --kafka-sasl-mechanism")
		}
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if c.SASLUsername == "" || c.SASLPassword == "" {
			bad("--kafka-sasl-mechanism %s needs --kafka-sasl-username and --kafka-sasl-password", c.SASLMechanism)
		}
	default:
		bad("--kafka-sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASLMechanism)
	}
	return errors.Join(errs...)
}

// ValidateKafka checks only the Kafka connection settings, for commands
// that need nothing else (offsets).
func (c *Config) ValidateKafka() error {
	var errs []error
	if len(c.BrokerList()) == 0 {
		errs = append(errs, errors.New("--brokers: at least one broker is required"))
	}
	if (c.KafkaTLSCertFile == "") != (c.KafkaTLSKeyFile == "") {
		errs = append(errs, errors.New("--kafka-tls-cert-file and --kafka-tls-key-file go together"))
	}
	switch strings.ToUpper(c.SASLMechanism) {
	case "", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASLMechanism))
	}
	return errors.Join(errs...)
}

// KafkaOpts are the connection options every Kafka client of the service
// uses: seeds, client id, TLS and SASL. Files are read here, so a missing
// CA or key is a start-up error naming the flag.
func (c *Config) KafkaOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.BrokerList()...), kgo.ClientID(c.KafkaClientID)}
	if c.KafkaTLS || c.KafkaTLSCAFile != "" || c.KafkaTLSCertFile != "" || c.KafkaTLSServer != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.KafkaTLSServer}
		if c.KafkaTLSCAFile != "" {
			pem, err := os.ReadFile(c.KafkaTLSCAFile)
			if err != nil {
				return nil, fmt.Errorf("--kafka-tls-ca-file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--kafka-tls-ca-file %s: no PEM certificate in it", c.KafkaTLSCAFile)
			}
			cfg.RootCAs = pool
		}
		if c.KafkaTLSCertFile != "" {
			cert, err := tls.LoadX509KeyPair(c.KafkaTLSCertFile, c.KafkaTLSKeyFile)
			if err != nil {
				return nil, fmt.Errorf("--kafka-tls-cert-file/--kafka-tls-key-file: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if m := c.saslMechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func (c *Config) saslMechanism() sasl.Mechanism {
	switch strings.ToUpper(c.SASLMechanism) {
	case "PLAIN":
		return plain.Auth{User: c.SASLUsername, Pass: c.SASLPassword}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: c.SASLUsername, Pass: c.SASLPassword}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: c.SASLUsername, Pass: c.SASLPassword}.AsSha512Mechanism()
	}
	return nil
}

// checkTopicName applies Kafka's rules to an input topic name, leaving room
// for the ".result" and ".error" suffixes.
func checkTopicName(name string) error {
	const maxLen = 249 - len(".result")
	switch {
	case name == "":
		return errors.New("required")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a legal topic name", name)
	case len(name) > maxLen:
		return fmt.Errorf("longer than %d characters", maxLen)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q: only letters, digits, '.', '_' and '-' are allowed", name)
		}
	}
	return nil
}
