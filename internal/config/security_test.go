package config

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
)

// Secrets in the clear off loopback are refused, naming the setting and
// --allow-insecure; on loopback (dev, tests) and with the flag they pass.
func TestPlaintextRefusedOffLoopback(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // "" accepted
	}{
		{"http API on loopback", []string{"--api-base-url", "http://127.0.0.1:8088"}, ""},
		{"http API on localhost", []string{"--api-base-url", "http://localhost:8088"}, ""},
		{"http API on ::1", []string{"--api-base-url", "http://[::1]:8088"}, ""},
		{"http API off loopback", []string{"--api-base-url", "http://loyalty.partner.example"}, "--api-base-url http://loyalty.partner.example"},
		{"http API allowed", []string{"--api-base-url", "http://loyalty.partner.example", "--allow-insecure"}, ""},
		{"https API", []string{"--api-base-url", "https://loyalty.partner.example"}, ""},
		{"http identity provider", []string{"--api-base-url", "https://loyalty.partner.example", "--auth-url", "http://id.partner.example"}, "--auth-url http://id.partner.example"},
		{"SASL PLAIN without TLS", []string{"--brokers", "kafka-1:9092,127.0.0.1:9092", "--kafka-sasl-mechanism", "plain",
			"--kafka-sasl-username", "u", "--kafka-sasl-password", "p"}, "PLAIN without --kafka-tls sends the password in the clear to kafka-1:9092;"},
		{"SASL PLAIN with TLS", []string{"--brokers", "kafka-1:9093", "--kafka-sasl-mechanism", "PLAIN", "--kafka-tls",
			"--kafka-sasl-username", "u", "--kafka-sasl-password", "p"}, ""},
		{"SASL PLAIN on loopback", []string{"--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-username", "u", "--kafka-sasl-password", "p"}, ""},
		{"SCRAM without TLS", []string{"--brokers", "kafka-1:9092", "--kafka-sasl-mechanism", "SCRAM-SHA-512",
			"--kafka-sasl-username", "u", "--kafka-sasl-password", "p"}, ""},
		{"registry basic auth over http", []string{"--schema-registry-url", "http://registry:8081", "--schema-registry-username", "u",
			"--schema-registry-password", "p"}, "--schema-registry-url http://registry:8081: basic auth over http"},
		{"registry over http without auth", []string{"--schema-registry-url", "http://registry:8081"}, ""},
		{"registry basic auth allowed", []string{"--schema-registry-url", "http://registry:8081", "--schema-registry-username", "u",
			"--schema-registry-password", "p", "--allow-insecure"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.args, creds)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatal("accepted")
			case tc.want != "" && (!strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--allow-insecure")):
				t.Fatalf("error does not name %q and --allow-insecure:\n%v", tc.want, err)
			}
		})
	}
	if _, err := parse(t, nil, map[string]string{"LOYALTY_BRIDGE_API_CLIENT_ID": "c", "LOYALTY_BRIDGE_API_CLIENT_SECRET": "s",
		"LOYALTY_BRIDGE_API_USERNAME": "u", "LOYALTY_BRIDGE_API_PASSWORD": "p", "LOYALTY_BRIDGE_API_BASE_URL": "http://sim:8088",
		"LOYALTY_BRIDGE_ALLOW_INSECURE": "true"}); err != nil {
		t.Fatalf("LOYALTY_BRIDGE_ALLOW_INSECURE not read: %v", err)
	}
}

// run names the connection settings --api-*, the api command does not;
// both read one LOYALTY_BRIDGE_API_* variable per setting. (The api
// command once read LOYALTY_BRIDGE_API_DATE_FORMAT and run
// LOYALTY_BRIDGE_API_TRANSACTION_DATE_FORMAT.)
func TestAPISettingsShareVariablesAcrossCommands(t *testing.T) {
	run := Vars()
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	b := flagenv.New(fs, APIEnvPrefix)
	var a API
	a.Define(b, "")
	var p Partner
	p.Define(b, EnvPrefix)
	p.DefineLegacy(b)
	b.All()
	apiVars := b.Vars()
	runByVar := map[string]string{}
	for name, v := range run {
		runByVar[v.Name] = name
	}
	for name, v := range apiVars {
		runName, ok := runByVar[v.Name]
		if !ok {
			t.Errorf("api --%s reads %s, which run does not read", name, v.Name)
			continue
		}
		if strings.TrimPrefix(runName, "api-") != name {
			t.Errorf("%s is api --%s but run --%s", v.Name, name, runName)
		}
		if run[runName].Secret != v.Secret {
			t.Errorf("%s: secret in one command only", v.Name)
		}
	}
	if got := apiVars["transaction-date-format"].Name; got != "LOYALTY_BRIDGE_API_TRANSACTION_DATE_FORMAT" {
		t.Errorf("api --transaction-date-format reads %q", got)
	}
	if got := apiVars["partner-not-found-codes"].Name; got != "LOYALTY_BRIDGE_PARTNER_NOT_FOUND_CODES" {
		t.Errorf("api --partner-not-found-codes reads %q", got)
	}
}

// A bad enumeration is reported by Validate with the others, naming its
// flag, and the typed value keeps its default.
func TestChoicesParsedOnce(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, b := Define(fs)
	if err := b.Parse([]string{"--compression", "brotli", "--delivery", "twice", "--transaction-date-format", "julian"},
		func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	err := c.Validate()
	for _, want := range []string{`--compression "brotli"`, `--delivery "twice"`, `--transaction-date-format "julian"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %s in %v", want, err)
		}
	}
	if c.Kafka.Compression != DefaultCompression {
		t.Errorf("compression %q after a bad value", c.Kafka.Compression)
	}
	if got := fs.Lookup("compression").Value.String(); got != "brotli" {
		t.Errorf("--print-config would show %q", got)
	}
}

// Kafka without TLS to a broker off loopback carries member data in the
// clear: a start-up warning naming those brokers, not a refusal (SCRAM or
// no SASL sends no password in the clear, and plaintext in-cluster Kafka
// is common). TLS, loopback or --allow-insecure: no warning.
func TestPlaintextKafkaWarned(t *testing.T) {
	scram := []string{"--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-username", "u", "--kafka-sasl-password", "p"}
	for _, tc := range []struct {
		name string
		args []string
		want string // "" no warning
	}{
		{"no SASL off loopback", []string{"--brokers", "kafka-1:9092,127.0.0.1:9092,kafka-2:9092"}, "--brokers kafka-1:9092, kafka-2:9092: Kafka without TLS"},
		{"SCRAM off loopback", append([]string{"--brokers", "10.0.0.7:9092"}, scram...), "--brokers 10.0.0.7:9092: Kafka without TLS"},
		{"loopback", []string{"--brokers", "127.0.0.1:9092,localhost:9093,[::1]:9094"}, ""},
		{"the default", nil, ""},
		{"TLS", append([]string{"--brokers", "kafka-1:9093", "--kafka-tls"}, scram...), ""},
		{"TLS by its CA file", []string{"--brokers", "kafka-1:9093", "--kafka-tls-ca-file", "ca.pem"}, ""},
		{"allowed", []string{"--brokers", "kafka-1:9092", "--allow-insecure"}, ""},
		{"PLAIN allowed", []string{"--brokers", "kafka-1:9092", "--allow-insecure", "--kafka-sasl-mechanism", "PLAIN",
			"--kafka-sasl-username", "u", "--kafka-sasl-password", "p"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c, b := Define(fs)
			if err := b.Parse(tc.args, func(k string) (string, bool) { v, ok := creds[k]; return v, ok }); err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("refused: %v", err)
			}
			_ = c.Validate() // a second Validate warns no more
			var got []string
			for _, w := range b.Warnings() {
				if strings.Contains(w, "Kafka without TLS") {
					got = append(got, w)
				}
			}
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("warnings %q", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tc.want) || !strings.Contains(got[0], "personal data") ||
				!strings.Contains(got[0], "--allow-insecure") || !strings.Contains(got[0], "--kafka-tls") {
				t.Fatalf("warnings %q, want one with %q", got, tc.want)
			}
		})
	}
}
