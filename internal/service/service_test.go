package service

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/devstack"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// testStack is the embedded stack of one test, and the names it gives the
// bridge. The Kafka behind it is kfake, or the real cluster that
// LOYALTY_BRIDGE_TEST_BROKERS names (realkafka.Seeds): the same tests with
// the same assertions run on both. A real cluster is shared by every test
// package of a run and outlives it, so the topics and the group are named
// for the test (realkafka.Name) and deleted at its end; tests read them from
// here, or from the config stackConfig builds, never codec's defaults. On
// kfake the names are the same kind, so both runs take one path.
type testStack struct {
	*devstack.Stack
	Topics codec.Topics
	Group  string
}

func newStack(t *testing.T) *testStack {
	t.Helper()
	return newStackWith(t, 4, sim.Options{Members: 50})
}

func newStackWith(t *testing.T, partitions int32, so sim.Options) *testStack {
	t.Helper()
	seeds := realkafka.Seeds()
	ts := &testStack{Group: realkafka.Name(t, "group"), Topics: codec.Topics{
		Purchase: realkafka.Name(t, "purchase"), RefundRedemption: realkafka.Name(t, "refund"), MemberOnboarding: realkafka.Name(t, "onboard")}}
	if len(seeds) > 0 {
		// Before the stack's own cleanup, so it runs after the service
		// has left the group.
		// The service's own topics too (the ledger's and the parked
		// refunds', named after the group): left behind, every suite's
		// compacted ledgers kept the broker's one log cleaner busy, and
		// the ledger's compaction test after them waited minutes.
		realkafka.DeleteAtEnd(t, seeds, append(ts.Topics.All(), ts.Group+".ledger", ts.Group+".parked"), ts.Group)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := devstack.Start(ctx, devstack.Options{DataDir: t.TempDir(), KafkaAddr: "127.0.0.1:0", Brokers: seeds, RegistryAddr: "127.0.0.1:0",
		SimAddr: "127.0.0.1:0", Partitions: partitions, Topics: ts.Topics.All(), Sim: so})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ts.Stack = s
	return ts
}

func stackConfig(t *testing.T, s *testStack, mod func(*config.Config)) *config.Config {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, b := config.Define(fs)
	env := map[string]string{
		"LOYALTY_BRIDGE_BROKERS":                 strings.Join(s.Brokers, ","),
		"LOYALTY_BRIDGE_GROUP":                   s.Group,
		"LOYALTY_BRIDGE_PURCHASE_TOPIC":          s.Topics.Purchase,
		"LOYALTY_BRIDGE_REFUND_REDEMPTION_TOPIC": s.Topics.RefundRedemption,
		"LOYALTY_BRIDGE_MEMBER_ONBOARDING_TOPIC": s.Topics.MemberOnboarding,
		"LOYALTY_BRIDGE_SCHEMA_REGISTRY_URL":     s.RegistryURL,
		"LOYALTY_BRIDGE_API_BASE_URL":            s.SimURL,
		"LOYALTY_BRIDGE_API_CLIENT_ID":           sim.DefaultClientID,
		"LOYALTY_BRIDGE_API_CLIENT_SECRET":       sim.DefaultClientSecret,
		"LOYALTY_BRIDGE_API_USERNAME":            sim.DefaultUsername,
		"LOYALTY_BRIDGE_API_PASSWORD":            sim.DefaultPassword,
		"LOYALTY_BRIDGE_API_PARTNER_KEY":         s.PartnerKeyPath,
		"LOYALTY_BRIDGE_API_PARTNER_KEY_ID":      s.PartnerKeyID,
		"LOYALTY_BRIDGE_REGISTER_SCHEMAS":        "true",
		"LOYALTY_BRIDGE_METRICS_ADDR":            "",
		"LOYALTY_BRIDGE_LAG_INTERVAL":            "200ms",
		"LOYALTY_BRIDGE_STARTUP_TIMEOUT":         "20s",
		// A refund of an unknown purchase waits for it (parked) this long.
		"LOYALTY_BRIDGE_ORIGINAL_WAIT": "1s",
		"LOYALTY_BRIDGE_PARK_BACKOFF":  "200ms",
		// Shorter than fastGroup's 6 s session: a partner write starts
		// only while the session outlasts its attempt (pipeline.LeaseGate).
		"LOYALTY_BRIDGE_API_TIMEOUT": "3s",
	}
	if err := b.Parse(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if mod != nil {
		mod(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func fastGroup() []kgo.Opt {
	return []kgo.Opt{kgo.HeartbeatInterval(100 * time.Millisecond), kgo.SessionTimeout(6 * time.Second)}
}

// waitFor polls ok every 20 ms: its conditions ask brokers and HTTP
// endpoints, which a tighter loop would load for nothing.
func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	testkit.EventuallyTrue(t, d, what, ok, testkit.Every(20*time.Millisecond))
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// running is a service under test, run in the background.
type running struct {
	*Service
	base string // http:// and the metrics address
	stop context.CancelFunc
	done chan error
	// exited is closed when Run has returned: Close may not run beside
	// Run (Run takes the metrics listener over when it starts).
	exited chan struct{}
}

// runService builds the service on cfg, with a metrics listener and quick
// group settings, and runs it until halt (or the test's end).
// eventProducer returns a function that writes ev, encoded by svc's codec,
// to topic with key, and fails the test if the write fails.
func eventProducer(ctx context.Context, t *testing.T, brokers []string, svc *running) func(topic, key string, ev events.Event) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return func(topic, key string, ev events.Event) {
		t.Helper()
		v, err := svc.Codec.Encode(topic, ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func runService(ctx context.Context, t *testing.T, cfg *config.Config) *running {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(ctx, cfg, Options{Logger: testLogger(t), MetricsListener: ln, ClientOpts: fastGroup()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	r := &running{Service: svc, base: "http://" + svc.MetricsAddr(), stop: stop, done: make(chan error, 1), exited: make(chan struct{})}
	go func() {
		defer close(r.exited)
		r.done <- svc.Run(runCtx)
	}()
	t.Cleanup(func() {
		stop()
		select {
		case <-r.exited:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30 s of its cancel")
		}
		svc.Close()
	})
	return r
}

// halt cancels Run and fails the test unless it returns nil promptly.
func (r *running) halt(t *testing.T) {
	t.Helper()
	r.stop()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// The whole service over the embedded stack: readiness flips once the group
// is joined, every purchase gets its result, the counters on /metrics agree
// with the outputs, and cancelling Run shuts down cleanly.
func TestServiceEndToEnd(t *testing.T) {
	s := newStack(t)
	cfg := stackConfig(t, s, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc := runService(ctx, t, cfg)
	base := svc.base
	waitFor(t, "/healthz", 10*time.Second, func() bool { c, _ := get(base + "/healthz"); return c == http.StatusOK })
	waitFor(t, "/readyz", 20*time.Second, func() bool {
		c, body := get(base + "/readyz")
		if c != http.StatusOK {
			t.Log(body)
		}
		return c == http.StatusOK
	})

	const n = 40
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range n {
		ev := &events.PurchaseCompleted{TransactionID: fmt.Sprintf("svc-%d", i), LoyaltyID: sim.MemberID(1 + i%10),
			TransactionDate: time.Now(), Amount: 10_000, Currency: "VND"}
		v, err := svc.Codec.Encode(s.Topics.Purchase, ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: s.Topics.Purchase, Key: []byte(ev.LoyaltyID), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// One undecodable record too.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: s.Topics.Purchase, Value: []byte("junk")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	completed := func(outcome string) float64 {
		return value(svc.Metrics.RecordsCompleted.WithLabelValues(s.Topics.Purchase, outcome))
	}
	waitFor(t, "results", 30*time.Second, func() bool { return completed("APPLIED") == n })
	if got := s.Sim.TotalCalls(sim.EndpointAccrual); got != n {
		t.Fatalf("%d accrual calls, want %d", got, n)
	}
	waitFor(t, "decode error", 10*time.Second, func() bool {
		return value(svc.Metrics.ErrorEvents.WithLabelValues(s.Topics.Purchase, string(events.CategoryDecode))) == 1
	})
	if got := value(svc.Metrics.RecordsConsumed.WithLabelValues(s.Topics.Purchase)); got != n+1 {
		t.Fatalf("records consumed %v, want %d", got, n+1)
	}
	_, body := get(base + "/metrics")
	for _, want := range []string{"loyalty_bridge_records_completed_total", "loyalty_bridge_api_call_duration_seconds_bucket",
		"loyalty_bridge_kafka_", "loyalty_bridge_token_refreshes_total"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The outputs agree with the counters: n results on the result topic.
	rc, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...), kgo.ConsumeTopics(s.Topics.ResultTopic(s.Topics.Purchase)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	seen := map[string]bool{}
	waitFor(t, "result records", 20*time.Second, func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer pcancel()
		rc.PollFetches(pctx).EachRecord(func(r *kgo.Record) { seen[string(r.Key)] = true })
		return len(seen) == n
	})

	// The lag of every input partition, reported by its owner (this
	// member owns them all), reaches zero.
	waitFor(t, "lag gauges", 20*time.Second, func() bool {
		mfs, err := svc.Metrics.Registry.Gather()
		if err != nil {
			return false
		}
		for _, mf := range mfs {
			if mf.GetName() != "loyalty_bridge_consumer_lag" {
				continue
			}
			if len(mf.GetMetric()) != (3+1)*4 { // the input topics and the parked topic
				return false
			}
			for _, m := range mf.GetMetric() {
				if m.GetGauge().GetValue() != 0 {
					return false
				}
			}
			return true
		}
		return false
	})
	svc.halt(t)
}

// Start-up failures name their cause and come back promptly.
func TestConnectErrors(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		mod  func(*config.Config)
		want string
	}{
		"wrong password": {func(c *config.Config) { c.API.Password = "wrong" }, "credentials"},
		"missing topic":  {func(c *config.Config) { c.Topics.Purchase = "no.such.topic" }, "no.such.topic"},
		"no registry":    {func(c *config.Config) { c.Registry.URL = "http://127.0.0.1:1" }, "schema registry"},
		"unreadable key": {func(c *config.Config) { c.API.PartnerKey = "/nonexistent/key.pem" }, "--partner-key"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := stackConfig(t, s, tc.mod)
			// Each case fails at once at its own step; the bound is for
			// the steps before it, which on a loaded real broker took
			// longer than 5 s (the ledger topic's creation, CI run of
			// 2026-11-28), so that case named the ledger, not its cause.
			cfg.Ops.StartupTimeout = 30 * time.Second
			d, err := Connect(ctx, cfg, Options{Logger: zap.NewNop()})
			if err == nil {
				d.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
			if strings.Contains(err.Error(), sim.DefaultPassword) || strings.Contains(err.Error(), sim.DefaultClientSecret) {
				t.Fatalf("error leaks a secret: %v", err)
			}
		})
	}
}

func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Gauge != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetCounter().GetValue()
}

func testLogger(t *testing.T) *zap.Logger {
	if testing.Verbose() {
		l, _ := zap.NewDevelopment()
		return l
	}
	return zap.NewNop()
}

// /readyz reads the token cache's state and never starts a grant: after a
// password rotation, every probe used to make a failed login.
func TestReadinessStartsNoGrant(t *testing.T) {
	s := newStack(t)
	s.Sim.SetTokenTTLs(time.Second, 2*time.Second) // the cached token soon expires
	cfg := stackConfig(t, s, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc := runService(ctx, t, cfg)
	base := svc.base
	waitFor(t, "/readyz", 20*time.Second, func() bool { c, _ := get(base + "/readyz"); return c == http.StatusOK })

	probe := func(want, maxGrants int) {
		t.Helper()
		before := s.Sim.TotalCalls(sim.EndpointToken)
		for range 30 {
			if c, body := get(base + "/readyz"); c != want {
				t.Fatalf("/readyz %d, want %d: %s", c, want, body)
			}
		}
		if n := s.Sim.TotalCalls(sim.EndpointToken) - before; n > maxGrants {
			t.Fatalf("30 probes made %d grant calls", n)
		}
	}
	// An idle bridge whose token expired stays ready, and logs in for none
	// of the probes.
	waitFor(t, "the token to expire", 10*time.Second, func() bool { return !svc.Deps.Tokens.Cached().Valid(time.Now()) })
	probe(http.StatusOK, 0)

	// The password is refused now: a record's grant fails, readiness says
	// so, and the probes still log in for none.
	s.Sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{401: 1}, Endpoints: []string{sim.EndpointToken}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	v, err := svc.Codec.Encode(s.Topics.Purchase, &events.PurchaseCompleted{TransactionID: "rdy-1", LoyaltyID: sim.MemberID(1),
		TransactionDate: time.Now(), Amount: 1, Currency: "VND"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: s.Topics.Purchase, Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Once the record is held, only its hold probes ask for grants, as
	// the token cache's back-off allows (at most one while the readiness
	// probes run), never one per readiness probe.
	waitFor(t, "the record to be held", 20*time.Second, func() bool { return svc.Hold.Held() })
	if s.Sim.Calls(sim.EndpointToken, 401) == 0 {
		t.Fatal("no grant was refused")
	}
	probe(http.StatusServiceUnavailable, 1)
	svc.halt(t)
}

// setTopicConfigs sets configs of topic and returns once every broker
// describes them so. kfake applies an altered config before it answers; a
// real cluster answers once the controller has committed it, and each
// broker applies it a moment later, so a produce that needs it at once can
// be refused.
func setTopicConfigs(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, configs map[string]string) {
	t.Helper()
	adm := kadm.NewClient(cl)
	var alter []kadm.AlterConfig
	for k, v := range configs {
		alter = append(alter, kadm.AlterConfig{Name: k, Value: &v})
	}
	rs, err := adm.AlterTopicConfigs(ctx, alter, topic)
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		t.Fatalf("topic %s configs %v: %v", topic, configs, err)
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, res)
	applied := func() bool {
		brokers, err := adm.ListBrokers(ctx)
		if err != nil {
			return false
		}
		for _, b := range brokers {
			resp, err := req.RequestWith(ctx, cl.Broker(int(b.NodeID)))
			if err != nil || len(resp.Resources) != 1 {
				return false
			}
			n := 0
			for _, c := range resp.Resources[0].Configs {
				if want, ok := configs[c.Name]; ok && c.Value != nil && *c.Value == want {
					n++
				}
			}
			if n != len(configs) {
				return false
			}
		}
		return true
	}
	waitFor(t, fmt.Sprintf("every broker to apply %v to %s", configs, topic), 10*time.Second, applied)
}
