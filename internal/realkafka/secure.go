package realkafka

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// EnvSecure is the environment variable that names the file scripts/kafka
// start --secure writes (DIR/secure.env): a real cluster's TLS and SASL
// listeners and how to authenticate to them.
const EnvSecure = "LOYALTY_BRIDGE_TEST_KAFKA_SECURE"

// Secure is a real cluster with TLS and SASL listeners besides its
// plaintext one, as scripts/kafka start --secure describes it. Every
// listener of a node serves the same cluster, so a topic made through
// Plaintext is seen on all of them.
type Secure struct {
	Plaintext     []string // no TLS, no SASL: for the test's own set-up
	SSL           []string // TLS with a client certificate required, no SASL
	SASLSSL       []string // TLS with a client certificate required, and SASL
	SASLPlaintext []string // SASL without TLS
	// SSLNamed is TLS without client certificates whose server
	// certificate names SSLNamedServerName only, not the address dialled.
	SSLNamed           []string
	SSLNamedServerName string
	CAFile             string // PEM: the CA every listener's certificate chains to
	ClientCertFile     string // PEM: a client certificate from CAFile's CA
	ClientKeyFile      string // PEM: its key
	// Users holds one credential per SASL mechanism, by its name: PLAIN,
	// SCRAM-SHA-256, SCRAM-SHA-512. Each user has that mechanism only.
	Users map[string]Credential
}

// Credential is a SASL user and password.
type Credential struct{ User, Password string }

// SecureCluster returns the cluster EnvSecure names, or skips tb when it is
// unset. A file that cannot be read, or lacks a setting, fails tb.
func SecureCluster(tb testing.TB) *Secure {
	tb.Helper()
	path := os.Getenv(EnvSecure)
	if path == "" {
		tb.Skipf("no real Kafka cluster with TLS and SASL: set %s to the secure.env of scripts/kafka start --secure", EnvSecure)
	}
	s, err := LoadSecure(path)
	if err != nil {
		tb.Fatalf("%s: %v", EnvSecure, err)
	}
	return s
}

// LoadSecure reads a secure.env file and the passwords file it names.
// Every setting is required; all missing ones are reported together.
func LoadSecure(path string) (*Secure, error) {
	env, err := readEnvFile(path)
	if err != nil {
		return nil, err
	}
	var missing []error
	get := func(m map[string]string, from, key string) string {
		v := m[key]
		if v == "" {
			missing = append(missing, fmt.Errorf("%s: no %s", from, key))
		}
		return v
	}
	list := func(key string) []string {
		var out []string
		for _, a := range strings.Split(get(env, path, key), ",") {
			if a = strings.TrimSpace(a); a != "" {
				out = append(out, a)
			}
		}
		return out
	}
	s := &Secure{
		Plaintext: list("KAFKA_PLAINTEXT"), SSL: list("KAFKA_SSL"), SASLSSL: list("KAFKA_SASL_SSL"),
		SASLPlaintext: list("KAFKA_SASL_PLAINTEXT"), SSLNamed: list("KAFKA_SSL_NAMED"),
		SSLNamedServerName: get(env, path, "KAFKA_SSL_NAMED_SERVER_NAME"),
		CAFile:             get(env, path, "KAFKA_CA_FILE"),
		ClientCertFile:     get(env, path, "KAFKA_CLIENT_CERT_FILE"),
		ClientKeyFile:      get(env, path, "KAFKA_CLIENT_KEY_FILE"),
		Users:              map[string]Credential{},
	}
	pwFile := get(env, path, "KAFKA_PASSWORDS_FILE")
	var pw map[string]string
	if pwFile != "" {
		if pw, err = readEnvFile(pwFile); err != nil {
			return nil, err
		}
	}
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		key := "KAFKA_" + strings.ReplaceAll(mech, "-", "_")
		c := Credential{User: get(env, path, key+"_USER")}
		if pw != nil {
			c.Password = get(pw, pwFile, key+"_PASSWORD")
		}
		s.Users[mech] = c
	}
	if len(missing) > 0 {
		return nil, errors.Join(missing...)
	}
	return s, nil
}

// readEnvFile reads KEY=VALUE lines; blank lines and lines starting with
// '#' are skipped. Values are taken as written, without shell quoting.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read cluster description: %w", err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			// The line may be a password: say where, not what.
			return nil, fmt.Errorf("%s:%d: not KEY=VALUE", path, n)
		}
		m[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return m, nil
}
