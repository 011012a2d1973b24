package chaos

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
)

// kafkaFaults are the Kafka-side faults of a run, until off. On kfake:
// dropped connections, produce and fetch errors, leader and coordinator
// moves, all kfake control functions. On a real cluster: connections the
// members drop themselves mid-request (conns), and with more than one node,
// leader and coordinator moves by reassignment and preferred-leader
// election.
type kafkaFaults struct {
	drops, moves, coordMoves atomic.Int64
	conns                    *connFaults        // real cluster
	produceErrs, fetchErrs   *kfake.FaultHandle // kfake
	off                      func()

	mu        sync.Mutex
	moveFails int   // real cluster: moves the cluster refused
	lastFail  error // and the last reason
}

// moved counts a real cluster's leader move, or its failure.
func (kf *kafkaFaults) moved(ctx context.Context, n *atomic.Int64, err error) {
	switch {
	case err == nil:
		n.Add(1)
		return
	case ctx.Err() != nil: // the faults ended mid-move
		return
	}
	kf.mu.Lock()
	defer kf.mu.Unlock()
	kf.moveFails++
	kf.lastFail = err
}

// failures says how many real-cluster moves failed, and the last reason.
func (kf *kafkaFaults) failures() string {
	kf.mu.Lock()
	defer kf.mu.Unlock()
	if kf.moveFails == 0 {
		return "none"
	}
	return fmt.Sprintf("%d, the last: %v", kf.moveFails, kf.lastFail)
}

// describe says what the Kafka faults did: on kfake, the table's line as
// it has always read; on a real cluster, what it has instead.
func (kf *kafkaFaults) describe() string {
	if kf.conns == nil {
		return fmt.Sprintf("%d connections dropped, %d produce and %d fetch errors, %d leader moves, %d coordinator moves",
			kf.drops.Load(), kf.produceErrs.Hits(), kf.fetchErrs.Hits(), kf.moves.Load(), kf.coordMoves.Load())
	}
	return fmt.Sprintf("(real) %d connections reset by members, %d leader moves, %d coordinator moves",
		kf.conns.dropped(), kf.moves.Load(), kf.coordMoves.Load())
}

// chance is a seeded coin shared by a run's fault schedules.
type chance struct {
	on  *atomic.Bool
	mu  sync.Mutex
	rng *rand.Rand
}

func newChance(on *atomic.Bool) *chance {
	return &chance{on: on, rng: rand.New(rand.NewPCG(1, 2))}
}

func (c *chance) hit(p float64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.on.Load() && c.rng.Float64() < p
}

func (c *chance) intn(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.IntN(n)
}

// startKfakeFaults injects faults into the kfake cluster until off:
// dropped connections, produce and fetch errors, and (in the background)
// leader and coordinator moves among nodes.
func startKfakeFaults(ctx context.Context, c *kfake.Cluster, nodes []int32, all []string, wg *sync.WaitGroup) *kafkaFaults {
	kf := &kafkaFaults{}
	var on atomic.Bool
	on.Store(true)
	ch := newChance(&on)
	// 2% of produce and fetch requests: the connection is dropped.
	for _, key := range []kmsg.Key{kmsg.Produce, kmsg.Fetch} {
		c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if ch.hit(0.02) {
				kf.drops.Add(1)
				return nil, errors.New("chaos: connection dropped"), true
			}
			return nil, nil, false
		})
	}
	// 1% of produce and fetch requests fail as if the leader had moved.
	kf.produceErrs = c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotLeaderForPartition, Count: -1,
		When: func(kmsg.Request) bool { return ch.hit(0.01) }})
	kf.fetchErrs = c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.NotLeaderForPartition, Count: -1,
		When: func(kmsg.Request) bool { return ch.hit(0.01) }})
	kf.off = func() {
		on.Store(false)
		kf.produceErrs.Remove()
		kf.fetchErrs.Remove()
	}
	// Leaders move every 400 ms, group and transaction coordinators every
	// 3.2 s.
	wg.Go(func() {
		tick := time.NewTicker(400 * time.Millisecond)
		defer tick.Stop()
		for i := 1; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			topic, part, node := all[ch.intn(len(all))], int32(ch.intn(6)), nodes[ch.intn(len(nodes))]
			if err := c.MoveTopicPartition(topic, part, node); err == nil {
				kf.moves.Add(1)
			}
			if i%8 == 0 {
				c.RehashCoordinators()
				kf.coordMoves.Add(1)
			}
		}
	})
	return kf
}

// connFaults drops a member's Kafka connections from the client side in
// the middle of a request: a real fault, which kfake's control functions
// stand in for on kfake. Half the drops cut the request in two (the broker
// never reads it whole), half close the connection right after the request
// went out (the broker may act on it; its answer is lost), the case that
// idempotent and transactional produces, offset commits and EndTxn must
// survive.
type connFaults struct {
	on    atomic.Bool
	ch    *chance
	rates map[int16]float64 // by request key

	mu          sync.Mutex
	sent, drops map[int16]int // requests by key, while on
}

// dropped is how many connections were dropped.
func (f *connFaults) dropped() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for _, d := range f.drops {
		n += int64(d)
	}
	return n
}

// summary names, for each request key subject to drops, how many
// connections were dropped on it of how many requests were sent.
func (f *connFaults) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(f.rates)) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d/%d", kmsg.NameForKey(k), f.drops[k], f.sent[k])
	}
	return b.String()
}

func newConnFaults() *connFaults {
	f := &connFaults{rates: map[int16]float64{}, sent: map[int16]int{}, drops: map[int16]int{}}
	f.on.Store(true)
	f.ch = newChance(&f.on)
	// As on kfake, 2% of produce and fetch requests.
	f.rates[int16(kmsg.Produce)], f.rates[int16(kmsg.Fetch)] = 0.02, 0.02
	// The coordinators' requests: on one node nothing moves a
	// coordinator, and a connection lost with the coordinator's answer is
	// the real broker's nearest fault to it. Rates by how often each is
	// sent, so that a run meets every kind: heartbeats every 200 ms per
	// member, joins and commits a few times a second, and in exactly-once
	// mode a transaction per member round, a handful in a run.
	f.rates[int16(kmsg.Heartbeat)] = 0.01
	for _, k := range []kmsg.Key{kmsg.JoinGroup, kmsg.SyncGroup, kmsg.OffsetCommit} {
		f.rates[int16(k)] = 0.05
	}
	for _, k := range []kmsg.Key{kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn, kmsg.TxnOffsetCommit} {
		f.rates[int16(k)] = 0.2
	}
	return f
}

// faultyConn is one member connection under connFaults. franz-go writes
// each request with one Write (size, then key), which is what lets it
// pick requests by key; its reads go untouched.
type faultyConn struct {
	net.Conn
	f *connFaults
}

func (c *faultyConn) Write(b []byte) (int, error) {
	if len(b) < 6 {
		return c.Conn.Write(b)
	}
	key := int16(binary.BigEndian.Uint16(b[4:6]))
	p := c.f.rates[key]
	if p == 0 || !c.f.on.Load() {
		return c.Conn.Write(b)
	}
	drop := c.f.ch.hit(p)
	c.f.mu.Lock()
	c.f.sent[key]++
	if drop {
		c.f.drops[key]++
	}
	c.f.mu.Unlock()
	if !drop {
		return c.Conn.Write(b)
	}
	// Reset, not closed: the broker sees the connection die as it would
	// with a lost peer, not a polite goodbye. What the client sees is
	// what Go's net package returns for it, as in a real drop: an error
	// the client must judge retriable or not by itself.
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	if c.f.ch.hit(0.5) {
		n, _ := c.Conn.Write(b[:len(b)/2])
		c.Conn.Close()
		m, err := c.Conn.Write(b[n:])
		return n + m, err
	}
	n, err := c.Conn.Write(b)
	c.Conn.Close()
	return n, err
}

// startRealFaults sets up the real cluster's Kafka faults until off: conns
// for the members' dialers, and with more than one node, every 400 ms the
// leader of a random partition of the run's topics moves to another
// replica, and every 3.2 s the leaders of the __consumer_offsets partition
// of group and the __transaction_state partitions of txnIDs (none in
// at-least-once mode, which has no transactions) do: their coordinators
// move with them.
func startRealFaults(ctx context.Context, t *testing.T, brokers []string, all []string, group string, txnIDs []string,
	wg *sync.WaitGroup) *kafkaFaults {
	t.Helper()
	kf := &kafkaFaults{conns: newConnFaults()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	stopped := make(chan struct{})
	mctx, stopMoves := context.WithCancel(ctx)
	kf.off = sync.OnceFunc(func() {
		kf.conns.on.Store(false)
		stopMoves()
		<-stopped
		cl.Close()
	})
	t.Cleanup(kf.off) // a run that fails before its faults end
	brokerMeta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		close(stopped)
		t.Fatalf("chaos: broker metadata: %v", err)
	}
	if len(brokerMeta.Brokers) < 2 {
		close(stopped)
		return kf
	}
	ch := kf.conns.ch
	wg.Go(func() {
		defer close(stopped)
		tick := time.NewTicker(400 * time.Millisecond)
		defer tick.Stop()
		for i := 1; ; i++ {
			select {
			case <-mctx.Done():
				return
			case <-tick.C:
			}
			topic, part := all[ch.intn(len(all))], int32(ch.intn(6))
			_, err := moveLeader(mctx, adm, ch, topic, part)
			kf.moved(mctx, &kf.moves, err)
			if i%8 != 0 {
				continue
			}
			_, err = moveLeader(mctx, adm, ch, "__consumer_offsets", -1, group)
			kf.moved(mctx, &kf.coordMoves, err)
			for _, id := range txnIDs {
				_, err := moveLeader(mctx, adm, ch, "__transaction_state", -1, id)
				kf.moved(mctx, &kf.coordMoves, err)
			}
		}
	})
	return kf
}

// moveLeader makes another replica of topic's partition part its leader:
// that replica first in the replica list (a reassignment that moves no
// data), then a preferred-leader election. With part -1 the partition is
// the one key's coordinator lives on, as the brokers place it: Java's
// String.hashCode of key, made non-negative, modulo the partition count.
func moveLeader(ctx context.Context, adm *kadm.Client, ch *chance, topic string, part int32, key ...string) (int32, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil || len(td.Partitions) == 0 {
		return 0, fmt.Errorf("metadata of %s: %v", topic, td.Err)
	}
	if part < 0 {
		part = coordinatorPartition(key[0], len(td.Partitions))
	}
	pd, ok := td.Partitions[part]
	if !ok || len(pd.Replicas) < 2 {
		return 0, fmt.Errorf("%s/%d: fewer than two replicas", topic, part)
	}
	var others []int32
	for _, r := range pd.Replicas {
		if r != pd.Leader {
			others = append(others, r)
		}
	}
	to := others[ch.intn(len(others))]
	order := append([]int32{to}, slices.DeleteFunc(slices.Clone(pd.Replicas), func(r int32) bool { return r == to })...)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, part, order)
	as, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("reassign %s/%d to %v: %w", topic, part, order, err)
	}
	if r := as[topic][part]; r.Err != nil {
		return 0, fmt.Errorf("reassign %s/%d to %v: %w", topic, part, order, r.Err)
	}
	es, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {part: {}}})
	if err != nil {
		return 0, fmt.Errorf("elect %s/%d: %w", topic, part, err)
	}
	if r := es[topic][part]; r.Err != nil {
		return 0, fmt.Errorf("elect %s/%d: %w", topic, part, r.Err)
	}
	return to, nil
}

// coordinatorPartition is where a Kafka broker keeps the coordinator state
// of a group or transactional id: Utils.abs(key.hashCode()) % partitions.
func coordinatorPartition(key string, partitions int) int32 {
	var h int32
	for _, r := range key { // UTF-16 code units; the suite's names are ASCII
		h = 31*h + int32(r)
	}
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % int32(partitions)
}

// checkMinSession makes sure members may use 2 s sessions: kfake's minimum
// is lowered through the admin API; a real broker's is a static setting
// (scripts/kafka sets 500 ms), read and checked.
func checkMinSession(ctx context.Context, t *testing.T, brokers []string, realCluster bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if !realCluster {
		v := "1000"
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "group.min.session.timeout.ms", Value: &v}})
		if err == nil {
			for _, r := range rs {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			t.Fatalf("group.min.session.timeout.ms: %v", err)
		}
		return
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatalf("describe broker configs: %v", err)
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key != "group.min.session.timeout.ms" {
				continue
			}
			if ms, err := strconv.Atoi(c.MaybeValue()); err != nil || ms > 2000 {
				t.Fatalf("broker %s: group.min.session.timeout.ms is %s; the chaos members use 2 s sessions (scripts/kafka sets 500)",
					rc.Name, c.MaybeValue())
			}
		}
	}
}

// The broker's placement, as Java computes it (String.hashCode, Kafka's
// Utils.abs, % 50, the default partition count): a wrong partition would
// move some other coordinator and leave the run's where they are.
func TestCoordinatorPartition(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want int32
	}{
		{"hello", 22},                                      // hash 99162322
		{"polygenelubricants", 0},                          // hash -2^31, which Utils.abs makes 0
		{"group-TestChaos-0a1b2c3d", 1},                    // hash -2004493551
		{"txn-TestChaosExactlyOnce-deadbeef-bridge-a", 13}, // hash -547190313
		{"zzzzzzzzzzzzzz", 0},                              // hash -1886561600
	} {
		if got := coordinatorPartition(tc.key, 50); got != tc.want {
			t.Errorf("coordinatorPartition(%q, 50) = %d, want %d", tc.key, got, tc.want)
		}
	}
}

// TestMoveCoordinator shows on a real cluster of more than one node that
// moveLeader moves a group's coordinator: the node FindCoordinator names
// becomes the new leader of the partition coordinatorPartition picks.
func TestMoveCoordinator(t *testing.T) {
	seeds := realkafka.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if bm, err := adm.BrokerMetadata(ctx); err != nil {
		t.Fatal(err)
	} else if len(bm.Brokers) < 2 {
		t.Skipf("%d node: no other replica to move a coordinator to", len(bm.Brokers))
	}
	group := realkafka.Name(t, "group")
	coordinator := func() (int32, error) {
		r := adm.FindGroupCoordinators(ctx, group)[group]
		return r.NodeID, r.Err
	}
	before, err := pollNoErr(ctx, coordinator) // the first FindCoordinator may create __consumer_offsets
	if err != nil {
		t.Fatalf("coordinator of %s: %v", group, err)
	}
	var on atomic.Bool
	on.Store(true)
	to, err := moveLeader(ctx, adm, newChance(&on), "__consumer_offsets", -1, group)
	if err != nil {
		t.Fatal(err)
	}
	for {
		after, err := coordinator()
		if err == nil && after == to {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("coordinator of %s is %d, was %d, after its partition's leader moved to %d (last error %v)", group, after, before, to, err)
		}
		time.Sleep(50 * time.Millisecond) // polling the coordinator
	}
}

func pollNoErr(ctx context.Context, f func() (int32, error)) (int32, error) {
	for {
		v, err := f()
		if err == nil || ctx.Err() != nil {
			return v, err
		}
		time.Sleep(100 * time.Millisecond) // polling, not synchronising
	}
}
