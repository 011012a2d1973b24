package bridge_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/circuit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/service"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// size scales the scenario tests: BRIDGE_TEST_SCALE=10 for a long local run.
func size(n int) int {
	if f, err := strconv.Atoi(os.Getenv("BRIDGE_TEST_SCALE")); err == nil && f > 0 {
		return n * f
	}
	return n
}

// instance is one running bridge (a group member).
type instance struct {
	svc  *service.Service
	stop context.CancelFunc
	done chan error
}

func (e *env) start(t *testing.T, mod func(*config.Config)) *instance {
	t.Helper()
	cfg := *e.cfg
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc, err := service.New(ctx, &cfg, service.Options{Logger: zap.NewNop(),
		ClientOpts: []kgo.Opt{kgo.HeartbeatInterval(100 * time.Millisecond), kgo.SessionTimeout(6 * time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	in := &instance{svc: svc, stop: stop, done: make(chan error, 1)}
	go func() { in.done <- svc.Run(runCtx) }()
	t.Cleanup(func() { in.halt(t) })
	return in
}

// halt cancels the instance and waits for Run; safe to call twice.
func (in *instance) halt(t *testing.T) {
	t.Helper()
	if in.done == nil {
		return
	}
	in.stop()
	select {
	case err := <-in.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Error("Run did not return after cancel")
	}
	in.done = nil
	in.svc.Close()
}

// outputs follows every reply topic and keeps decoded replies by
// transactionId, in arrival order.
type outputs struct {
	mu   sync.Mutex
	byID map[string][]reply
}

func (e *env) follow(t *testing.T) *outputs {
	t.Helper()
	var replies []string
	for _, in := range topics.Inputs() {
		replies = append(replies, topics.ResultTopic(in), topics.ErrorTopic(in))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.stack.Brokers...), kgo.ConsumeTopics(replies...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	o := &outputs{byID: map[string][]reply{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				v, err := e.deps.Codec.Decode(ctx, r.Topic, r.Value)
				if err != nil {
					return
				}
				rp := reply{rec: r}
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

func (o *outputs) get(id string) []reply {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]reply(nil), o.byID[id]...)
}

// waitAll waits until every id has at least one output.
func (o *outputs) waitAll(t *testing.T, ids []string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		missing := 0
		o.mu.Lock()
		for _, id := range ids {
			if len(o.byID[id]) == 0 {
				missing++
			}
		}
		o.mu.Unlock()
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d transactions have no output after %s", missing, len(ids), d)
		}
		time.Sleep(20 * time.Millisecond) // polling the collected outputs
	}
}

func (o *outputs) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, rs := range o.byID {
		n += len(rs)
	}
	return n
}

type producer struct {
	e  *env
	cl *kgo.Client
}

func (e *env) producer(t *testing.T) *producer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.stack.Brokers...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &producer{e: e, cl: cl}
}

func (p *producer) send(t *testing.T, topic, key string, ev events.Event) {
	t.Helper()
	v, err := p.e.deps.Codec.Encode(topic, ev)
	if err != nil {
		t.Fatal(err)
	}
	p.raw(t, topic, key, v)
}

func (p *producer) raw(t *testing.T, topic, key string, value []byte) {
	t.Helper()
	p.cl.Produce(context.Background(), &kgo.Record{Topic: topic, Key: []byte(key), Value: value}, func(_ *kgo.Record, err error) {
		if err != nil {
			t.Errorf("produce: %v", err)
		}
	})
}

func (p *producer) flush(t *testing.T) {
	t.Helper()
	if err := p.cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// One member's link → unlink → link → unlink … interleaved with thousands of
// other members' commands and purchases, and poison records between valid
// ones: the member's outcomes come in command order, its final state is
// right, every poison record is a DECODE error and its neighbours are fine.
func TestOrderAndPoison(t *testing.T) {
	others := size(1000)
	e := newEnv(t, envOpts{sim: sim.Options{Members: others + 10}})
	out := e.follow(t)
	p := e.producer(t)
	key := sim.MemberID(1)
	var mine, all []string
	for i := range others {
		if i%(others/10) == 0 {
			n := len(mine)
			var ev events.Event
			if n%2 == 0 {
				ev = &events.MemberLinkRequested{TransactionID: fmt.Sprintf("k-%02d", n), LoyaltyID: key, PartnerMemberID: "pm-1"}
			} else {
				ev = &events.MemberUnlinkRequested{TransactionID: fmt.Sprintf("k-%02d", n), LoyaltyID: key, PartnerMemberID: "pm-1"}
			}
			p.send(t, topics.MemberOnboarding, key, ev)
			mine = append(mine, ev.ID())
		}
		m := sim.MemberID(2 + i)
		link := &events.MemberLinkRequested{TransactionID: fmt.Sprintf("o-%d", i), LoyaltyID: m, PartnerMemberID: fmt.Sprintf("pm-%d", i+2)}
		p.send(t, topics.MemberOnboarding, m, link)
		buy := purchase(fmt.Sprintf("b-%d", i), 2+i, 1000)
		p.send(t, topics.Purchase, m, buy)
		all = append(all, link.TransactionID, buy.TransactionID)
		if i%97 == 0 {
			p.raw(t, topics.Purchase, m, []byte("poison"))
		}
	}
	p.flush(t)
	e.start(t, func(c *config.Config) { c.MaxInFlight = 64 })
	all = append(all, mine...)
	out.waitAll(t, all, 2*time.Minute)

	want := []string{"LINKED", "UNLINKED"}
	var prev int64 = -1
	for i, id := range mine {
		rs := out.get(id)
		if got := rs[0].outcome(); got != want[i%2] {
			t.Errorf("%s: %s, want %s", id, got, want[i%2])
		}
		if off := rs[0].result.Source.Offset; off <= prev {
			t.Errorf("%s answered out of order", id)
		} else {
			prev = off
		}
	}
	if m, _ := e.stack.Sim.Member(key); m.Linked != (len(mine)%2 == 1) {
		t.Errorf("member linked=%v after %d commands", m.Linked, len(mine))
	}
	for _, id := range all {
		if rs := out.get(id); rs[0].result == nil {
			t.Errorf("%s: %s", id, rs[0].outcome())
		}
	}
	// Poison: one DECODE error each.
	decodeErrors := 0
	out.mu.Lock()
	for _, rs := range out.byID {
		if rs[0].err != nil && rs[0].err.Category == events.CategoryDecode {
			decodeErrors++
		}
	}
	out.mu.Unlock()
	if want := (others + 96) / 97; decodeErrors != want {
		t.Errorf("%d DECODE errors, want %d", decodeErrors, want)
	}
}

// An API outage of seconds: the circuit opens, records wait instead of
// turning into errors, and everything completes after recovery.
func TestOutageHoldsRecords(t *testing.T) {
	e := newEnv(t, envOpts{mod: func(c *config.Config) {
		c.BreakerFailures, c.BreakerOpen, c.RecordAttempts, c.APIMaxAttempts = 3, 300*time.Millisecond, 5, 1
	}})
	out := e.follow(t)
	business := []string{sim.EndpointAccrual, sim.EndpointRedemption, sim.EndpointLookup, sim.EndpointLink, sim.EndpointUnlink,
		sim.EndpointOnboard, sim.EndpointCustomerInfo, sim.EndpointCustomerProfile}
	e.stack.Sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, Endpoints: business})
	in := e.start(t, nil)
	p := e.producer(t)
	n := size(200)
	var ids []string
	for i := range n {
		ev := purchase(fmt.Sprintf("out-%d", i), 1+i%40, 1000)
		p.send(t, topics.Purchase, ev.LoyaltyID, ev)
		ids = append(ids, ev.TransactionID)
	}
	p.flush(t)
	deadline := time.Now().Add(30 * time.Second)
	for in.svc.Breaker.State() != circuit.Open {
		if time.Now().After(deadline) {
			t.Fatal("circuit never opened")
		}
		time.Sleep(10 * time.Millisecond) // polling the breaker
	}
	// Stay down for a few open periods, then recover.
	down := time.Now()
	for time.Since(down) < 2*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	if c := out.count(); c != 0 {
		t.Errorf("%d outputs during the outage (an error storm)", c)
	}
	e.stack.Sim.SetFaults(sim.Faults{})
	out.waitAll(t, ids, time.Minute)
	for _, id := range ids {
		if rs := out.get(id); rs[0].outcome() != "APPLIED" {
			detail := ""
			if rs[0].err != nil {
				detail = rs[0].err.Detail
			}
			t.Errorf("%s: %s %s", id, rs[0].outcome(), detail)
		}
	}
}

// A bridge killed mid-stream (no drain) under apply-then-500 faults, then a
// new one in the same group: every transaction has a terminal output and the
// simulator's ledger shows exactly one effect each.
func TestCrashRestart(t *testing.T) {
	e := newEnv(t, envOpts{sim: sim.Options{Members: 100}})
	e.stack.Sim.SetFaults(sim.Faults{ApplyThen500Rate: 0.2, Endpoints: []string{sim.EndpointAccrual, sim.EndpointRedemption}})
	out := e.follow(t)
	p := e.producer(t)
	n := size(400)
	var ids []string
	for i := range n {
		var ev events.Event = purchase(fmt.Sprintf("cr-%d", i), 1+i%100, 2000)
		topic := topics.Purchase
		if i%4 == 3 {
			ev = &events.RedemptionRequested{TransactionID: fmt.Sprintf("cr-%d", i), LoyaltyID: sim.MemberID(1 + i%100),
				TransactionDate: time.Now(), Amount: 1, UsedPoint: 1}
			topic = topics.RefundRedemption
		}
		p.send(t, topic, sim.MemberID(1+i%100), ev)
		ids = append(ids, ev.ID())
	}
	p.flush(t)
	a := e.start(t, func(c *config.Config) { c.DrainTimeout = time.Millisecond; c.CommitInterval = 5 * time.Second })
	deadline := time.Now().Add(time.Minute)
	for out.count() < n/4 {
		if time.Now().After(deadline) {
			t.Fatal("no progress")
		}
		time.Sleep(5 * time.Millisecond) // polling the outputs
	}
	a.halt(t)
	e.start(t, nil)
	out.waitAll(t, ids, 2*time.Minute)
	dups := 0
	for _, id := range ids {
		if got := e.stack.Sim.Effects(id); got != 1 {
			t.Errorf("%s: %d effects", id, got)
		}
		rs := out.get(id)
		dups += len(rs) - 1
		for _, r := range rs {
			if r.result == nil {
				t.Errorf("%s: %s (%s)", id, r.outcome(), r.err.Detail)
			}
		}
	}
	t.Logf("%d transactions, %d duplicate outputs (at-least-once)", n, dups)
}

// Three bridges in one group, members joining and leaving mid-stream:
// nothing lost, no double effect.
func TestRebalance(t *testing.T) {
	e := newEnv(t, envOpts{sim: sim.Options{Members: 100}})
	out := e.follow(t)
	p := e.producer(t)
	n := size(600)
	var ids []string
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			ev := purchase(fmt.Sprintf("rb-%d", i), 1+i%100, 3000)
			p.send(t, topics.Purchase, ev.LoyaltyID, ev)
			ids = append(ids, ev.TransactionID)
		}
		p.flush(t)
	}
	waitCount := func(k int) {
		deadline := time.Now().Add(time.Minute)
		for out.count() < k {
			if time.Now().After(deadline) {
				t.Fatalf("stuck below %d outputs", k)
			}
			time.Sleep(5 * time.Millisecond) // polling the outputs
		}
	}
	a := e.start(t, nil)
	produce(0, n/3)
	waitCount(n / 6)
	b := e.start(t, nil)
	c := e.start(t, nil)
	produce(n/3, 2*n/3)
	waitCount(n / 2)
	a.halt(t)
	produce(2*n/3, n)
	b.halt(t)
	e.start(t, nil)
	out.waitAll(t, ids, 2*time.Minute)
	c.halt(t)
	for _, id := range ids {
		if got := e.stack.Sim.Effects(id); got != 1 {
			t.Errorf("%s: %d effects", id, got)
		}
		if rs := out.get(id); rs[0].result == nil {
			t.Errorf("%s: %s", id, rs[0].outcome())
		}
	}
}
