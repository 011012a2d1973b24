package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// The broker-fault tests kill -9 one node of a real three-node cluster
// while the bridge runs, and start it again: the faults kfake cannot make
// (a leader or coordinator that vanishes without a word, its replicas
// taking over, its log truncated or caught up on return). They need the
// cluster's scripts/kafka directory as well as its brokers, so they skip
// unless both are set:
//
//	dir=/tmp/faultk
//	export LOYALTY_BRIDGE_TEST_BROKERS=$(scripts/kafka start --nodes 3 --dir $dir)
//	export LOYALTY_BRIDGE_TEST_KAFKA_DIR=$dir
//	go test -race -count=1 -run TestBrokerFault ./internal/service
//
// With three nodes scripts/kafka gives new and internal topics replication
// factor 3 and min.insync.replicas 2, so one node down never stops
// produces with acks=all, and a node that comes back must catch up.

// envKafkaDir names the scripts/kafka --dir of the cluster in
// LOYALTY_BRIDGE_TEST_BROKERS.
const envKafkaDir = "LOYALTY_BRIDGE_TEST_KAFKA_DIR"

const (
	faultRecords = 300
	// faultMembers keys the purchases: with key ordering at most this many
	// are at the partner at once, which with faultLatency makes the run
	// last long enough (about 300/10×150 ms, 4.5 s of partner time) for a
	// node to be killed in the middle of it.
	faultMembers = 10
	faultLatency = 150 * time.Millisecond
)

// TestBrokerFaultPartitionLeader kills the node that leads the most
// partitions of the purchase topic and its result topic, other than the
// group's coordinator: TestBrokerFaultGroupCoordinator kills that one.
func TestBrokerFaultPartitionLeader(t *testing.T) {
	runBrokerFault(t, pipeline.AtLeastOnce, "partition leader", func(ctx context.Context, t *testing.T, f *faultRun) int32 {
		return f.busiestLeader(ctx, t)
	})
}

// TestBrokerFaultGroupCoordinator kills the coordinator of the bridge's
// consumer group: its heartbeats, joins and offset commits move to another
// node once that node has loaded __consumer_offsets.
func TestBrokerFaultGroupCoordinator(t *testing.T) {
	runBrokerFault(t, pipeline.AtLeastOnce, "group coordinator", func(ctx context.Context, t *testing.T, f *faultRun) int32 {
		r := kadm.NewClient(f.admin).FindGroupCoordinators(ctx, f.stack.Group)[f.stack.Group]
		if r.Err != nil {
			t.Fatalf("group coordinator of %s: %v", f.stack.Group, r.Err)
		}
		return r.NodeID
	})
}

// TestBrokerFaultTxnCoordinator kills, in exactly-once mode, the
// coordinator of the bridge's transactional id: the transaction open at
// that moment must end (committed by the new coordinator, or aborted and
// its inputs redone) without a reply seen twice by a read_committed
// reader.
func TestBrokerFaultTxnCoordinator(t *testing.T) {
	runBrokerFault(t, pipeline.ExactlyOnce, "transaction coordinator", func(ctx context.Context, t *testing.T, f *faultRun) int32 {
		id := f.cfg.Delivery.TransactionalID
		r := kadm.NewClient(f.admin).FindTxnCoordinators(ctx, id)[id]
		if r.Err != nil {
			t.Fatalf("transaction coordinator of %s: %v", id, r.Err)
		}
		return r.NodeID
	})
}

// faultRun is one broker-fault test's cluster, stack and bridge.
type faultRun struct {
	script, dir string
	stack       *testStack
	cfg         *config.Config
	svc         *running
	admin       *kgo.Client
}

func runBrokerFault(t *testing.T, mode pipeline.Delivery, what string, victim func(context.Context, *testing.T, *faultRun) int32) {
	seeds := realkafka.Brokers(t)
	dir := os.Getenv(envKafkaDir)
	if dir == "" {
		t.Skipf("no scripts/kafka directory: set %s to the --dir of the three-node cluster in %s", envKafkaDir, realkafka.EnvBrokers)
	}
	if nodes, _ := filepath.Glob(filepath.Join(dir, "node-*")); len(nodes) != 3 {
		t.Fatalf("%s=%s holds %d nodes; these tests need the cluster of scripts/kafka start --nodes 3", envKafkaDir, dir, len(nodes))
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := &faultRun{script: kafkaScript(t), dir: dir}
	var err error
	if f.admin, err = kgo.NewClient(kgo.SeedBrokers(seeds...)); err != nil {
		t.Fatal(err)
	}
	defer f.admin.Close()
	// An earlier test's node may still be catching up: a second node down
	// would leave its partitions below min.insync.replicas.
	f.waitFullISR(ctx, t)

	f.stack = newStackWith(t, 3, sim.Options{Members: faultMembers, DuplicatePolicy: sim.DuplicateApply})
	f.stack.Sim.SetFaults(sim.Faults{Latency: faultLatency, Endpoints: []string{sim.EndpointAccrual}})
	f.cfg = stackConfig(t, f.stack, func(c *config.Config) {
		c.Delivery.Mode = mode
		if mode == pipeline.ExactlyOnce {
			c.Delivery.TransactionalID = f.txnIDApart(ctx, t)
		}
	})
	f.svc = runService(ctx, t, f.cfg)
	waitFor(t, "/readyz", 30*time.Second, func() bool { c, _ := get(f.svc.base + "/readyz"); return c == http.StatusOK })

	replies := followReplies(ctx, t, seeds, f.stack, mode == pipeline.ExactlyOnce)
	ids := f.produce(ctx, t)

	// Mid-run by the partner's count: a read_committed reader sees the
	// replies of exactly-once mode a transaction at a time, often all at
	// the end.
	f.await(t, "a third of the accruals", time.Minute, func() bool {
		return f.stack.Sim.TotalCalls(sim.EndpointAccrual) >= faultRecords/3
	})
	node := victim(ctx, t, f)
	atKill, made := replies.answered(), f.stack.Sim.TotalCalls(sim.EndpointAccrual)
	t.Logf("%s: killing node %d with %d of %d accruals made, %d answered; %s", what, node,
		made, faultRecords, atKill, f.roles(ctx, t))
	f.kafka(t, "kill", node)
	// A kill after the last accrual would prove nothing about the writes.
	if made >= faultRecords {
		t.Fatalf("every accrual was made before node %d was killed: the run tries no write against the fault", node)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			f.kafka(t, "restart", node)
		}
	})
	// The bridge goes on with the node down: the moved leaders and
	// coordinators have the two other replicas, min.insync.replicas.
	more := min(faultRecords, atKill+faultRecords/10)
	f.await(t, fmt.Sprintf("%d replies with node %d down", more, node), 2*time.Minute, func() bool { return replies.answered() >= more })
	downFor, atRestart := time.Since(began), replies.answered()
	t.Logf("%d answered with node %d down; restarting it", atRestart, node)
	f.kafka(t, "restart", node)
	restarted = true

	f.await(t, "every reply", 2*time.Minute, func() bool { return replies.answered() == faultRecords })
	f.await(t, "group lag 0", time.Minute, func() bool { return f.lag(ctx, t) == 0 })
	replies.sync(ctx, t, f.admin)

	var noOutput, errorsN, multiEffect, notOne, dups int
	for _, id := range ids {
		rs := replies.get(id)
		if len(rs) == 0 {
			noOutput++
			t.Logf("%s: no reply", id)
			continue
		}
		dups += len(rs) - 1
		result := false
		for _, isErr := range rs {
			if isErr {
				errorsN++
			} else {
				result = true
			}
		}
		switch eff := f.stack.Sim.Effects(id); {
		case eff > 1:
			multiEffect++
			t.Logf("%s applied %d times", id, eff)
		case eff != 1 && result:
			notOne++
			t.Logf("%s answered with a result, applied %d times", id, eff)
		}
	}
	f.alive(t)
	t.Logf(`
broker fault (%s, %s): node %d killed at %d/%d answered, restarted at %d; %s in all (%s to the restart)
  transactions without a reply              %d
  accruals with more than one effect        %d
  results whose accrual was not applied     %d
  error events                              %d
  duplicate replies (%s)   %d
  accrual calls at the partner              %d
  transaction lookups at the partner        %d`,
		what, mode, node, atKill, faultRecords, atRestart, time.Since(began).Round(time.Second), downFor.Round(time.Second),
		noOutput, multiEffect, notOne, errorsN, replies.isolation(), dups, f.stack.Sim.TotalCalls(sim.EndpointAccrual),
		f.stack.Sim.TotalCalls(sim.EndpointLookup))
	if noOutput > 0 || multiEffect > 0 || notOne > 0 || errorsN > 0 || (mode == pipeline.ExactlyOnce && dups > 0) {
		t.Fatal("an invariant does not hold (table above)")
	}
	f.svc.halt(t)
	// Leave the cluster whole for the next test.
	f.waitFullISR(ctx, t)
}

// await is waitFor that also fails at once if the service stopped: it must
// ride out a broker's death, not exit on it.
func (f *faultRun) await(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	waitFor(t, what, d, func() bool { f.alive(t); return ok() })
}

func (f *faultRun) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-f.svc.done:
		t.Fatalf("the service stopped: Run returned %v", err)
	default:
	}
}

func (f *faultRun) produce(ctx context.Context, t *testing.T) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.stack.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var ids []string
	var recs []*kgo.Record
	for i := range faultRecords {
		ev := &events.PurchaseCompleted{TransactionID: realkafka.Name(t, fmt.Sprintf("tx%d", i)), LoyaltyID: sim.MemberID(1 + i%faultMembers),
			TransactionDate: time.Now(), Amount: 10_000, Currency: "VND"}
		v, err := f.svc.Codec.Encode(f.stack.Topics.Purchase, ev)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.TransactionID)
		recs = append(recs, &kgo.Record{Topic: f.stack.Topics.Purchase, Key: []byte(ev.LoyaltyID), Value: v})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// kafka runs scripts/kafka verb node against the test's cluster.
func (f *faultRun) kafka(t *testing.T, verb string, node int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, f.script, verb, strconv.Itoa(int(node)), "--dir", f.dir).CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/kafka %s %d: %v\n%s", verb, node, err, out)
	}
}

// txnIDApart returns a transactional id whose coordinator is not the
// coordinator of the test's group: coordinators are chosen by a hash of the
// id, so killing the one would otherwise often kill the other too, and the
// test would not tell which of the two the bridge survived.
func (f *faultRun) txnIDApart(ctx context.Context, t *testing.T) string {
	t.Helper()
	adm := kadm.NewClient(f.admin)
	// On a fresh cluster the first FindCoordinator of a transactional id
	// creates __transaction_state (50 partitions, three replicas), and
	// until it is led every answer is COORDINATOR_NOT_AVAILABLE: 20 quick
	// tries failed in CI once. Ask until an id lands apart, or a minute.
	var (
		found string
		last  string
	)
	waitFor(t, "a transactional id with a coordinator other than the group's", time.Minute, func() bool {
		g := adm.FindGroupCoordinators(ctx, f.stack.Group)[f.stack.Group]
		id := realkafka.Name(t, "txn")
		r := adm.FindTxnCoordinators(ctx, id)[id]
		if g.Err == nil && r.Err == nil && r.NodeID != g.NodeID {
			found = id
			return true
		}
		last = fmt.Sprintf("group coordinator %d (%v), %s's %d (%v)", g.NodeID, g.Err, id, r.NodeID, r.Err)
		if ctx.Err() != nil {
			t.Fatalf("%v; last answer: %s", ctx.Err(), last)
		}
		return false
	})
	if last != "" {
		t.Logf("transactional id %s; an earlier answer: %s", found, last)
	}
	return found
}

// roles says which node leads the purchase topic's partitions and its
// result topic's, and coordinates the group and the transactional id.
func (f *faultRun) roles(ctx context.Context, t *testing.T) string {
	t.Helper()
	adm := kadm.NewClient(f.admin)
	var b strings.Builder
	in, out := f.stack.Topics.Purchase, f.stack.Topics.ResultTopic(f.stack.Topics.Purchase)
	if md, err := adm.Metadata(ctx, in, out); err == nil {
		for _, td := range md.Topics.Sorted() {
			for _, p := range td.Partitions.Sorted() {
				fmt.Fprintf(&b, "%s/%d leader %d, ", p.Topic, p.Partition, p.Leader)
			}
		}
	}
	fmt.Fprintf(&b, "group coordinator %d", adm.FindGroupCoordinators(ctx, f.stack.Group)[f.stack.Group].NodeID)
	if id := f.cfg.Delivery.TransactionalID; f.cfg.Delivery.Mode == pipeline.ExactlyOnce {
		fmt.Fprintf(&b, ", transaction coordinator %d", adm.FindTxnCoordinators(ctx, id)[id].NodeID)
	}
	return b.String()
}

// busiestLeader is the node that leads the most partitions of the purchase
// topic and its result topic (the lowest id of a tie), leaving out the
// group's coordinator.
func (f *faultRun) busiestLeader(ctx context.Context, t *testing.T) int32 {
	t.Helper()
	in, out := f.stack.Topics.Purchase, f.stack.Topics.ResultTopic(f.stack.Topics.Purchase)
	adm := kadm.NewClient(f.admin)
	g := adm.FindGroupCoordinators(ctx, f.stack.Group)[f.stack.Group]
	if g.Err != nil {
		t.Fatalf("group coordinator of %s: %v", f.stack.Group, g.Err)
	}
	md, err := adm.Metadata(ctx, in, out)
	if err != nil {
		t.Fatal(err)
	}
	led := map[int32][]string{}
	for _, td := range md.Topics.Sorted() {
		for _, p := range td.Partitions.Sorted() {
			led[p.Leader] = append(led[p.Leader], fmt.Sprintf("%s/%d", p.Topic, p.Partition))
		}
	}
	best := int32(-1)
	for n, ps := range led {
		if n >= 0 && n != g.NodeID && (best < 0 || len(ps) > len(led[best]) || (len(ps) == len(led[best]) && n < best)) {
			best = n
		}
	}
	if best < 0 {
		t.Fatalf("no leader of %s or %s but the group coordinator, node %d", in, out, g.NodeID)
	}
	t.Logf("node %d leads %s", best, strings.Join(led[best], ", "))
	return best
}

// waitFullISR waits until every broker is registered and every partition of
// every topic, the internal ones too, has all its replicas in sync.
func (f *faultRun) waitFullISR(ctx context.Context, t *testing.T) {
	t.Helper()
	adm := kadm.NewClient(f.admin)
	var short []string
	waitFor(t, "every partition's replicas in sync", 2*time.Minute, func() bool {
		md, err := adm.Metadata(ctx)
		if err != nil || len(md.Brokers) < 3 {
			return false
		}
		short = short[:0]
		for _, td := range md.Topics {
			for _, p := range td.Partitions {
				if p.Err != nil || p.Leader < 0 || len(p.ISR) < len(p.Replicas) {
					short = append(short, fmt.Sprintf("%s/%d isr %v of %v", p.Topic, p.Partition, p.ISR, p.Replicas))
				}
			}
		}
		if len(short) > 0 && len(short) <= 5 {
			t.Logf("not yet in sync: %v", short)
		}
		return len(short) == 0
	})
}

// lag is the purchase topic's end offsets minus the group's commits: -1
// while either cannot be read.
func (f *faultRun) lag(ctx context.Context, t *testing.T) int64 {
	lags, err := kadm.NewClient(f.admin).Lag(ctx, f.stack.Group)
	if err != nil {
		return -1
	}
	gl, ok := lags[f.stack.Group]
	if !ok || gl.Error() != nil {
		return -1
	}
	var total int64
	for _, l := range gl.Lag[f.stack.Topics.Purchase] {
		if l.Err != nil {
			return -1
		}
		total += l.Lag
	}
	if len(gl.Lag[f.stack.Topics.Purchase]) == 0 {
		return -1
	}
	return total
}

// kafkaScript is scripts/kafka of the repository the test runs in.
func kafkaScript(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "scripts", "kafka")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// faultReplies reads the purchase topic's result and error topics while the
// run goes on, as a downstream consumer would: each transaction's replies,
// true for an error event.
type faultReplies struct {
	cl     *kgo.Client
	topics []string
	rc     bool
	mu     sync.Mutex
	byID   map[string][]bool
	marks  map[string]bool // sentinel partitions seen
	mark   string
}

func followReplies(ctx context.Context, t *testing.T, seeds []string, s *testStack, readCommitted bool) *faultReplies {
	t.Helper()
	fr := &faultReplies{topics: []string{s.Topics.ResultTopic(s.Topics.Purchase), s.Topics.ErrorTopic(s.Topics.Purchase)},
		rc: readCommitted, byID: map[string][]bool{}, marks: map[string]bool{}}
	iso := kgo.ReadUncommitted()
	if readCommitted {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(fr.topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	fr.cl = cl
	fctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for fctx.Err() == nil {
			cl.PollFetches(fctx).EachRecord(func(r *kgo.Record) {
				fr.mu.Lock()
				defer fr.mu.Unlock()
				if r.Headers == nil && fr.mark != "" && string(r.Key) == fr.mark {
					fr.marks[fmt.Sprintf("%s/%d", r.Topic, r.Partition)] = true
					return
				}
				id := string(r.Key)
				fr.byID[id] = append(fr.byID[id], r.Topic == fr.topics[1])
			})
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait(); cl.Close() })
	return fr
}

func (fr *faultReplies) answered() int {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return len(fr.byID)
}

func (fr *faultReplies) get(id string) []bool {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return slices.Clone(fr.byID[id])
}

func (fr *faultReplies) isolation() string {
	if fr.rc {
		return "read_committed"
	}
	return "read_uncommitted"
}

// sync returns once the reader has read every reply topic partition to
// where it ended when sync was called: it writes a sentinel at the end of
// each and waits to read them all. A read_committed reader reads a
// sentinel only once every transaction before it has ended, so a late
// duplicate cannot arrive after sync.
func (fr *faultReplies) sync(ctx context.Context, t *testing.T, admin *kgo.Client) {
	t.Helper()
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, fr.topics...)
	if err != nil {
		t.Fatal(err)
	}
	fr.mu.Lock()
	fr.mark = realkafka.Name(t, "sentinel")
	fr.mu.Unlock()
	var recs []*kgo.Record
	ends.Each(func(o kadm.ListedOffset) {
		recs = append(recs, &kgo.Record{Topic: o.Topic, Partition: o.Partition, Key: []byte(fr.mark)})
	})
	if err := fr.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(errors.Join(errors.New("sentinels"), err))
	}
	waitFor(t, "the reply reader to read every sentinel", time.Minute, func() bool {
		fr.mu.Lock()
		defer fr.mu.Unlock()
		return len(fr.marks) == len(recs)
	})
}
