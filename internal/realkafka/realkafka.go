package realkafka

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// EnvBrokers is the environment variable that names a real cluster's
// bootstrap brokers, comma separated.
const EnvBrokers = "LOYALTY_BRIDGE_TEST_BROKERS"

// Seeds returns the brokers listed in EnvBrokers, blanks dropped, or nil when
// it is unset or blank: then the caller uses kfake.
func Seeds() []string {
	var seeds []string
	for _, s := range strings.Split(os.Getenv(EnvBrokers), ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

// Brokers returns Seeds, or skips tb when EnvBrokers names no broker: for
// tests that mean something only against a real cluster.
func Brokers(tb testing.TB) []string {
	tb.Helper()
	seeds := Seeds()
	if len(seeds) == 0 {
		tb.Skipf("no real Kafka cluster: set %s (scripts/kafka start prints it)", EnvBrokers)
	}
	return seeds
}

// Name returns a topic or group name for tb that no other test, and no
// earlier run against the same cluster, uses: what, then tb's name made safe
// for Kafka (letters, digits, '.', '_', '-'), then 8 random hex digits.
// Kafka limits names to 249 characters; a long test name is cut.
func Name(tb testing.TB, what string) string {
	tb.Helper()
	var b strings.Builder
	b.WriteString(what)
	b.WriteByte('-')
	for _, r := range tb.Name() {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > 200 {
		name = name[:200]
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	return name + "-" + hex.EncodeToString(suffix[:])
}
