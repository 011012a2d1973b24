package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
)

// The operator commands reach a secured cluster and registry with the same
// settings and variables as run: SASL to Kafka, basic auth to the
// registry. (They once took only --brokers and --schema-registry-url.)
func TestOperatorCommandsReachASecuredCluster(t *testing.T) {
	c, err := kfake.NewCluster(kfake.SeedTopics(1, codec.DefaultTopics().All()...),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "ops", "ops-pass"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := srfake.New(srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("reg:reg-pass"))))
	defer reg.Close()
	secured := map[string]string{
		"LOYALTY_BRIDGE_BROKERS":                  strings.Join(c.ListenAddrs(), ","),
		"LOYALTY_BRIDGE_KAFKA_SASL_MECHANISM":     "SCRAM-SHA-256",
		"LOYALTY_BRIDGE_KAFKA_SASL_USERNAME":      "ops",
		"LOYALTY_BRIDGE_KAFKA_SASL_PASSWORD":      "ops-pass",
		"LOYALTY_BRIDGE_SCHEMA_REGISTRY_URL":      reg.URL(),
		"LOYALTY_BRIDGE_SCHEMA_REGISTRY_USERNAME": "reg",
		"LOYALTY_BRIDGE_SCHEMA_REGISTRY_PASSWORD": "reg-pass",
	}
	cli := func(envs map[string]string, stdin string, args ...string) (int, string, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out, errb bytes.Buffer
		lookup := func(k string) (string, bool) { v, ok := envs[k]; return v, ok }
		code := run(ctx, env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, lookup: lookup}, args)
		return code, out.String(), errb.String()
	}
	steps := []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"schemas", "register"}, "registered"},
		{"", []string{"schemas", "check"}, ""},
		{`{"transactionId":"S-1","loyaltyId":"L-1","transactionDate":"2026-11-20T10:30:00Z","amount":1000}` + "\n",
			[]string{"produce", "--topic", "loyalty.purchase"}, ""},
		{"", []string{"tail", "--topic", "loyalty.purchase", "--from-beginning", "--max", "1"}, "S-1"},
		{"", []string{"offsets", "--topic", "loyalty.purchase"}, "loyalty.purchase"},
	}
	// A group for offsets to show, committed as an admin would.
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.SASL(scram.Auth{User: "ops", Pass: "ops-pass"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	var to kadm.Offsets
	to.AddOffset("loyalty.purchase", 0, 0, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(adminCl).CommitOffsets(ctx, "loyalty-bridge", to); err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		code, out, errs := cli(secured, s.stdin, s.args...)
		if code != 0 || !strings.Contains(out, s.want) {
			t.Fatalf("%s: exit %d\n%s%s", s.args, code, out, errs)
		}
		for _, secret := range []string{"ops-pass", "reg-pass"} {
			if strings.Contains(out+errs, secret) {
				t.Fatalf("%s printed a password", s.args)
			}
		}
	}
	// Without the credentials the same commands are refused.
	open := map[string]string{"LOYALTY_BRIDGE_BROKERS": secured["LOYALTY_BRIDGE_BROKERS"], "LOYALTY_BRIDGE_SCHEMA_REGISTRY_URL": reg.URL()}
	if code, out, errs := cli(open, "", "schemas", "check"); code == 0 {
		t.Fatalf("schemas check without registry credentials succeeded:\n%s%s", out, errs)
	}
}
