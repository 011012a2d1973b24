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
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// replayStack is kfake, srfake and the simulator (devstack, 2 partitions
// per topic) with the environment the CLI reads to reach them.
type replayStack struct {
	st   *devstack.Stack
	envs map[string]string
	cd   *codec.Codec
	adm  *kadm.Client
	tick time.Duration // progress lines' schedule (0: 2 s)
}

func newReplayStack(t *testing.T) *replayStack {
	t.Helper()
	return newReplayStackWith(t, sim.Options{})
}

// newReplayStackWith is newReplayStack with the simulator's options (20
// members unless so set).
func newReplayStackWith(t *testing.T, so sim.Options) *replayStack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if so.Members == 0 {
		so.Members = 20
	}
	st, err := devstack.Start(ctx, devstack.Options{DataDir: t.TempDir(), KafkaAddr: "127.0.0.1:0", RegistryAddr: "127.0.0.1:0",
		SimAddr: "127.0.0.1:0", Partitions: 2, Topics: codec.DefaultTopics().All(), Sim: so})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	rc, err := sr.NewClient(sr.URLs(st.RegistryURL))
	if err != nil {
		t.Fatal(err)
	}
	cd, err := codec.New(ctx, codec.Options{Registry: rc, Register: true})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &replayStack{st: st, cd: cd, adm: kadm.NewClient(cl), envs: map[string]string{
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
}

const simAdminToken = "reconcile-admin-secret"

// newReconcileStack is newReplayStack with the simulator's admin API on
// (mismatches are planted through it) and the partner key the bridge
// signs redemptions with.
func newReconcileStack(t *testing.T) *replayStack {
	t.Helper()
	s := newReplayStackWith(t, sim.Options{AdminToken: simAdminToken})
	s.envs["LOYALTY_BRIDGE_API_PARTNER_KEY"] = s.st.PartnerKeyPath
	s.envs["LOYALTY_BRIDGE_API_PARTNER_KEY_ID"] = s.st.PartnerKeyID
	return s
}

func (s *replayStack) lookup(k string) (string, bool) { v, ok := s.envs[k]; return v, ok }

// cli runs loyalty-bridge with args and returns its exit code, stdout and
// stderr.
func (s *replayStack) cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb syncBuffer // the logger and the progress both write stderr
	code := run(ctx, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, lookup: s.lookup, tick: s.tick}, args)
	return code, out.String(), errb.String()
}
