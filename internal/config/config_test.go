package config

import (
	"flag"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
)

func parse(t *testing.T, args []string, env map[string]string) (*Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, b := Define(fs)
	if err := b.ParseWithFile(args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, "config"); err != nil {
		return nil, err
	}
	return c, c.Validate()
}

var creds = map[string]string{
	"LOYALTY_BRIDGE_API_CLIENT_ID":     "cid",
	"LOYALTY_BRIDGE_API_CLIENT_SECRET": "s3cret",
	"LOYALTY_BRIDGE_API_USERNAME":      "u",
	"LOYALTY_BRIDGE_API_PASSWORD":      "p",
}

func TestDefaultsWithCredentialsAreValid(t *testing.T) {
	c, err := parse(t, nil, creds)
	if err != nil {
		t.Fatal(err)
	}
	if c.API.AuthURL != c.API.BaseURL || c.Group.Name != "loyalty-bridge" || c.Processing.Ordering != ordering.Key ||
		c.Processing.IncludeOriginal || c.Kafka.Compression != CompressNone {
		t.Fatalf("defaults: %+v", c)
	}
	if got := c.Topics.Build().Inputs(); got[0] != "loyalty.purchase" {
		t.Fatalf("topics %v", got)
	}
}

// Every problem at once, each naming its flag, and never a secret's value.
func TestValidateReportsEverything(t *testing.T) {
	env := map[string]string{"LOYALTY_BRIDGE_API_PASSWORD": "hunter2-canary"}
	_, err := parse(t, []string{"--brokers", " , ", "--ordering", "random", "--max-in-flight", "0",
		"--purchase-topic", "bad topic", "--member-onboarding-topic", "loyalty.refund-redemption",
		"--kafka-sasl-mechanism", "GSSAPI", "--log-format", "xml", "--grant", "magic", "--drain-timeout", "0s",
		"--kafka-tls-cert-file", "c.pem", "--unrecognised-hold", "0s"}, env)
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{"--brokers", "--ordering", "--max-in-flight", "--purchase-topic", "--member-onboarding-topic",
		"--kafka-sasl-mechanism", "--log-format", "--grant", "--drain-timeout", "--client-id", "--kafka-tls-key-file", "--unrecognised-hold"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not name %s:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "hunter2-canary") {
		t.Fatal("error carries the password")
	}
}

func TestSources(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yml := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(yml, []byte("group: from-yaml\nmax-in-flight: 64\nordering: partition\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LOYALTY_BRIDGE_API_CLIENT_ID": "cid", "LOYALTY_BRIDGE_API_CLIENT_SECRET_FILE": secret,
		"LOYALTY_BRIDGE_API_USERNAME": "u", "LOYALTY_BRIDGE_API_PASSWORD": "p", "LOYALTY_BRIDGE_MAX_IN_FLIGHT": "32",
		"LOYALTY_BRIDGE_API_BASE_URL": "https://loyalty.example"}
	c, err := parse(t, []string{"--config", yml, "--ordering", "unordered"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.API.ClientSecret != "from-file" || c.Group.Name != "from-yaml" || c.Processing.MaxInFlight != 32 ||
		c.Processing.Ordering != ordering.Unordered || c.API.BaseURL != "https://loyalty.example" || c.API.AuthURL != "https://loyalty.example" {
		t.Fatalf("precedence flag > env > file > default broken: %+v", c)
	}
}

func TestVarsShareTheAPICommandsNames(t *testing.T) {
	v := Vars()
	for flagName, want := range map[string]string{"client-id": "LOYALTY_BRIDGE_API_CLIENT_ID", "api-base-url": "LOYALTY_BRIDGE_API_BASE_URL",
		"password": "LOYALTY_BRIDGE_API_PASSWORD", "brokers": "LOYALTY_BRIDGE_BROKERS", "kafka-sasl-password": "LOYALTY_BRIDGE_KAFKA_SASL_PASSWORD"} {
		if v[flagName].Name != want {
			t.Errorf("--%s: env %q, want %q", flagName, v[flagName].Name, want)
		}
	}
	for _, s := range []string{"client-secret", "password", "kafka-sasl-password", "schema-registry-password"} {
		if !v[s].Secret {
			t.Errorf("--%s is not a secret (no _FILE variant)", s)
		}
	}
}

func TestKafkaOpts(t *testing.T) {
	c, err := parse(t, []string{"--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-username", "u",
		"--kafka-sasl-password", "p", "--kafka-tls-ca-file", filepath.Join(t.TempDir(), "missing.pem")}, creds)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kafka.Build(); err == nil || !strings.Contains(err.Error(), "--kafka-tls-ca-file") {
		t.Fatalf("missing CA file: %v", err)
	}
	c.Kafka.TLSCAFile = ""
	opts, err := c.Kafka.Build()
	if err != nil || len(opts) != 4 { // seeds, client id, compression, SASL; no TLS asked for
		t.Fatalf("opts %d err %v", len(opts), err)
	}
	c.Kafka.TLS = true
	if opts, err = c.Kafka.Build(); err != nil || len(opts) != 5 {
		t.Fatalf("with TLS: opts %d err %v", len(opts), err)
	}
}

// The shutdown bound includes the drain, so it must be the longer one.
func TestShutdownTimeoutExceedsDrain(t *testing.T) {
	_, err := parse(t, []string{"--drain-timeout", "30s", "--shutdown-timeout", "30s"}, creds)
	if err == nil || !strings.Contains(err.Error(), "--shutdown-timeout 30s: must exceed --drain-timeout") {
		t.Fatalf("got %v", err)
	}
	if _, err := parse(t, []string{"--drain-timeout", "30s", "--shutdown-timeout", "45s"}, creds); err != nil {
		t.Fatal(err)
	}
}

// --partner-apply-window is a duration above 0, 2s by default; the
// pipeline gets it, and a takeover wait below --api-timeout plus the
// window is refused naming the flags (0 is the default, which covers it).
func TestApplyWindowAndTakeoverWait(t *testing.T) {
	c, err := parse(t, nil, creds)
	if err != nil {
		t.Fatal(err)
	}
	o := c.Pipeline()
	if c.Partner.Build().ApplyWindow != partnerprofile.DefaultApplyWindow || o.ApplyWindow != partnerprofile.DefaultApplyWindow ||
		o.TakeoverWait != 0 || o.CallTimeout != loyalty.DefaultTimeout {
		t.Fatalf("defaults: window %v, pipeline %v %v %v", c.Partner.Build().ApplyWindow, o.ApplyWindow, o.TakeoverWait, o.CallTimeout)
	}
	for _, tc := range []struct {
		args []string
		err  string // "" for valid
	}{
		{[]string{"--partner-apply-window", "0s"}, "--partner-apply-window 0s: must be more than 0"},
		{[]string{"--partner-apply-window", "-1s"}, "--partner-apply-window -1s: must be more than 0"},
		{[]string{"--takeover-wait", "11s"}, "--takeover-wait 11s: below --api-timeout (10s) plus --partner-apply-window (2s), 12s"},
		{[]string{"--takeover-wait", "5s", "--api-timeout", "3s", "--partner-apply-window", "3s"}, "--takeover-wait 5s: below --api-timeout (3s) plus --partner-apply-window (3s)"},
		{[]string{"--takeover-wait", "-1s"}, "--takeover-wait -1s: must not be negative"},
		{[]string{"--takeover-wait", "12s"}, ""},
		{[]string{"--takeover-wait", "6s", "--api-timeout", "3s", "--partner-apply-window", "3s"}, ""},
	} {
		if c := parseExpecting(t, tc.args, tc.err); c != nil {
			if o := c.Pipeline(); o.TakeoverWait != c.Processing.TakeoverWait || o.ApplyWindow != c.Partner.Profile.ApplyWindow {
				t.Errorf("%v: pipeline %v %v", tc.args, o.TakeoverWait, o.ApplyWindow)
			}
		}
	}
}

// parseExpecting parses args with creds and checks the error against want
// ("" for none, else a part of it); it returns the configuration when it
// is valid as wanted, else nil.
func parseExpecting(t *testing.T, args []string, want string) *Config {
	t.Helper()
	c, err := parse(t, args, creds)
	switch {
	case want == "" && err != nil:
		t.Errorf("%v: %v", args, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%v: got %v, want %q", args, err, want)
	case want == "":
		return c
	}
	return nil
}

// --transaction-records and --transaction-time reach the pipeline in
// exactly-once mode; the first is refused above what the pipeline buffers
// or below zero, the second below 10ms.
func TestTransactionRecords(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		err   string // "" for valid
		round int    // the pipeline's RoundRecords when valid
		time  time.Duration
	}{
		{[]string{"--delivery", "exactly-once", "--transaction-records", "500"}, "", 500, pipeline.DefaultRoundTime},
		{[]string{"--delivery", "exactly-once"}, "", 0, pipeline.DefaultRoundTime},       // the pipeline's default
		{[]string{"--transaction-records", "500", "--transaction-time", "3s"}, "", 0, 0}, // at-least-once has no rounds
		{[]string{"--delivery", "exactly-once", "--transaction-time", "250ms"}, "", 0, 250 * time.Millisecond},
		{[]string{"--delivery", "exactly-once", "--transaction-records", "-1"}, "--transaction-records -1: must not be negative", 0, 0},
		{[]string{"--delivery", "exactly-once", "--max-buffered", "1000", "--transaction-records", "1001"}, "--transaction-records 1001: above --max-buffered (1000)", 0, 0},
		{[]string{"--delivery", "exactly-once", "--transaction-time", "9ms"}, "--transaction-time 9ms: must be at least 10ms", 0, 0},
	} {
		if c := parseExpecting(t, append([]string{"--transactional-id", "m-1"}, tc.args...), tc.err); c != nil {
			if o := c.Pipeline(); o.RoundRecords != tc.round || o.RoundTime != tc.time {
				t.Errorf("%v: RoundRecords %d, RoundTime %s; want %d, %s", tc.args, o.RoundRecords, o.RoundTime, tc.round, tc.time)
			}
		}
	}
}

// The pipeline handles as many records as it buffers (the partner calls
// among them are bounded by --max-in-flight), and one partition takes at
// most half the buffer unless --max-in-flight-per-partition asks more.
func TestProcessingBuild(t *testing.T) {
	for _, tc := range []struct {
		maxInFlight, perPartition, buffered, mib int
		handlingPerP, wantBuffered, bufferedPerP int
	}{
		{64, 0, 0, 64, 64, 65536, 32768},
		{64, 0, 1000, 64, 64, 1000, 500},
		{64, 300, 1000, 64, 64, 1000, 500}, // per partition capped at --max-in-flight
		{64, 16, 0, 1, 16, 1024, 512},
		{1000, 0, 0, 1, 1000, 4000, 2000},
	} {
		p := Processing{MaxInFlight: tc.maxInFlight, MaxInFlightPerPartition: tc.perPartition, MaxBuffered: tc.buffered, MaxBufferedMiB: tc.mib}
		o := p.Build()
		if o.MaxInFlight != tc.maxInFlight || o.MaxBuffered != tc.wantBuffered || o.MaxInFlightPerPartition != tc.handlingPerP ||
			o.MaxBufferedPerPartition != tc.bufferedPerP || o.MaxBufferedBytes != tc.mib<<20 {
			t.Errorf("%+v: handling %d/%d, buffered %d/%d, bytes %d", tc, o.MaxInFlight, o.MaxInFlightPerPartition, o.MaxBuffered, o.MaxBufferedPerPartition, o.MaxBufferedBytes)
		}
	}
}

// --breaker-failures takes off (or 0) to turn the breaker off, ratio
// included; --print-config writes it back as off.
func TestBreakerOff(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		off  bool
		err  string
	}{
		{nil, "", false, ""},
		{[]string{"--breaker-failures", "off"}, "", true, ""},
		{[]string{"--breaker-failures", "OFF"}, "", true, ""},
		{[]string{"--breaker-failures", "0"}, "", true, ""},
		{nil, "off", true, ""},
		{[]string{"--breaker-failures", "3"}, "", false, ""},
		{[]string{"--breaker-failures", "-1"}, "", false, "--breaker-failures -1: want a number of failures, or off (0)"},
		{[]string{"--breaker-failures", "never"}, "", false, "want a number or off"},
		{nil, "never", false, "LOYALTY_BRIDGE_BREAKER_FAILURES: invalid value for --breaker-failures"},
	} {
		env := map[string]string{}
		for k, v := range creds {
			env[k] = v
		}
		if tc.env != "" {
			env["LOYALTY_BRIDGE_BREAKER_FAILURES"] = tc.env
		}
		c, err := parse(t, tc.args, env)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v env %q: error %v, want %q", tc.args, tc.env, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v env %q: %v", tc.args, tc.env, err)
			continue
		}
		o := c.Processing.BuildBreaker()
		if o.Off != tc.off || c.Processing.BreakerOff() != tc.off {
			t.Errorf("%v env %q: breaker options %+v, want off %v", tc.args, tc.env, o, tc.off)
		}
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	_, b := Define(fs)
	if err := b.Parse([]string{"--breaker-failures", "0"}, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	if got := fs.Lookup("breaker-failures").Value.String(); got != "off" {
		t.Errorf("--breaker-failures 0 shows as %q, want off", got)
	}
	if !strings.Contains(fs.Lookup("breaker-failures").Usage, "off (or 0) turns the circuit breaker off") {
		t.Errorf("the help does not document off: %q", fs.Lookup("breaker-failures").Usage)
	}
}

// --refund-key-check: refuse by default, warn from the environment, and
// anything else refused naming the flag.
func TestRefundKeyCheck(t *testing.T) {
	c, err := parse(t, nil, creds)
	if err != nil || c.Processing.RefundKeyCheck != bridge.RefundKeyRefuse || c.Processing.BuildBridge().RefundKeyCheck != bridge.RefundKeyRefuse {
		t.Fatalf("default: %v, %q", err, c.Processing.RefundKeyCheck)
	}
	env := map[string]string{"LOYALTY_BRIDGE_REFUND_KEY_CHECK": "warn"}
	maps.Copy(env, creds)
	if c, err = parse(t, nil, env); err != nil || c.Processing.BuildBridge().RefundKeyCheck != bridge.RefundKeyWarn {
		t.Fatalf("warn: %v, %q", err, c.Processing.RefundKeyCheck)
	}
	if _, err = parse(t, []string{"--refund-key-check", "ignore"}, creds); err == nil || !strings.Contains(err.Error(), `--refund-key-check "ignore"`) {
		t.Fatalf("ignore: %v", err)
	}
}

// The defaults lack only what an operator must supply (the partner's
// address is defaulted, its credentials are not): OnlyMissing says so, and
// a wrong value beside them is not "only missing".
func TestOnlyMissingCredentials(t *testing.T) {
	_, err := parse(t, nil, nil)
	if err == nil || !OnlyMissing(err) {
		t.Fatalf("defaults without credentials: %v, want only missing settings", err)
	}
	for _, name := range []string{"--client-id", "--client-secret"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("the missing settings do not name %s: %v", name, err)
		}
	}
	if _, err := parse(t, []string{"--max-in-flight", "0"}, nil); err == nil || OnlyMissing(err) {
		t.Errorf("a bad value beside missing credentials: %v, want more than missing settings", err)
	}
	if _, err := parse(t, []string{"--kafka-sasl-mechanism", "SCRAM-SHA-256"}, creds); err == nil || !OnlyMissing(err) {
		t.Errorf("SASL without its user and password: %v, want only missing settings", err)
	}
	if OnlyMissing(nil) {
		t.Error("OnlyMissing(nil) is true")
	}
}

// --ledger-dir is made when missing and must be writable; its error names
// the flag. Read from its variable too.
func TestLedgerDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ledger", "store")
	c, err := parse(t, nil, map[string]string{"LOYALTY_BRIDGE_LEDGER_DIR": dir, "LOYALTY_BRIDGE_API_CLIENT_ID": "cid",
		"LOYALTY_BRIDGE_API_CLIENT_SECRET": "s", "LOYALTY_BRIDGE_API_USERNAME": "u", "LOYALTY_BRIDGE_API_PASSWORD": "p"})
	if err != nil || c.Ledger.Dir != dir {
		t.Fatalf("--ledger-dir from its variable: %q, %v", c.Ledger.Dir, err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("not made: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = parse(t, []string{"--ledger-dir", filepath.Join(file, "ledger")}, creds)
	if err == nil || !strings.Contains(err.Error(), "--ledger-dir") {
		t.Fatalf("a directory under a file: %v, want an error naming --ledger-dir", err)
	}
	if c, err := parse(t, []string{"--ledger=false", "--ledger-dir", filepath.Join(file, "ledger")}, creds); err != nil || c.Ledger.On {
		t.Fatalf("without the ledger, its directory is not checked: %v", err)
	}
}
