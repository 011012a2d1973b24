package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/devstack"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/service"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

var topics = codec.DefaultTopics()

// sent is one input event and what the model expects of it.
type sent struct {
	id, topic, member string
	write             bool // accrual or redemption: exactly one effect
}

type replica struct {
	id   string
	stop context.CancelFunc
	done chan error
	svc  *service.Service
}

func TestChaos(t *testing.T) { runChaos(t, false) }

// TestChaosExactlyOnce runs the same chaos with --delivery exactly-once:
// a read_committed reader of the reply topics sees no duplicate.
func TestChaosExactlyOnce(t *testing.T) { runChaos(t, true) }

func runChaos(t *testing.T, exactlyOnce bool) {
	n := envInt("CHAOS_EVENTS", 600)
	kills := envInt("CHAOS_KILLS", 4)
	members := 100
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	st, err := devstack.Start(ctx, devstack.Options{DataDir: t.TempDir(), KafkaAddr: "127.0.0.1:0", RegistryAddr: "127.0.0.1:0",
		SimAddr: "127.0.0.1:0", Partitions: 6, Topics: topics.All(), Sim: sim.Options{Members: members, Seed: 7}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := chaosConfig(t, st)
	if exactlyOnce {
		cfg.Delivery = "exactly-once"
	}

	// Kafka faults: 2% of produce and fetch requests get their connection
	// dropped.
	rng := rand.New(rand.NewPCG(1, 2))
	var rngMu sync.Mutex
	chance := func(p float64) bool { rngMu.Lock(); defer rngMu.Unlock(); return rng.Float64() < p }
	var kafkaDrops atomic.Int64
	for _, key := range []kmsg.Key{kmsg.Produce, kmsg.Fetch} {
		st.Cluster.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
			st.Cluster.KeepControl()
			if chance(0.02) {
				kafkaDrops.Add(1)
				return nil, errors.New("chaos: connection dropped"), true
			}
			return nil, nil, false
		})
	}
	// API faults, and tokens that live three seconds.
	business := []string{sim.EndpointAccrual, sim.EndpointRedemption, sim.EndpointLookup, sim.EndpointLink, sim.EndpointUnlink}
	st.Sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{500: 0.04, 503: 0.05, 429: 0.02}, RetryAfter: 100 * time.Millisecond,
		ApplyThen500Rate: 0.02, HangRate: 0.005, Endpoints: business})
	st.Sim.SetTokenTTLs(3*time.Second, 10*time.Second)

	// A codec for producing and reading, from the registry the first
	// replica registers into.
	var (
		mu       sync.Mutex
		replicas []*replica
	)
	ids := []string{"bridge-a", "bridge-b", "bridge-c"}
	start := func(id string) *replica {
		c := *cfg
		c.TransactionalID = id // a restarted member keeps its id and fences its dead self
		svc, err := service.New(ctx, &c, service.Options{Logger: zap.NewNop(),
			ClientOpts: []kgo.Opt{kgo.HeartbeatInterval(200 * time.Millisecond)}})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		r := &replica{stop: stop, done: make(chan error, 1), svc: svc, id: id}
		go func() { r.done <- svc.Run(rctx) }()
		mu.Lock()
		replicas = append(replicas, r)
		mu.Unlock()
		return r
	}
	halt := func(r *replica) {
		r.stop()
		if err := <-r.done; err != nil {
			t.Errorf("replica: %v", err)
		}
		r.svc.Close()
	}
	first := start(ids[0])
	cd := first.svc.Codec
	for _, id := range ids[1:] {
		start(id)
	}

	// The traffic: purchases, redemptions, and link/unlink commands,
	// keyed by member, produced while replicas come and go.
	var (
		all   []sent
		model = map[string]bool{} // member → linked after its commands
	)
	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...), kgo.RecordRetries(100))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var produced sync.WaitGroup
	produced.Go(func() {
		for i := range n {
			m := sim.MemberID(1 + i%members)
			var ev events.Event
			s := sent{id: fmt.Sprintf("c-%06d", i), member: m}
			switch i % 10 {
			case 0, 1, 2, 3, 4, 5:
				ev, s.topic, s.write = &events.PurchaseCompleted{TransactionID: s.id, LoyaltyID: m, TransactionDate: time.Now(),
					Amount: 10_000, Currency: "VND"}, topics.Purchase, true
			case 6, 7:
				ev, s.topic, s.write = &events.RedemptionRequested{TransactionID: s.id, LoyaltyID: m, TransactionDate: time.Now(),
					Amount: 1, UsedPoint: 1}, topics.RefundRedemption, true
			case 8:
				ev, s.topic = &events.MemberLinkRequested{TransactionID: s.id, LoyaltyID: m, PartnerMemberID: "p-" + m}, topics.MemberOnboarding
				model[m] = true
			default:
				ev, s.topic = &events.MemberUnlinkRequested{TransactionID: s.id, LoyaltyID: m, PartnerMemberID: "p-" + m}, topics.MemberOnboarding
				model[m] = false
			}
			v, err := cd.Encode(s.topic, ev)
			if err != nil {
				t.Error(err)
				return
			}
			all = append(all, s)
			cl.Produce(ctx, &kgo.Record{Topic: s.topic, Key: []byte(m), Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
			if i%50 == 49 {
				time.Sleep(20 * time.Millisecond) // pacing the traffic over the kill schedule, not synchronising
			}
		}
		if err := cl.Flush(ctx); err != nil {
			t.Error(err)
		}
	})

	// The kill schedule: every second, the oldest replica is killed (a
	// graceful stop half the time, a stop with no drain otherwise) and a
	// new one starts.
	for k := range kills {
		time.Sleep(time.Second) // the schedule itself, not synchronisation
		mu.Lock()
		victim := replicas[0]
		replicas = replicas[1:]
		mu.Unlock()
		if k%2 == 1 {
			st.Sim.RevokeTokens()
		}
		halt(victim)
		start(victim.id)
	}
	produced.Wait()

	// Faults off, then wait for every transaction's output.
	out := follow(ctx, t, st.Brokers, cd)
	deadline := time.Now().Add(3 * time.Minute)
	for missing(out, all) > 0 {
		if time.Now().After(deadline) {
			st.Sim.SetFaults(sim.Faults{})
		}
		if time.Now().After(deadline.Add(2 * time.Minute)) {
			t.Fatalf("%d of %d transactions without output", missing(out, all), len(all))
		}
		time.Sleep(50 * time.Millisecond) // polling the outputs
	}
	st.Sim.SetFaults(sim.Faults{})
	mu.Lock()
	for _, r := range replicas {
		halt(r)
	}
	mu.Unlock()

	// Invariants.
	var (
		noOutput, multiEffect, appliedNot1, errorsN, dups int
		linkWrong, linkChecked                            int
		categories                                        = map[string]int{}
	)
	out.mu.Lock()
	for _, s := range all {
		rs := out.byID[s.id]
		if len(rs) == 0 {
			noOutput++
			continue
		}
		dups += len(rs) - 1
		ok := false
		for _, r := range rs {
			if r.result != nil {
				ok = true
			} else {
				categories[string(r.err.Category)]++
			}
		}
		if !ok {
			errorsN++
		}
		if s.write {
			eff := st.Sim.Effects(s.id)
			if eff > 1 {
				multiEffect++
			}
			if ok && eff != 1 {
				appliedNot1++
			}
		}
	}
	out.mu.Unlock()
	allLinkOK := map[string]bool{}
	for _, s := range all {
		if s.topic == topics.MemberOnboarding {
			if _, seen := allLinkOK[s.member]; !seen {
				allLinkOK[s.member] = true
			}
			if rs := out.get(s.id); len(rs) == 0 || rs[0].result == nil {
				allLinkOK[s.member] = false
			}
		}
	}
	for m, want := range model {
		if !allLinkOK[m] {
			continue // a command of this member ended in an error event: the model does not apply
		}
		linkChecked++
		if got, _ := st.Sim.Member(m); got.Linked != want {
			linkWrong++
		}
	}
	lag := groupLag(ctx, t, st.Brokers, cfg.Group)

	drops := kafkaDrops.Load()
	table := fmt.Sprintf(`
chaos (%s): %d events, %d kills, %d Kafka connections dropped, simulator 500/503/429 %d/%d/%d
  invariant                                          value   ok
  transactions without a terminal output             %5d   %v
  accrual/redemption with more than one effect       %5d   %v
  answered APPLIED/ALREADY_APPLIED, effects != 1     %5d   %v
  members whose link state differs from the model    %5d   %v (of %d checked)
  input lag after the run (committed vs end)         %5d   %v
  transactions ending in an error event              %5d   %v
  duplicate reply records (read_committed)           %5d   %v
`, cfg.Delivery, len(all), kills, drops, st.Sim.Calls(sim.EndpointAccrual, 500)+st.Sim.Calls(sim.EndpointRedemption, 500),
		st.Sim.Calls(sim.EndpointAccrual, 503)+st.Sim.Calls(sim.EndpointRedemption, 503),
		st.Sim.Calls(sim.EndpointAccrual, 429)+st.Sim.Calls(sim.EndpointRedemption, 429),
		noOutput, noOutput == 0, multiEffect, multiEffect == 0, appliedNot1, appliedNot1 == 0,
		linkWrong, linkWrong == 0, linkChecked, lag, lag == 0, errorsN, true, dups, !exactlyOnce || dups == 0)
	if len(categories) > 0 {
		table += fmt.Sprintf("  error events by category: %v\n", categories)
	}
	t.Log(table)
	if exactlyOnce {
		t.Logf("exactly-once: %d duplicate reply records for read_committed readers", dups)
	}
	if noOutput > 0 || multiEffect > 0 || appliedNot1 > 0 || linkWrong > 0 || lag != 0 || (exactlyOnce && dups > 0) {
		t.Fatal("an invariant does not hold (table above)")
	}
}

func chaosConfig(t *testing.T, st *devstack.Stack) *config.Config {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, b := config.Define(fs)
	if err := b.Parse(nil, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	cfg.Brokers, cfg.RegistryURL, cfg.RegisterSchemas = strings.Join(st.Brokers, ","), st.RegistryURL, true
	cfg.APIBaseURL, cfg.ClientID, cfg.ClientSecret = st.SimURL, sim.DefaultClientID, sim.DefaultClientSecret
	cfg.Username, cfg.Password = sim.DefaultUsername, sim.DefaultPassword
	cfg.PartnerKey, cfg.PartnerKeyID = st.PartnerKeyPath, st.PartnerKeyID
	cfg.MetricsAddr = ""
	cfg.MaxInFlight = 64
	cfg.RecordAttempts, cfg.RecordBackoff = 20, 20*time.Millisecond
	cfg.APITimeout, cfg.APIMaxAttempts = time.Second, 3
	cfg.BreakerOpen = 300 * time.Millisecond
	cfg.DrainTimeout = 500 * time.Millisecond
	cfg.CommitInterval = 200 * time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

type reply struct {
	result *events.LoyaltyResult
	err    *events.LoyaltyError
}

type outputs struct {
	mu   sync.Mutex
	byID map[string][]reply
}

func (o *outputs) get(id string) []reply {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byID[id]
}

func missing(o *outputs, all []sent) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, s := range all {
		if len(o.byID[s.id]) == 0 {
			n++
		}
	}
	return n
}

func follow(ctx context.Context, t *testing.T, brokers []string, cd *codec.Codec) *outputs {
	t.Helper()
	var replies []string
	for _, in := range topics.Inputs() {
		replies = append(replies, topics.ResultTopic(in), topics.ErrorTopic(in))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(replies...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	o := &outputs{byID: map[string][]reply{}}
	fctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for fctx.Err() == nil {
			cl.PollFetches(fctx).EachRecord(func(r *kgo.Record) {
				v, err := cd.Decode(fctx, r.Topic, r.Value)
				if err != nil {
					return
				}
				var rp reply
				switch x := v.(type) {
				case *events.LoyaltyResult:
					rp.result = x
				case *events.LoyaltyError:
					rp.err = x
				}
				o.mu.Lock()
				o.byID[string(r.Key)] = append(o.byID[string(r.Key)], rp)
				o.mu.Unlock()
			})
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait(); cl.Close() })
	return o
}

// groupLag is the input topics' end offsets minus the group's commits.
func groupLag(ctx context.Context, t *testing.T, brokers []string, group string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lags, err := kadm.NewClient(cl).Lag(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, gl := range lags {
		if err := gl.Error(); err != nil {
			t.Fatal(err)
		}
		for topic, parts := range gl.Lag {
			if !strings.HasSuffix(topic, ".result") && !strings.HasSuffix(topic, ".error") {
				for _, l := range parts {
					total += l.Lag
				}
			}
		}
	}
	return total
}
