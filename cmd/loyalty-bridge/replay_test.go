package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/devstack"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/service"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

type replayStack struct {
	st   *devstack.Stack
	envs map[string]string
}

func newReplayStack(t *testing.T) *replayStack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := devstack.Start(ctx, devstack.Options{DataDir: t.TempDir(), KafkaAddr: "127.0.0.1:0", RegistryAddr: "127.0.0.1:0",
		SimAddr: "127.0.0.1:0", Partitions: 2, Topics: codec.DefaultTopics().All(), Sim: sim.Options{Members: 20}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return &replayStack{st: st, envs: map[string]string{
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

func (s *replayStack) cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := s.envs[k]; return v, ok }
	code := run(ctx, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, lookup: lookup}, args)
	return code, out.String(), errb.String()
}

// live runs the bridge as `run` would, with mod applied to its config.
func (s *replayStack) live(t *testing.T, mod func(*config.Config)) (stop func()) {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, b := config.Define(fs)
	if err := b.Parse(nil, func(k string) (string, bool) { v, ok := s.envs[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	cfg.RecordBackoff = time.Millisecond
	if mod != nil {
		mod(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(context.Background(), cfg, service.Options{Logger: zap.NewNop(),
		ClientOpts: []kgo.Opt{kgo.HeartbeatInterval(100 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("live bridge: %v", err)
		}
		svc.Close()
	}
	t.Cleanup(stop)
	return stop
}

func (s *replayStack) produce(t *testing.T, cd *codec.Codec, ids ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.st.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i, id := range ids {
		ev := &events.PurchaseCompleted{TransactionID: id, LoyaltyID: sim.MemberID(1 + i%20), TransactionDate: time.Now(), Amount: 5000, Currency: "VND"}
		v, err := cd.Encode(codec.DefaultPurchaseTopic, ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: codec.DefaultPurchaseTopic, Key: []byte(ev.LoyaltyID), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// countReplies counts reply records on topic per key, reading to the end.
func (s *replayStack) countReplies(t *testing.T, topic string, want int) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.st.Brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]int{}
	n := 0
	deadline := time.Now().Add(time.Minute)
	for n < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Key)]++; n++ })
		cancel()
	}
	if n < want {
		t.Fatalf("%s: %d replies, want %d", topic, n, want)
	}
	return got
}

// A window of purchases that failed under an outage (some applied before
// the answer was lost) is replayed from the error topic after recovery:
// every one ends with a result and exactly one effect.
func TestReplayFromErrorsAfterOutage(t *testing.T) {
	s := newReplayStack(t)
	stop := s.live(t, func(c *config.Config) { c.RecordAttempts, c.APIMaxAttempts, c.BreakerFailures = 1, 1, 1000 })
	cd := s.codec(t)
	var applied, lost []string
	for i := range 6 {
		applied = append(applied, fmt.Sprintf("ap-%d", i))
		lost = append(lost, fmt.Sprintf("lost-%d", i))
	}
	s.st.Sim.SetFaults(sim.Faults{ApplyThen500Rate: 1, Endpoints: []string{sim.EndpointAccrual}})
	s.produce(t, cd, applied...)
	s.countReplies(t, codec.DefaultPurchaseTopic+".error", len(applied))
	s.st.Sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, Endpoints: []string{sim.EndpointAccrual}})
	s.produce(t, cd, lost...)
	s.countReplies(t, codec.DefaultPurchaseTopic+".error", len(applied)+len(lost))
	stop()
	s.st.Sim.SetFaults(sim.Faults{})

	code, out, errs := s.cli(t, "replay", "--from-errors", "loyalty.purchase.error", "--category", "TRANSIENT_EXHAUSTED")
	if code != 0 {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "ALREADY_APPLIED") || !strings.Contains(out, "APPLIED") {
		t.Errorf("summary:\n%s", out)
	}
	results := s.countReplies(t, codec.DefaultPurchaseTopic+".result", len(applied)+len(lost))
	for _, id := range append(applied, lost...) {
		if s.st.Sim.Effects(id) != 1 || results[id] != 1 {
			t.Errorf("%s: %d effects, %d results", id, s.st.Sim.Effects(id), results[id])
		}
	}
	// Replaying the same errors again changes nothing.
	calls := s.st.Sim.TotalCalls(sim.EndpointAccrual)
	if code, out, errs := s.cli(t, "replay", "--from-errors", "loyalty.purchase.error"); code != 0 {
		t.Fatalf("second replay: exit %d\n%s\n%s", code, out, errs)
	}
	if s.st.Sim.TotalCalls(sim.EndpointAccrual) != calls {
		t.Error("a second replay called accrual again")
	}
}

func (s *replayStack) codec(t *testing.T) *codec.Codec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cd, err := codecFor(ctx, s.st.RegistryURL)
	if err != nil {
		t.Fatal(err)
	}
	return cd
}

// A replay of a range that fully succeeded causes no second effect; a dry
// run calls nothing at all; offsets shows and resets the group.
func TestReplayRangeDryRunAndOffsets(t *testing.T) {
	s := newReplayStack(t)
	stop := s.live(t, nil)
	cd := s.codec(t)
	var ids []string
	for i := range 10 {
		ids = append(ids, fmt.Sprintf("ok-%d", i))
	}
	s.produce(t, cd, ids...)
	s.countReplies(t, codec.DefaultPurchaseTopic+".result", len(ids))

	if code, out, errs := s.cli(t, "offsets", "reset", "--topic", "loyalty.purchase", "--to-earliest"); code == 0 || !strings.Contains(errs, "live members") {
		t.Fatalf("reset with a live member: exit %d\n%s%s", code, out, errs)
	}
	ledger := s.st.Sim.Ledger()
	before := map[string]int{}
	for _, ep := range sim.AllEndpoints {
		before[ep] = s.st.Sim.TotalCalls(ep)
	}
	code, out, errs := s.cli(t, "replay", "--topic", "loyalty.purchase", "--since", "1h", "--dry-run")
	if code != 0 || strings.Count(out, "would call") < len(ids) {
		t.Fatalf("dry run: exit %d\n%s\n%s", code, out, errs)
	}
	for _, ep := range sim.AllEndpoints {
		if got := s.st.Sim.TotalCalls(ep); got != before[ep] {
			t.Errorf("dry run called %s %d times", ep, got-before[ep])
		}
	}
	for p := range 2 {
		code, out, errs = s.cli(t, "replay", "--topic", "loyalty.purchase", "--partition", fmt.Sprint(p), "--from-offset", "0", "--rate", "1000")
		if code != 0 {
			t.Fatalf("range replay: exit %d\n%s\n%s", code, out, errs)
		}
	}
	for id, n := range s.st.Sim.Ledger() {
		if n != ledger[id] {
			t.Errorf("%s: %d effects after the replay, %d before", id, n, ledger[id])
		}
	}
	results := s.countReplies(t, codec.DefaultPurchaseTopic+".result", 2*len(ids))
	for _, id := range ids {
		if results[id] != 2 {
			t.Errorf("%s: %d results (want the original and the replayed one)", id, results[id])
		}
	}

	code, out, errs = s.cli(t, "offsets")
	if code != 0 || !strings.Contains(out, "loyalty.purchase") || !strings.Contains(out, "total (loyalty-bridge)") {
		t.Fatalf("offsets: exit %d\n%s%s", code, out, errs)
	}
	stop()
	code, out, errs = s.cli(t, "offsets", "reset", "--topic", "loyalty.purchase", "--to-earliest")
	if code != 0 || !strings.Contains(out, "2 partitions of loyalty.purchase reset") {
		t.Fatalf("reset: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, fmt.Sprintf("%10d", len(ids))) {
		t.Errorf("lag after reset to earliest should total %d:\n%s", len(ids), out)
	}
	if code, _, errs := s.cli(t, "replay", "--topic", "loyalty.purchase"); code != 2 || !strings.Contains(errs, "--from-offset or --since") {
		t.Errorf("replay without a range: exit %d %s", code, errs)
	}
}

func codecFor(ctx context.Context, registryURL string) (*codec.Codec, error) {
	cf := contractFlags{registryURL: registryURL}
	return cf.codec(ctx)
}
