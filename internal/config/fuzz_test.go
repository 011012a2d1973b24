package config

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzSources feeds arbitrary environment values and YAML files through
// Define, ParseWithFile and Validate: never a panic, and a refused input is
// an error naming a flag, a variable or the file, never echoing a secret.
func FuzzSources(f *testing.F) {
	f.Add("32", "group: g\nmax-in-flight: 8\n")
	f.Add("-1", "ordering: [1, 2]\n")
	f.Add("x", "unknown-key: 1\n")
	f.Add("1h", "drain-timeout: forever\n")
	f.Add("", "{")
	f.Add("SCRAM-SHA-512", "kafka-sasl-mechanism: PLAIN\nkafka-sasl-username: u\n")
	f.Fuzz(func(t *testing.T, value, file string) {
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
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c, b := Define(fs)
		err := b.ParseWithFile([]string{"--config", yml}, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, "config")
		if err == nil {
			err = c.Validate()
		}
		if err == nil {
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
