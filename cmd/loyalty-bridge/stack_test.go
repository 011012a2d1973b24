package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/devstack"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// replayStack is a Kafka cluster, srfake and the simulator (devstack, 2
// partitions per topic) with the environment the CLI reads to reach them:
// its topics and its group among it.
type replayStack struct {
	st     *devstack.Stack
	envs   map[string]string
	cd     *codec.Codec
	adm    *kadm.Client
	topics codec.Topics
	group  string
	tick   time.Duration // progress lines' schedule (0: 2 s)
	kafka  []kgo.Opt     // added to replay's Kafka clients
}

// newReplayStack is a stack on kfake with the default topics and group (the
// tests of run and of the exit codes: kfake only so far).
func newReplayStack(t *testing.T) *replayStack {
	t.Helper()
	return startStack(t, sim.Options{}, nil, codec.DefaultTopics(), "")
}

// newOpsStack is a stack for the operator commands' tests (replay,
// reconcile, offsets) on the real cluster realkafka.Seeds names, when it
// names one, or on kfake: either way with topics and a group of the test's
// own, deleted at its end on a real cluster.
func newOpsStack(t *testing.T, so sim.Options) *replayStack {
	t.Helper()
	seeds := realkafka.Seeds()
	topics := codec.Topics{Purchase: realkafka.Name(t, "purchase"), RefundRedemption: realkafka.Name(t, "refund"),
		MemberOnboarding: realkafka.Name(t, "onboard")}
	group := realkafka.Name(t, "group")
	if len(seeds) > 0 {
		// Before the stack's own cleanups, so that it runs after them:
		// after the live bridges have left the group.
		// The ledger's and the parked refunds' topics, named after the
		// group, too: a broker's log cleaner is busier with each compacted
		// ledger left behind.
		realkafka.DeleteAtEnd(t, seeds, append(topics.All(), group+".ledger", group+".parked"), group)
	}
	return startStack(t, so, seeds, topics, group)
}

// startStack starts devstack on the cluster at seeds (nil: kfake) with
// topics and the simulator's options (20 members unless so set), and
// configures the CLI for them and group ("": the default group and topics).
func startStack(t *testing.T, so sim.Options, seeds []string, topics codec.Topics, group string) *replayStack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if so.Members == 0 {
		so.Members = 20
	}
	st, err := devstack.Start(ctx, devstack.Options{DataDir: t.TempDir(), KafkaAddr: "127.0.0.1:0", Brokers: seeds, RegistryAddr: "127.0.0.1:0",
		SimAddr: "127.0.0.1:0", Partitions: 2, Topics: topics.All(), Sim: so})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	rc, err := sr.NewClient(sr.URLs(st.RegistryURL))
	if err != nil {
		t.Fatal(err)
	}
	cd, err := codec.New(ctx, codec.Options{Registry: rc, Register: true, Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	s := &replayStack{st: st, cd: cd, adm: kadm.NewClient(cl), topics: topics, group: group, envs: map[string]string{
		"LOYALTY_BRIDGE_BROKERS":             strings.Join(st.Brokers, ","),
		"LOYALTY_BRIDGE_SCHEMA_REGISTRY_URL": st.RegistryURL,
		"LOYALTY_BRIDGE_REGISTER_SCHEMAS":    "true",
		"LOYALTY_BRIDGE_API_BASE_URL":        st.SimURL,
		"LOYALTY_BRIDGE_API_CLIENT_ID":       sim.DefaultClientID,
		"LOYALTY_BRIDGE_API_CLIENT_SECRET":   sim.DefaultClientSecret,
		"LOYALTY_BRIDGE_API_USERNAME":        sim.DefaultUsername,
		"LOYALTY_BRIDGE_API_PASSWORD":        sim.DefaultPassword,
		"LOYALTY_BRIDGE_METRICS_ADDR":        "",
		"LOYALTY_BRIDGE_LOG_LEVEL":           "warn",
	}}
	if group != "" { // else the settings keep their defaults, as the topics do
		s.envs["LOYALTY_BRIDGE_GROUP"] = group
		s.envs["LOYALTY_BRIDGE_PURCHASE_TOPIC"] = topics.Purchase
		s.envs["LOYALTY_BRIDGE_REFUND_REDEMPTION_TOPIC"] = topics.RefundRedemption
		s.envs["LOYALTY_BRIDGE_MEMBER_ONBOARDING_TOPIC"] = topics.MemberOnboarding
	}
	return s
}

const simAdminToken = "reconcile-admin-secret"

// newReconcileStack is newOpsStack with the simulator's admin API on
// (mismatches are planted through it) and the partner key the bridge
// signs redemptions with.
func newReconcileStack(t *testing.T) *replayStack {
	t.Helper()
	s := newOpsStack(t, sim.Options{AdminToken: simAdminToken})
	s.envs["LOYALTY_BRIDGE_API_PARTNER_KEY"] = s.st.PartnerKeyPath
	s.envs["LOYALTY_BRIDGE_API_PARTNER_KEY_ID"] = s.st.PartnerKeyID
	return s
}

// createTopic makes a topic of one partition besides the stack's, deleted
// at the end on a real cluster.
func (s *replayStack) createTopic(t *testing.T, name string) {
	t.Helper()
	if s.st.Cluster == nil {
		realkafka.SeedTopics(t, s.st.Brokers, 1, name)
		return
	}
	if _, err := s.adm.CreateTopic(context.Background(), 1, 1, nil, name); err != nil {
		t.Fatal(err)
	}
}

func (s *replayStack) lookup(k string) (string, bool) { v, ok := s.envs[k]; return v, ok }

// cli runs loyalty-bridge with args and returns its exit code, stdout and
// stderr.
func (s *replayStack) cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb testkit.SyncBuffer // the logger and the progress both write stderr
	code := run(ctx, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, lookup: s.lookup, tick: s.tick, kafka: s.kafka}, args)
	return code, out.String(), errb.String()
}
