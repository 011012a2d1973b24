package bridge_test

// Scenarios over running pipelines. Sizes are modest by default; set
// BRIDGE_TEST_SCALE to multiply them.

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/circuit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// One member's link → unlink → link → … interleaved with a thousand other
// members' commands and purchases: the member's outcomes come in command
// order and its final state is right; every other record is answered.
func TestOrder(t *testing.T) {
	others := scale(1000)
	s := newStack(t, stackOpts{sim: sim.Options{Members: others + 10}})
	out := s.follow()
	p := s.producer()
	key := sim.MemberID(1)
	var mine, all []string
	for i := range others {
		if i%(others/10) == 0 {
			n := len(mine)
			var ev events.Event = &events.MemberLinkRequested{TransactionID: fmt.Sprintf("k-%02d", n), LoyaltyID: key, PartnerMemberID: "pm-1"}
			if n%2 == 1 {
				ev = &events.MemberUnlinkRequested{TransactionID: fmt.Sprintf("k-%02d", n), LoyaltyID: key, PartnerMemberID: "pm-1"}
			}
			p.send(topics.MemberOnboarding, key, ev)
			mine = append(mine, ev.ID())
		}
		m := sim.MemberID(2 + i)
		link := &events.MemberLinkRequested{TransactionID: fmt.Sprintf("o-%d", i), LoyaltyID: m, PartnerMemberID: fmt.Sprintf("pm-%d", i+2)}
		p.send(topics.MemberOnboarding, m, link)
		buy := purchase(fmt.Sprintf("b-%d", i), 2+i, 1000)
		p.send(topics.Purchase, m, buy)
		all = append(all, link.TransactionID, buy.TransactionID)
	}
	p.flush()
	s.start(memberOpts{bridge: s.bridge(nil), maxInFlight: 64})
	all = append(all, mine...)
	out.waitAll(t, all, 2*time.Minute)

	want := []string{"LINKED", "UNLINKED"}
	var prev int64 = -1
	for i, id := range mine {
		r := out.get(id)[0]
		if got := r.outcome(); got != want[i%2] {
			t.Errorf("%s: %s, want %s", id, got, want[i%2])
		}
		if r.result == nil {
			continue
		}
		if off := r.result.Source.Offset; off <= prev {
			t.Errorf("%s answered out of order", id)
		} else {
			prev = off
		}
	}
	if m, _ := s.sim.Member(key); m.Linked != (len(mine)%2 == 1) {
		t.Errorf("member linked=%v after %d commands", m.Linked, len(mine))
	}
	for _, id := range all {
		if rs := out.get(id); len(rs) != 1 || rs[0].result == nil {
			t.Errorf("%s: %d replies, first %s", id, len(rs), rs[0].outcome())
		}
	}
}

// Poison records of every kind between valid ones of the same keys: each
// becomes one error event of the right category and reason, and its
// neighbours are applied once.
func TestPoison(t *testing.T) {
	n := scale(300)
	s := newStack(t, stackOpts{})
	out := s.follow()
	p := s.producer()
	rng := rand.New(rand.NewPCG(1, 2))
	valid, _ := s.codec.Encode(topics.Purchase, purchase("template", 1, 10))
	poisons := []struct {
		want  string
		value func() []byte
	}{
		{"error DECODE WRONG_MAGIC", func() []byte {
			b := make([]byte, 1+rng.IntN(64))
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			b[0] |= 1 // never the magic byte
			return b
		}},
		{"error DECODE UNKNOWN_SCHEMA_ID", func() []byte {
			b := append([]byte{0, 0, 0, 0, 0}, valid[5:]...)
			binary.BigEndian.PutUint32(b[1:], 0x7fff0000+uint32(rng.IntN(1000)))
			return b
		}},
		{"error DECODE EMPTY", func() []byte { return nil }},
		{"error DECODE TRUNCATED", func() []byte { return valid[:len(valid)-3] }},
		{"error DECODE TRAILING_BYTES", func() []byte { return append(append([]byte(nil), valid...), 1, 2, 3) }},
		{"error VALIDATION", nil}, // a negative amount, encoded properly
	}
	want := map[string]int{} // poison outcome → count
	var ids []string
	poisonCount := 0
	for i := range n {
		member := 1 + i%20
		ev := purchase(fmt.Sprintf("ok-%d", i), member, 1000)
		p.send(topics.Purchase, ev.LoyaltyID, ev)
		ids = append(ids, ev.TransactionID)
		if i%5 == 2 {
			k := poisons[poisonCount%len(poisons)]
			if k.value == nil {
				p.send(topics.Purchase, ev.LoyaltyID, purchase(fmt.Sprintf("poison-%d", poisonCount), member, -1))
			} else {
				p.raw(topics.Purchase, ev.LoyaltyID, k.value())
			}
			want[k.want]++
			poisonCount++
		}
	}
	p.flush()
	s.start(memberOpts{bridge: s.bridge(nil)})
	out.waitAll(t, ids, time.Minute)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		if c := out.count(); c < n+poisonCount {
			return false, fmt.Sprintf("%d of %d replies", c, n+poisonCount)
		}
		return true, ""
	})
	for _, id := range ids {
		if rs := out.get(id); len(rs) != 1 || rs[0].outcome() != "APPLIED" || s.sim.Effects(id) != 1 {
			t.Errorf("%s: %d replies, %s (%s), %d effects", id, len(rs), rs[0].outcome(), rs[0].detail(), s.sim.Effects(id))
		}
	}
	got := map[string]int{}
	for _, r := range out.all() {
		if r.err != nil {
			got[r.outcome()]++
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("poison replies %v, want %v", got, want)
	}
}

// An API outage of a few seconds: the circuit opens, records wait instead
// of turning into errors, and everything completes after recovery.
func TestOutageHoldsRecords(t *testing.T) {
	s := newStack(t, stackOpts{})
	out := s.follow()
	br := s.breaker(3, 300*time.Millisecond)
	s.sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, Endpoints: []string{sim.EndpointAccrual, sim.EndpointRedemption,
		sim.EndpointLookup, sim.EndpointLink, sim.EndpointUnlink, sim.EndpointOnboard, sim.EndpointCustomerInfo, sim.EndpointCustomerProfile}})
	s.start(memberOpts{bridge: s.bridge(func(o *bridge.Options) { o.Breaker = br }), gate: br})
	p := s.producer()
	n := scale(200)
	var ids []string
	for i := range n {
		ev := purchase(fmt.Sprintf("out-%d", i), 1+i%40, 1000)
		p.send(topics.Purchase, ev.LoyaltyID, ev)
		ids = append(ids, ev.TransactionID)
	}
	p.flush()
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		if br.State() != circuit.Open {
			return false, "circuit not open"
		}
		return true, ""
	})
	// Down for a couple of seconds: several open periods, each ended by a
	// failed probe.
	opened, calls := time.Now(), s.sim.TotalCalls(sim.EndpointAccrual)+s.sim.TotalCalls(sim.EndpointLookup)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		probes := s.sim.TotalCalls(sim.EndpointAccrual) + s.sim.TotalCalls(sim.EndpointLookup) - calls
		if time.Since(opened) < 2*time.Second || probes < 3 {
			return false, fmt.Sprintf("%d probes", probes)
		}
		return true, ""
	})
	if c := out.count(); c != 0 {
		t.Errorf("%d outputs during the outage (an error storm)", c)
	}
	s.sim.SetFaults(sim.Faults{})
	out.waitAll(t, ids, time.Minute)
	for _, id := range ids {
		if rs := out.get(id); len(rs) != 1 || rs[0].outcome() != "APPLIED" || s.sim.Effects(id) != 1 {
			t.Errorf("%s: %d replies, %s (%s), %d effects", id, len(rs), rs[0].outcome(), rs[0].detail(), s.sim.Effects(id))
		}
	}
	if d := s.dupWrites(); d != 0 {
		t.Errorf("%d writes of already-applied transactions", d)
	}
}

// A pipeline stopped mid-stream without drain under apply-then-500 faults,
// then a new one in the same group: every transaction has a terminal
// output, the simulator's ledger shows exactly one effect each, and the new
// member, seeing the old one's uncommitted records again as Fresh, looked
// them up instead of writing them a second time.
//
// "killed" also keeps every offset commit at the start, as after kill -9
// before anything was committed; only the dispatch horizons get through,
// and the pipeline commits one before it dispatches past it. The new member
// must then guard everything the dead one may have sent, and only that.
func TestCrashRestart(t *testing.T) {
	for _, c := range []struct {
		name   string
		killed bool
	}{{"no drain", false}, {"killed", true}} {
		t.Run(c.name, func(t *testing.T) { crashRestart(t, c.killed) })
	}
}

func crashRestart(t *testing.T, killed bool) {
	s := newStack(t, stackOpts{sim: sim.Options{Members: 100}})
	// Latency keeps work in flight when the crash comes.
	s.sim.SetFaults(sim.Faults{ApplyThen500Rate: 0.2, Latency: 20 * time.Millisecond, Endpoints: []string{sim.EndpointAccrual, sim.EndpointRedemption}})
	out := s.follow()
	p := s.producer()
	n := scale(400)
	var ids []string
	for i := range n {
		member := 1 + i%100
		var ev events.Event = purchase(fmt.Sprintf("cr-%d", i), member, 2000)
		topic := topics.Purchase
		if i%4 == 3 {
			ev, topic = redemption(fmt.Sprintf("cr-%d", i), member, 1), topics.RefundRedemption
		}
		p.send(topic, sim.MemberID(member), ev)
		ids = append(ids, ev.ID())
	}
	p.flush()
	var refuse atomic.Bool
	refuse.Store(killed)
	s.freezeCommits(&refuse)
	a := s.start(memberOpts{bridge: s.bridge(nil), drain: time.Millisecond})
	testkit.Eventually(t, time.Minute, func() (bool, string) {
		if c := out.count(); c < n/4 {
			return false, fmt.Sprintf("%d outputs", c)
		}
		return true, ""
	})
	a.halt(t)
	refuse.Store(false)
	atCrash := out.count()
	if atCrash >= n {
		t.Errorf("all %d answered before the crash: nothing left to recover", atCrash)
	}
	s.start(memberOpts{bridge: s.bridge(nil)})
	out.waitAll(t, ids, 2*time.Minute)
	repeated := 0
	for _, id := range ids {
		if got := s.sim.Effects(id); got != 1 {
			t.Errorf("%s: %d effects", id, got)
		}
		rs := out.get(id)
		repeated += len(rs) - 1
		for _, r := range rs {
			if r.result == nil {
				t.Errorf("%s: %s (%s)", id, r.outcome(), r.detail())
			}
		}
	}
	if d := s.dupWrites(); d != 0 {
		t.Errorf("%d writes of already-applied transactions", d)
	}
	if killed && repeated < atCrash {
		t.Errorf("only %d of %d answered records were answered again after a crash that committed nothing", repeated, atCrash)
	}
	t.Logf("%d transactions, %d answered at the crash, %d answered again", n, atCrash, repeated)
}

// Three pipelines in one group, members joining and leaving mid-stream:
// nothing lost, no double effect.
func TestRebalance(t *testing.T) {
	s := newStack(t, stackOpts{sim: sim.Options{Members: 100}})
	out := s.follow()
	p := s.producer()
	n := scale(600)
	var ids []string
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			ev := purchase(fmt.Sprintf("rb-%d", i), 1+i%100, 3000)
			p.send(topics.Purchase, ev.LoyaltyID, ev)
			ids = append(ids, ev.TransactionID)
		}
		p.flush()
	}
	atLeast := func(k int) {
		t.Helper()
		testkit.Eventually(t, time.Minute, func() (bool, string) {
			if c := out.count(); c < k {
				return false, fmt.Sprintf("%d outputs, want %d", c, k)
			}
			return true, ""
		})
	}
	newMember := func() *member { return s.start(memberOpts{bridge: s.bridge(nil)}) }
	a := newMember()
	produce(0, n/3)
	atLeast(n / 6)
	b, c := newMember(), newMember()
	produce(n/3, 2*n/3)
	atLeast(n / 2)
	a.halt(t)
	produce(2*n/3, n)
	b.halt(t)
	newMember()
	out.waitAll(t, ids, 2*time.Minute)
	c.halt(t)
	for _, id := range ids {
		if got := s.sim.Effects(id); got != 1 {
			t.Errorf("%s: %d effects", id, got)
		}
		if rs := out.get(id); rs[0].result == nil {
			t.Errorf("%s: %s", id, rs[0].outcome())
		}
	}
	if d := s.dupWrites(); d != 0 {
		t.Errorf("%d writes of already-applied transactions", d)
	}
}
