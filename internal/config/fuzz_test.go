package config

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzSources feeds arbitrary environment values and YAML files through
// Define, ParseWithFile and Validate: never a panic, and a refused input is
// an error naming a flag, a variable or the file, never echoing a secret.
// which picks the variable that gets value, among every variable the run
// command reads (a few are always set to it too).
func FuzzSources(f *testing.F) {
	f.Add(uint8(0), "32", "group: g\nmax-in-flight: 8\n")
	f.Add(uint8(1), "-1", "ordering: [1, 2]\n")
	f.Add(uint8(2), "x", "unknown-key: 1\n")
	f.Add(uint8(3), "1h", "drain-timeout: forever\n")
	f.Add(uint8(4), "", "{")
	f.Add(uint8(5), "SCRAM-SHA-512", "kafka-sasl-mechanism: PLAIN\nkafka-sasl-username: u\n")
	f.Add(uint8(6), "exactly-once", "delivery: exactly-once\ntransaction-timeout: 1ms\n")
	f.Add(uint8(7), "true", "kafka-tls: yes\nkafka-tls-ca-file: /nonexistent\n")
	f.Add(uint8(8), "1e309", "breaker-ratio: .nan\nmax-buffered: 99999999999999999999\n")
	f.Add(uint8(9), "http://[::1", "api-base-url: \"ftp://x\"\nschema-registry-url: ''\n")
	f.Add(uint8(10), "0x10", "? [a]\n: b\n")
	f.Add(uint8(11), "\x00\xff", "a: &x [*x]\n")
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	_, b := Define(fs)
	var names []string
	for _, v := range b.Vars() {
		names = append(names, v.Name)
	}
	slices.Sort(names)
	f.Fuzz(func(t *testing.T, which uint8, value, file string) {
		dir := t.TempDir()
		yml := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(yml, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		const secret = "fuzz-secret-canary"
		env := map[string]string{
			"LOYALTY_BRIDGE_MAX_IN_FLIGHT":           value,
			"LOYALTY_BRIDGE_ORDERING":                value,
			"LOYALTY_BRIDGE_DRAIN_TIMEOUT":           value,
			"LOYALTY_BRIDGE_KAFKA_SASL_MECHANISM":    value,
			"LOYALTY_BRIDGE_API_CLIENT_ID":           "c",
			"LOYALTY_BRIDGE_API_CLIENT_SECRET":       secret,
			"LOYALTY_BRIDGE_API_USERNAME":            "u",
			"LOYALTY_BRIDGE_API_PASSWORD":            secret,
			"LOYALTY_BRIDGE_KAFKA_SASL_PASSWORD":     secret,
			"LOYALTY_BRIDGE_SCHEMA_REGISTRY_URL":     value,
			"LOYALTY_BRIDGE_TRANSACTION_DATE_FORMAT": value,
		}
		if v := names[int(which)%len(names)]; !strings.Contains(v, "SECRET") && !strings.Contains(v, "PASSWORD") {
			env[v] = value
		}
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c, b := Define(fs)
		err := b.ParseWithFile([]string{"--config", yml}, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, "config")
		if err == nil {
			err = c.Validate()
		}
		if err == nil {
			if _, kerr := c.Kafka.Build(); kerr != nil && !strings.Contains(kerr.Error(), "--") {
				t.Fatalf("Kafka options refused without naming a flag: %v", kerr)
			}
			return
		}
		msg := err.Error()
		if strings.Contains(msg, secret) {
			t.Fatalf("error echoes a secret: %s", msg)
		}
		if !strings.Contains(msg, "--") && !strings.Contains(msg, "LOYALTY_BRIDGE_") && !strings.Contains(msg, yml) && !strings.Contains(msg, "flag") {
			t.Fatalf("error names no flag, variable or file: %s", msg)
		}
	})
}
