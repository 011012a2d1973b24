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
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// saslCluster is a cluster that takes SCRAM-SHA-256 without TLS, with the
// input and reply topics of a test.
type saslCluster struct {
	brokers    []string
	user, pass string
	topics     codec.Topics
	group      string
}

// The operator commands reach a secured cluster and registry with the same
// settings and variables as run: SASL to Kafka, basic auth to the
// registry. (They once took only --brokers and --schema-registry-url.)
// On kfake, and on Apache Kafka's SASL_PLAINTEXT listener when
// LOYALTY_BRIDGE_TEST_KAFKA_SECURE names one.
func TestOperatorCommandsReachASecuredCluster(t *testing.T) {
	t.Run("kfake", func(t *testing.T) {
		c := testkit.StartKafka(t, testkit.KafkaOptions{Topics: []testkit.TopicSet{{Partitions: 1, Names: codec.DefaultTopics().All()}},
			Fake: []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "ops", "ops-pass")}})
		testOperatorCommandsReachASecuredCluster(t, saslCluster{brokers: c.Brokers, user: "ops", pass: "ops-pass",
			topics: codec.DefaultTopics(), group: "loyalty-bridge"})
	})
	t.Run("Apache Kafka", func(t *testing.T) {
		s := realkafka.SecureCluster(t)
		sc := saslCluster{brokers: s.SASLPlaintext, user: s.Users["SCRAM-SHA-256"].User, pass: s.Users["SCRAM-SHA-256"].Password,
			topics: codec.Topics{Purchase: realkafka.Name(t, "purchase"), RefundRedemption: realkafka.Name(t, "refund"),
				MemberOnboarding: realkafka.Name(t, "onboard")}, group: realkafka.Name(t, "group")}
		realkafka.DeleteAtEnd(t, s.Plaintext, nil, sc.group)
		realkafka.SeedTopics(t, s.Plaintext, 1, sc.topics.All()...)
		testOperatorCommandsReachASecuredCluster(t, sc)
	})
}

func testOperatorCommandsReachASecuredCluster(t *testing.T, c saslCluster) {
	reg := testkit.StartRegistry(t, testkit.RegistryOptions{Fake: []srfake.Option{srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("reg:reg-pass")))}})
	secured := map[string]string{
		"LOYALTY_BRIDGE_BROKERS":                  strings.Join(c.brokers, ","),
		"LOYALTY_BRIDGE_KAFKA_SASL_MECHANISM":     "SCRAM-SHA-256",
		"LOYALTY_BRIDGE_KAFKA_SASL_USERNAME":      c.user,
		"LOYALTY_BRIDGE_KAFKA_SASL_PASSWORD":      c.pass,
		"LOYALTY_BRIDGE_SCHEMA_REGISTRY_URL":      reg.URL,
		"LOYALTY_BRIDGE_SCHEMA_REGISTRY_USERNAME": "reg",
		"LOYALTY_BRIDGE_SCHEMA_REGISTRY_PASSWORD": "reg-pass",
		"LOYALTY_BRIDGE_PURCHASE_TOPIC":           c.topics.Purchase,
		"LOYALTY_BRIDGE_REFUND_REDEMPTION_TOPIC":  c.topics.RefundRedemption,
		"LOYALTY_BRIDGE_MEMBER_ONBOARDING_TOPIC":  c.topics.MemberOnboarding,
		"LOYALTY_BRIDGE_GROUP":                    c.group,
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
			[]string{"produce", "--topic", c.topics.Purchase}, ""},
		{"", []string{"tail", "--topic", c.topics.Purchase, "--from-beginning", "--max", "1"}, "S-1"},
		{"", []string{"offsets", "--topic", c.topics.Purchase}, c.topics.Purchase},
	}
	// A group for offsets to show, committed as an admin would.
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...),
		kgo.SASL(scram.Auth{User: c.user, Pass: c.pass}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	var to kadm.Offsets
	to.AddOffset(c.topics.Purchase, 0, 0, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(adminCl).CommitOffsets(ctx, c.group, to); err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		code, out, errs := cli(secured, s.stdin, s.args...)
		if code != 0 || !strings.Contains(out, s.want) {
			t.Fatalf("%s: exit %d\n%s%s", s.args, code, out, errs)
		}
		for _, secret := range []string{c.pass, "reg-pass"} {
			if strings.Contains(out+errs, secret) {
				t.Fatalf("%s printed a password", s.args)
			}
		}
	}
	// Without the credentials the same commands are refused.
	open := map[string]string{"LOYALTY_BRIDGE_BROKERS": secured["LOYALTY_BRIDGE_BROKERS"], "LOYALTY_BRIDGE_SCHEMA_REGISTRY_URL": reg.URL}
	if code, out, errs := cli(open, "", "schemas", "check"); code == 0 {
		t.Fatalf("schemas check without registry credentials succeeded:\n%s%s", out, errs)
	}
}
