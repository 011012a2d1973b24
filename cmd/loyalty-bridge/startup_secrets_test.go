package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// startupCLI runs the command line with only envs for an environment and
// returns the exit code, stdout and stderr.
func startupCLI(t *testing.T, envs map[string]string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := envs[k]; return v, ok }
	code := run(ctx, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, lookup: lookup}, args)
	return code, out.String(), errb.String()
}

// A password put into a URL setting (the issue's
// http://svc:s3cret@registry.corp:8081) stops every command that takes the
// setting before it connects, naming the setting, and reaches neither
// stderr nor --print-config's stdout.
func TestPasswordInURLNeverPrinted(t *testing.T) {
	const canary = "s3cret-canary"
	creds := map[string]string{"LOYALTY_BRIDGE_API_CLIENT_ID": "cid", "LOYALTY_BRIDGE_API_CLIENT_SECRET": "cs",
		"LOYALTY_BRIDGE_API_USERNAME": "u", "LOYALTY_BRIDGE_API_PASSWORD": "p", "LOYALTY_BRIDGE_ALLOW_INSECURE": "true"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for k, v := range creds {
			m[k] = v
		}
		return m
	}
	registry := with("LOYALTY_BRIDGE_SCHEMA_REGISTRY_URL", "http://svc:"+canary+"@registry.corp:8081")
	// url.Parse refuses this one, and its error would quote it whole.
	unparsed := with("LOYALTY_BRIDGE_SCHEMA_REGISTRY_URL", "http://svc:"+canary+"/x@registry.corp:8081")
	partner := with("LOYALTY_BRIDGE_API_BASE_URL", "https://shop:"+canary+"@loyalty.partner.example")
	idp := with("LOYALTY_BRIDGE_API_AUTH_URL", "https://shop:"+canary+"@id.partner.example")
	for _, tc := range []struct {
		envs map[string]string
		args []string
		flag string
	}{
		{registry, []string{"run"}, "--schema-registry-url"},
		{registry, []string{"run", "--print-config"}, "--schema-registry-url"},
		{unparsed, []string{"run", "--print-config"}, "--schema-registry-url"},
		{creds, []string{"run", "--print-config", "--schema-registry-url", "http://svc:" + canary + "@registry.corp:8081"}, "--schema-registry-url"},
		{registry, []string{"replay", "--topic", "loyalty.purchase", "--since", "1h"}, "--schema-registry-url"},
		{registry, []string{"reconcile", "--since", "1h"}, "--schema-registry-url"},
		{registry, []string{"schemas", "check"}, "--schema-registry-url"},
		{unparsed, []string{"schemas", "check"}, "--schema-registry-url"},
		{registry, []string{"produce", "--topic", "loyalty.purchase"}, "--schema-registry-url"},
		{registry, []string{"tail", "--topic", "loyalty.purchase"}, "--schema-registry-url"},
		{partner, []string{"run"}, "--api-base-url"},
		{partner, []string{"run", "--print-config"}, "--api-base-url"},
		{partner, []string{"api", "lookup", "--loyalty-id", "L-1", "--transaction-id", "T-1"}, "--base-url"},
		{idp, []string{"run"}, "--auth-url"},
		{idp, []string{"reconcile", "--since", "1h"}, "--auth-url"},
		{idp, []string{"api", "lookup", "--loyalty-id", "L-1", "--transaction-id", "T-1"}, "--auth-url"},
	} {
		code, out, errs := startupCLI(t, tc.envs, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.flag) {
			t.Errorf("%v: exit %d, want 2 naming %s; stderr:\n%s", tc.args, code, tc.flag, errs)
		}
		if strings.Contains(out+errs, "canary") {
			t.Errorf("%v printed the password:\n%s%s", tc.args, out, errs)
		}
	}
}

// A secret given as a flag works, but every user of the machine can read
// it in the process list: each command warns once per such flag, naming
// it and the variables to use instead, never the value. run logs it
// before it connects; api prints it beside its answer.
func TestSecretFlagsWarned(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := stubPartnerAPI(t, map[string]map[string]any{})
	defer srv.Close()
	code, out, errs := startupCLI(t, map[string]string{"LOYALTY_BRIDGE_API_BASE_URL": srv.URL, "LOYALTY_BRIDGE_API_CLIENT_ID": "cid",
		"LOYALTY_BRIDGE_API_USERNAME": "user"},
		"api", "token", "--client-secret", stubAPISecret, "--password", stubAPIPassword)
	if code != 0 {
		t.Fatalf("api token: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"--client-secret is given on the command line", "LOYALTY_BRIDGE_API_CLIENT_SECRET_FILE",
		"--password is given on the command line", "LOYALTY_BRIDGE_API_PASSWORD_FILE"} {
		if strings.Count(errs, want) != 1 {
			t.Errorf("api: want %q once in stderr:\n%s", want, errs)
		}
	}
	if strings.Contains(out+errs, stubAPISecret) || strings.Contains(out+errs, stubAPIPassword) {
		t.Fatalf("api printed a secret:\n%s%s", out, errs)
	}

	const canary = "s3cret-canary"
	// Nothing listens on the brokers' port: run warns, then fails to
	// connect.
	code, out, errs = startupCLI(t, map[string]string{"LOYALTY_BRIDGE_API_CLIENT_ID": "cid", "LOYALTY_BRIDGE_API_USERNAME": "u",
		"LOYALTY_BRIDGE_API_PASSWORD_FILE": "/nonexistent"},
		"run", "--brokers", "127.0.0.1:1", "--startup-timeout", "1s", "--kafka-sasl-mechanism", "SCRAM-SHA-256",
		"--kafka-sasl-username", "u", "--kafka-sasl-password", canary, "--client-secret", canary, "--password", canary,
		"--schema-registry-username", "r", "--schema-registry-password", canary)
	if code == 0 {
		t.Fatalf("run: exit 0\n%s%s", out, errs)
	}
	for _, name := range []string{"kafka-sasl-password", "client-secret", "password", "schema-registry-password"} {
		if want := "--" + name + " is given on the command line"; strings.Count(errs, want) != 1 {
			t.Errorf("run: want %q once in stderr:\n%s", want, errs)
		}
	}
	if strings.Contains(out+errs, "canary") {
		t.Fatalf("run printed a secret:\n%s%s", out, errs)
	}
}

// Brokers off loopback without TLS: run logs, before it connects, that
// member data crosses the network unencrypted, naming the brokers;
// --allow-insecure silences it.
func TestPlaintextKafkaWarnedAtStartup(t *testing.T) {
	envs := map[string]string{"LOYALTY_BRIDGE_API_CLIENT_ID": "cid", "LOYALTY_BRIDGE_API_CLIENT_SECRET": "cs",
		"LOYALTY_BRIDGE_API_USERNAME": "u", "LOYALTY_BRIDGE_API_PASSWORD": "p"}
	// 192.0.2.1 (TEST-NET-1) answers nobody: run warns, then gives up
	// after --startup-timeout.
	args := []string{"run", "--brokers", "192.0.2.1:9092", "--startup-timeout", "1s"}
	const want = "--brokers 192.0.2.1:9092: Kafka without TLS: member data"
	code, out, errs := startupCLI(t, envs, args...)
	if code == 0 || strings.Count(errs, want) != 1 {
		t.Fatalf("exit %d, want the warning %q once:\n%s%s", code, want, out, errs)
	}
	code, out, errs = startupCLI(t, envs, append(args, "--allow-insecure")...)
	if code == 0 || strings.Contains(errs, "Kafka without TLS") {
		t.Fatalf("with --allow-insecure: exit %d\n%s%s", code, out, errs)
	}
}

// run --print-config shows the configuration without the partner's
// credentials (exit 0, the YAML on stdout, what run still needs on
// stderr); a setting with a wrong value is still a usage error.
func TestPrintConfigNeedsNoCredentials(t *testing.T) {
	code, out, errs := startupCLI(t, nil, "run", "--print-config")
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, errs)
	}
	if !strings.Contains(out, "client-id:") || !strings.Contains(out, "max-in-flight:") {
		t.Errorf("no configuration printed:\n%s", out)
	}
	if !strings.Contains(errs, "--client-id") {
		t.Errorf("stderr does not say run still needs --client-id:\n%s", errs)
	}
	if code, _, errs := startupCLI(t, nil, "run", "--print-config", "--max-in-flight", "0"); code != 2 || !strings.Contains(errs, "--max-in-flight") {
		t.Errorf("a wrong value: exit %d, want 2 naming --max-in-flight; stderr:\n%s", code, errs)
	}
}
