package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	inTopic  = "in"
	outTopic = "in.out"
	errTopic = "in.err"
)

// env is a kfake cluster over TCP with the test topics.
type env struct {
	t     *testing.T
	c     *kfake.Cluster
	addrs []string
	cl    *kgo.Client // plain client for producing inputs and reading outputs
	adm   *kadm.Client
}

func newEnv(t *testing.T, partitions int32, opts ...kfake.Opt) *env {
	t.Helper()
	k := testkit.StartKafka(t, testkit.KafkaOptions{Topics: []testkit.TopicSet{{Partitions: partitions, Names: []string{inTopic, outTopic, errTopic}}}, Fake: opts})
	e := &env{t: t, c: k.Fake, addrs: k.Brokers}
	e.cl = k.Client(t, kgo.ProducerLinger(0))
	e.adm = kadm.NewClient(e.cl)
	return e
}

// produce writes n input records, keyed key(i), to partition part(i).
func (e *env) produce(n int, key func(i int) string, part func(i int) int32) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: inTopic, Key: []byte(key(i)), Value: []byte(strconv.Itoa(i)), Partition: part(i)}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
}

// coord is how outputs name their input.
func coord(r *kgo.Record) string {
	return fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)
}

// outputs reads topic from the start until it has at least n records and
// returns how many times each value occurred.
func (e *env) outputs(topic string, n int) map[string]int {
	e.t.Helper()
	return e.readUntil(topic, func(_ map[string]int, total int) bool { return total >= n })
}

// outputsCovering reads topic until every input has an output. Where
// records are processed again (a loss, a rebalance), counting outputs is
// not enough: the second outputs of later records may come before the
// first output of one that was cut off.
func (e *env) outputsCovering(topic string) map[string]int {
	e.t.Helper()
	ends := e.ends()
	return e.readUntil(topic, func(got map[string]int, _ int) bool {
		for p, end := range ends {
			for o := int64(0); o < end; o++ {
				if got[fmt.Sprintf("%s/%d/%d", inTopic, p, o)] == 0 {
					return false
				}
			}
		}
		return true
	})
}

// readUntil reads topic from the start until done holds.
func (e *env) readUntil(topic string, done func(got map[string]int, total int) bool) map[string]int {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := map[string]int{}
	total := 0
	for !done(got, total) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			e.t.Fatalf("read %d records from %s before the deadline, condition not met", total, topic)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Value)]++
			total++
		})
	}
	return got
}

// committed returns the group's committed offset per input partition.
func (e *env) committed(group string) map[int32]int64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]int64{}
	}
	if err != nil {
		e.t.Fatal(err)
	}
	got := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == inTopic && o.Err == nil {
			got[o.Partition] = o.At
		}
	})
	return got
}

func (e *env) ends() map[int32]int64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.adm.ListEndOffsets(ctx, inTopic)
	if err != nil {
		e.t.Fatal(err)
	}
	got := map[int32]int64{}
	resp.Each(func(o kadm.ListedOffset) { got[o.Partition] = o.Offset })
	return got
}

// waitCommittedToEnd polls until the group's commits reach the end offsets.
func (e *env) waitCommittedToEnd(group string) {
	e.t.Helper()
	ends := e.ends()
	testkit.Eventually(e.t, 30*time.Second, func() (bool, string) {
		got := e.committed(group)
		for p, end := range ends {
			if got[p] != end {
				return false, fmt.Sprintf("committed %v, end offsets %v", got, ends)
			}
		}
		return true, ""
	})
}

// testOpts are options for a fast test pipeline: quick heartbeats so
// rebalances happen promptly, and frequent commits.
func (e *env) opts(group string, h Handler) Options {
	return Options{
		Brokers:        e.addrs,
		Group:          group,
		Topics:         []string{inTopic},
		Handler:        h,
		CommitInterval: 100 * time.Millisecond,
		DrainTimeout:   10 * time.Second,
		Logger:         zaptest.NewLogger(e.t, zaptest.Level(zap.InfoLevel)),
		ClientOpts: []kgo.Opt{
			kgo.HeartbeatInterval(50 * time.Millisecond),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		},
	}
}

// running is a pipeline running in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, o Options) *running {
	t.Helper()
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the pipeline and returns Run's error. It may be called more
// than once.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after cancel")
		return nil
	}
}

// wait returns Run's error once it returns on its own.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		close(r.done)
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// echo returns a handler producing one output per input, naming the input.
func echo(before func(ctx context.Context, rec *kgo.Record, meta Meta) error) Handler {
	return func(ctx context.Context, rec *kgo.Record, meta Meta) ([]*kgo.Record, error) {
		if before != nil {
			if err := before(ctx, rec, meta); err != nil {
				return nil, err
			}
		}
		return []*kgo.Record{{Topic: outTopic, Key: rec.Key, Value: []byte(coord(rec))}}, nil
	}
}

// checkOutputs asserts every input record has at least one output and, if
// exact, exactly one.
func (e *env) checkOutputs(got map[string]int, exact bool) {
	e.t.Helper()
	ends := e.ends()
	var missing, dup []string
	for p, end := range ends {
		for o := int64(0); o < end; o++ {
			c := fmt.Sprintf("%s/%d/%d", inTopic, p, o)
			switch n := got[c]; {
			case n == 0:
				missing = append(missing, c)
			case n > 1 && exact:
				dup = append(dup, c)
			}
		}
	}
	if len(missing) > 0 {
		e.t.Errorf("%d inputs without output, e.g. %s", len(missing), strings.Join(missing[:min(5, len(missing))], " "))
	}
	if len(dup) > 0 {
		e.t.Errorf("%d inputs with several outputs, e.g. %s", len(dup), strings.Join(dup[:min(5, len(dup))], " "))
	}
}

// counter tracks concurrency: current and maximum, overall and by name.
type counter struct {
	mu     sync.Mutex
	cur    map[string]int
	max    map[string]int
	starts map[string][]int64
	n      int
}

func newCounter() *counter {
	return &counter{cur: map[string]int{}, max: map[string]int{}, starts: map[string][]int64{}}
}

func (c *counter) enter(offset int64, names ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	for _, n := range names {
		c.cur[n]++
		c.max[n] = max(c.max[n], c.cur[n])
		c.starts[n] = append(c.starts[n], offset)
	}
}

func (c *counter) leave(names ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		c.cur[n]--
	}
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// recorder is an Observer keeping what tests assert on.
type recorder struct {
	NopObserver
	mu          sync.Mutex
	maxInFlight int
	maxBuffered int
	buffered    int
	done        map[Outcome]int
	assigned    map[int32]bool
	paused      int
	// running counts each partition's records started and not done;
	// released, its Released calls; unreleased, the records still
	// running when their partition was released.
	running    map[int32]int
	released   map[int32]int
	unreleased int
}

func newRecorder() *recorder {
	return &recorder{done: map[Outcome]int{}, assigned: map[int32]bool{}, running: map[int32]int{}, released: map[int32]int{}}
}

func (r *recorder) RecordStarted(_ string, p int32, _ bool) {
	r.mu.Lock()
	r.running[p]++
	r.mu.Unlock()
}

func (r *recorder) Released(_ string, parts []int32) {
	r.mu.Lock()
	for _, p := range parts {
		r.released[p]++
		r.unreleased += r.running[p]
	}
	r.mu.Unlock()
}

func (r *recorder) releasedCount(p int32) (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.released[p], r.unreleased
}

func (r *recorder) InFlight(n, b int) {
	r.mu.Lock()
	r.maxInFlight = max(r.maxInFlight, n)
	r.maxBuffered = max(r.maxBuffered, b)
	r.buffered = b
	r.mu.Unlock()
}

func (r *recorder) RecordDone(_ string, p int32, o Outcome, _ time.Duration) {
	r.mu.Lock()
	r.done[o]++
	r.running[p]--
	r.mu.Unlock()
}

func (r *recorder) Assigned(_ string, parts []int32, assigned, _ bool) {
	r.mu.Lock()
	for _, p := range parts {
		r.assigned[p] = assigned
	}
	r.mu.Unlock()
}

func (r *recorder) Paused(_ string, _ int32, paused bool) {
	if paused {
		r.mu.Lock()
		r.paused++
		r.mu.Unlock()
	}
}

func (r *recorder) doneCount(o Outcome) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done[o]
}

func (r *recorder) owns() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, a := range r.assigned {
		if a {
			n++
		}
	}
	return n
}

var errTest = errors.New("test handler error")
