package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
)

// SASLMechanism is a Kafka SASL mechanism; the zero value is none.
type SASLMechanism string

// SASL mechanisms.
const (
	SASLNone        SASLMechanism = ""
	SASLPlain       SASLMechanism = "PLAIN"
	SASLScramSHA256 SASLMechanism = "SCRAM-SHA-256"
	SASLScramSHA512 SASLMechanism = "SCRAM-SHA-512"
)

// ParseSASLMechanism accepts the mechanisms in any case; "" is none.
func ParseSASLMechanism(s string) (SASLMechanism, error) {
	switch m := SASLMechanism(strings.ToUpper(strings.TrimSpace(s))); m {
	case SASLNone, SASLPlain, SASLScramSHA256, SASLScramSHA512:
		return m, nil
	}
	return "", errors.New("want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
}

// Compression is the codec of produced batches.
type Compression string

// Compression codecs.
const (
	CompressNone   Compression = "none"
	CompressGzip   Compression = "gzip"
	CompressSnappy Compression = "snappy"
	CompressLZ4    Compression = "lz4"
	CompressZstd   Compression = "zstd"
)

// DefaultCompression is none: reply events are small (a few hundred bytes)
// and every Kafka client reads uncompressed batches without a codec
// package, while kafkajs, for one, reads nothing snappy- or
// lz4-compressed unless its consumers install a codec.
const DefaultCompression = CompressNone

// ParseCompression accepts none, gzip, snappy, lz4 or zstd.
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(strings.ToLower(strings.TrimSpace(s))); c {
	case CompressNone, CompressGzip, CompressSnappy, CompressLZ4, CompressZstd:
		return c, nil
	}
	return "", errors.New("want none, gzip, snappy, lz4 or zstd")
}

func (c Compression) codec() kgo.CompressionCodec {
	switch c {
	case CompressGzip:
		return kgo.GzipCompression()
	case CompressSnappy:
		return kgo.SnappyCompression()
	case CompressLZ4:
		return kgo.Lz4Compression()
	case CompressZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// Kafka is the connection to the brokers: seeds, client id, TLS, SASL and
// the compression of what is produced. Every command that talks to Kafka
// composes it, so a secured cluster is reachable from all of them.
type Kafka struct {
	Brokers       string
	ClientID      string
	TLS           bool
	TLSCAFile     string
	TLSCertFile   string
	TLSKeyFile    string
	TLSServerName string
	SASLMechanism SASLMechanism
	SASLUsername  string
	SASLPassword  string
	Compression   Compression
	// AllowInsecure is --allow-insecure, shared with the other sections.
	AllowInsecure *bool

	saslFlag    *choice[SASLMechanism]
	compression *choice[Compression]
	binder      *flagenv.Binder // where Validate's warnings go; which secrets came from *_FILE
}

// Define defines the section's flags on b's flag set and binds them.
func (k *Kafka) Define(b *flagenv.Binder) {
	k.binder = b
	fs := b.FlagSet()
	fs.StringVar(&k.Brokers, "brokers", "127.0.0.1:9092", "Kafka seed brokers, comma-separated")
	fs.StringVar(&k.ClientID, "kafka-client-id", "loyalty-bridge", "Kafka client.id (broker logs and quotas)")
	fs.BoolVar(&k.TLS, "kafka-tls", false, "connect to Kafka over TLS (implied by any --kafka-tls-* setting)")
	fs.StringVar(&k.TLSCAFile, "kafka-tls-ca-file", "", "PEM CA bundle for the brokers' certificates (default: system roots)")
	fs.StringVar(&k.TLSCertFile, "kafka-tls-cert-file", "", "client certificate (PEM) for mutual TLS")
	fs.StringVar(&k.TLSKeyFile, "kafka-tls-key-file", "", "client certificate key (PEM)")
	fs.StringVar(&k.TLSServerName, "kafka-tls-server-name", "", "server name to verify (default: the broker's host)")
	k.saslFlag = defineChoice(fs, &k.SASLMechanism, "kafka-sasl-mechanism", SASLNone, ParseSASLMechanism,
		"SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: none)")
	fs.StringVar(&k.SASLUsername, "kafka-sasl-username", "", "SASL user")
	fs.StringVar(&k.SASLPassword, "kafka-sasl-password", "", "SASL password (from a *_FILE: read again, if the file changed, at each connection)")
	k.compression = defineChoice(fs, &k.Compression, "compression", DefaultCompression, ParseCompression,
		"codec of produced batches: none, gzip, snappy, lz4 or zstd. Default none: reply events are small, and every consumer reads "+
			"uncompressed batches without a codec package (kafkajs needs one for snappy, lz4 and zstd)")
	k.AllowInsecure = allowInsecure(b)
	b.Secret("kafka-sasl-password", "")
}

// BrokerList is --brokers split.
func (k *Kafka) BrokerList() []string {
	var out []string
	for _, s := range strings.Split(k.Brokers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (k *Kafka) tlsOn() bool {
	return k.TLS || k.TLSCAFile != "" || k.TLSCertFile != "" || k.TLSKeyFile != "" || k.TLSServerName != ""
}

// Validate reports every problem of the section, each naming its flag.
// Plaintext to brokers off loopback, which it does not refuse unless the
// password would cross in the clear, is a warning on the Binder of Define
// (see plaintextWarning).
func (k *Kafka) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(k.BrokerList()) == 0 {
		bad("--brokers: at least one broker is required")
	}
	for i, b := range k.BrokerList() {
		// Never quoted: an entry with '@' may be user:password@host.
		if strings.ContainsAny(b, "@/") {
			bad("--brokers: entry %d is not host:port (it holds '@' or '/'); Kafka credentials go in --kafka-sasl-username and --kafka-sasl-password (or their *_FILE)", i+1)
		}
	}
	if (k.TLSCertFile == "") != (k.TLSKeyFile == "") {
		bad("--kafka-tls-cert-file and --kafka-tls-key-file go together")
	}
	errs = append(errs, k.saslFlag.check("kafka-sasl-mechanism"), k.compression.check("compression"))
	switch k.SASLMechanism {
	case SASLNone:
		if k.SASLUsername != "" || k.SASLPassword != "" {
			bad("--kafka-sasl-username/--kafka-sasl-password given without --kafka-sasl-mechanism")
		}
	default:
		if k.SASLUsername == "" || k.SASLPassword == "" {
			errs = append(errs, missing("--kafka-sasl-mechanism %s needs --kafka-sasl-username and --kafka-sasl-password", k.SASLMechanism))
		}
	}
	if k.SASLMechanism == SASLPlain && !k.tlsOn() && !k.insecure() {
		if off := k.offLoopback(); len(off) > 0 {
			bad("--kafka-sasl-mechanism PLAIN without --kafka-tls sends the password in the clear to %s; turn TLS on, or pass --%s on a test network",
				strings.Join(off, ", "), InsecureFlag)
		}
	} else if w := k.plaintextWarning(); w != "" && k.binder != nil {
		k.binder.Warn(w)
	}
	return errors.Join(errs...)
}

// plaintextWarning is the warning that records cross the network
// unencrypted, or "": without TLS, every record the bridge reads and
// writes (member onboardings carry personal data) goes to a broker off
// loopback in the clear. It is a warning, not a refusal as PLAIN is:
// plaintext Kafka inside a cluster network is common, and SCRAM (or no
// SASL) sends no password in the clear. --allow-insecure silences it.
func (k *Kafka) plaintextWarning() string {
	if k.tlsOn() || k.insecure() {
		return ""
	}
	off := k.offLoopback()
	if len(off) == 0 {
		return ""
	}
	return fmt.Sprintf("--brokers %s: Kafka without TLS: member data (onboardings carry personal data) and results cross the network unencrypted; "+
		"turn --kafka-tls on, or pass --%s where the network is trusted", strings.Join(off, ", "), InsecureFlag)
}

func (k *Kafka) insecure() bool { return k.AllowInsecure != nil && *k.AllowInsecure }

func (k *Kafka) offLoopback() []string {
	var off []string
	for i, b := range k.BrokerList() {
		host, _, err := net.SplitHostPort(b)
		if err != nil {
			host = b
		}
		switch {
		case strings.Contains(b, "@"):
			// Refused by Validate; named without what may be a password.
			off = append(off, fmt.Sprintf("(entry %d)", i+1))
		case !loopback(host):
			off = append(off, b)
		}
	}
	return off
}

// Build is BuildLogged without a logger.
func (k *Kafka) Build() ([]kgo.Opt, error) { return k.BuildLogged(nil) }

// BuildLogged returns the options every Kafka client of a command uses:
// seeds, client id, TLS, SASL and the produce compression. Files are read
// here, so a missing CA or key is an error naming its flag. A SASL
// password from LOYALTY_BRIDGE_KAFKA_SASL_PASSWORD_FILE is read again, if
// the file changed, at every connection's authentication: a rotated
// Secret is used from the next connection on without a restart. log (nil:
// none) hears of such a change, or of a file that cannot be read again.
func (k *Kafka) BuildLogged(log *zap.Logger) (_ []kgo.Opt, err error) {
	defer settingError(&err)
	opts := []kgo.Opt{kgo.SeedBrokers(k.BrokerList()...), kgo.ClientID(k.ClientID),
		kgo.ProducerBatchCompression(k.Compression.codec())}
	if k.tlsOn() {
		cfg, err := tlsConfig("kafka-tls", k.TLSCAFile, k.TLSCertFile, k.TLSKeyFile)
		if err != nil {
			return nil, err
		}
		cfg.ServerName = k.TLSServerName
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	m, err := k.mechanism(log)
	if err != nil {
		return nil, fmt.Errorf("--kafka-sasl-password: %w", err)
	}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// mechanism is the SASL mechanism, nil for none. Its credentials are asked
// for at each connection's authentication.
func (k *Kafka) mechanism(log *zap.Logger) (sasl.Mechanism, error) {
	if k.SASLMechanism == SASLNone {
		return nil, nil
	}
	rs, err := secretFile(k.binder, "kafka-sasl-password", log)
	if err != nil {
		return nil, err
	}
	password := func() string {
		if rs == nil {
			return k.SASLPassword
		}
		return rs.value()
	}
	user := k.SASLUsername
	scramAuth := func(context.Context) (scram.Auth, error) { return scram.Auth{User: user, Pass: password()}, nil }
	switch k.SASLMechanism {
	case SASLPlain:
		return plain.Plain(func(context.Context) (plain.Auth, error) { return plain.Auth{User: user, Pass: password()}, nil }), nil
	case SASLScramSHA256:
		return scram.Sha256(scramAuth), nil
	case SASLScramSHA512:
		return scram.Sha512(scramAuth), nil
	}
	return nil, nil
}

// tlsConfig builds a TLS 1.2+ client configuration from PEM files named by
// the flags <prefix>-ca-file, -cert-file and -key-file. No CA file: the
// system roots.
func tlsConfig(prefix, caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--%s-ca-file: %w", prefix, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--%s-ca-file %s: no PEM certificate in it", prefix, caFile)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--%s-cert-file/--%s-key-file: %w", prefix, prefix, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
