package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// TestRollingStop stops every member of a three-member group, one after
// another 100 ms apart, as a scale-down or a SIGTERM to every pod does,
// while records flow. Afterwards the group's commits must cover every
// partition whose records all got their outputs (committed == end), must
// never pass a record without an output, and a restarted member must find
// nothing lost. Half of the rounds stop once every record was answered (the
// chaos suite's ending), half while records are still being processed.
func TestRollingStop(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 4
	}
	for i := range rounds {
		midFlow := i%2 == 1
		t.Run(fmt.Sprintf("round-%02d-midflow-%v", i, midFlow), func(t *testing.T) {
			rollingStopRound(t, midFlow, uint64(i))
		})
	}
}

func rollingStopRound(t *testing.T, midFlow bool, seed uint64) {
	const (
		partitions = 6
		records    = 600
	)
	e := newEnv(t, partitions)
	group := "rolling"
	var rngMu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 99))
	// A little work per record, so that records are in flight when the
	// members stop.
	work := func(ctx context.Context, _ *kgo.Record, _ Meta) error {
		rngMu.Lock()
		d := time.Duration(rng.IntN(3000)) * time.Microsecond
		rngMu.Unlock()
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	member := func(name string) *running {
		o := e.opts(group, echo(work))
		o.MaxInFlight = 16
		o.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(name)
		return start(t, o)
	}
	members := []*running{member("a"), member("b"), member("c")}

	// The traffic: produced in batches while the members run.
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for b := range 6 {
			e.produce(records/6, func(i int) string { return fmt.Sprintf("k%d", (b*records/6+i)%37) },
				func(i int) int32 { return int32(i % partitions) })
		}
	}()
	if midFlow {
		// Stop once a third of the records were answered.
		e.readUntil(outTopic, func(_ map[string]int, total int) bool { return total >= records/3 })
	} else {
		<-produced
		e.outputs(outTopic, records)
	}

	var stopped sync.WaitGroup
	for i, m := range members {
		if i > 0 {
			time.Sleep(100 * time.Millisecond) // the stop schedule under test, not synchronisation
		}
		stopped.Go(func() {
			if err := m.stop(t); err != nil {
				t.Errorf("member %d: %v", i, err)
			}
		})
	}
	stopped.Wait()
	<-produced

	// What the stopped group left: read every output, compare with the
	// commits.
	ends, committed := e.ends(), e.committed(group)
	got := e.readAll(outTopic, false)
	var problems []string
	for p := range int32(partitions) {
		end, c := ends[p], committed[p]
		firstMissing := end
		for o := range end {
			if got[fmt.Sprintf("%s/%d/%d", inTopic, p, o)] == 0 {
				firstMissing = o
				break
			}
		}
		switch {
		case c > firstMissing:
			problems = append(problems, fmt.Sprintf("partition %d: committed %d past offset %d, which has no output", p, c, firstMissing))
		case firstMissing == end && c != end:
			problems = append(problems, fmt.Sprintf("partition %d: every record has its output but committed %d, end %d", p, c, end))
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		t.Fatalf("after every member stopped:\n%s", strings.Join(problems, "\n"))
	}

	// Nothing lost: a new member finishes what the stopped group left.
	member("d")
	e.waitCommittedToEnd(group)
	e.checkOutputs(e.readAll(outTopic, false), false)
}

// TestShutdownTimeoutBoundsLeave: leaving the group waits for a JoinGroup
// in progress, which franz-go does not cancel; a broker that never answers
// it (kfake does that to a member it drops while the JoinGroup is parked)
// would hold Close for the rebalance timeout plus the request overhead.
// ShutdownTimeout bounds Run anyway.
func TestShutdownTimeoutBoundsLeave(t *testing.T) {
	e := newEnv(t, 2)
	joining := make(chan struct{})
	var once sync.Once
	e.c.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		once.Do(func() { close(joining) })
		return nil, nil, true // handled without an answer
	})
	o := e.opts("stuck", echo(nil))
	o.DrainTimeout = 200 * time.Millisecond
	o.ShutdownTimeout = time.Second
	// Close alone would wait 10s + 60s for the JoinGroup's answer.
	o.ClientOpts = append(o.ClientOpts, kgo.RebalanceTimeout(60*time.Second))
	r := start(t, o)
	select {
	case <-joining:
	case <-time.After(30 * time.Second):
		t.Fatal("the member never sent a JoinGroup")
	}
	began := time.Now()
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	// A bound far above ShutdownTimeout and far below the 70s hang: a
	// check of the bound, not of speed.
	if took := time.Since(began); took > 30*time.Second {
		t.Fatalf("Run returned %v after its context ended; ShutdownTimeout is %v", took, o.ShutdownTimeout)
	}
}

// TestExactlyOnceStopWithBrokersGone: a member whose brokers became
// unreachable mid-round (a network partition, or the chaos suite's kill)
// waited forever for its round's produce acknowledgements. ShutdownTimeout
// bounds its stop too.
func TestExactlyOnceStopWithBrokersGone(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(5, strconv.Itoa, func(int) int32 { return 0 })
	var (
		mu    sync.Mutex
		dead  bool
		conns []net.Conn
	)
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		if dead {
			return nil, errors.New("test: network gone")
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, host)
		if err == nil {
			conns = append(conns, c)
		}
		return c, err
	}
	cut := func() {
		mu.Lock()
		defer mu.Unlock()
		dead = true
		for _, c := range conns {
			c.Close()
		}
	}
	handling := make(chan struct{}, 5)
	release := make(chan struct{})
	o := e.eosOpts("gone", "m-gone", echo(func(context.Context, *kgo.Record, Meta) error {
		handling <- struct{}{}
		<-release
		return nil
	}))
	o.DrainTimeout = 200 * time.Millisecond
	o.ShutdownTimeout = time.Second
	// Records fail after RecordDeliveryTimeout = TransactionTimeout at the
	// earliest, and only while the client can try to send them.
	o.TransactionTimeout = 20 * time.Second
	o.ClientOpts = append(o.ClientOpts, kgo.Dialer(dial))
	r := start(t, o)
	select {
	case <-handling:
	case <-time.After(30 * time.Second):
		t.Fatal("no record reached the handler")
	}
	cut()
	close(release) // the round now produces into a network that is gone
	began := time.Now()
	_ = r.stop(t) // an error is fine: the round could not commit
	// Far above ShutdownTimeout, below the 20s the records could wait.
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("Run returned %v after its context ended; ShutdownTimeout is %v", took, o.ShutdownTimeout)
	}
}

// In exactly-once mode, records below what this member's own committed
// transactions cover are never run again, even when the session rewinds
// below them after an aborted round (the chaos suite caught franz-go
// rewinding a partition to 0 and the records running twice); a partition
// that was dropped forgets it.
func TestExactlyOnceSkipsRecordsItCommitted(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	p, err := New(Options{Brokers: []string{"unused:9092"}, Group: "g", Topics: []string{inTopic}, Handler: echo(nil),
		Delivery: ExactlyOnce, TransactionalID: "m-1", Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	p.workCtx = context.Background()
	key := tp{inTopic, 0}
	eo := p.mode.(*exactlyOnce)
	eo.txnDone[key] = 5
	fetch := func(from, to int64) kgo.Fetches {
		var recs []*kgo.Record
		for o := from; o < to; o++ {
			recs = append(recs, &kgo.Record{Topic: inTopic, Partition: 0, Offset: o, Key: []byte("k")})
		}
		return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: inTopic, Partitions: []kgo.FetchPartition{{Partition: 0, Records: recs}}}}}}
	}
	p.enqueue(fetch(0, 8), false)
	part := p.parts[key]
	if first, _ := part.track.First(); part.track.Len() != 3 || first != 5 {
		t.Fatalf("took %d records from %d, want 3 from 5", part.track.Len(), first)
	}
	if n := logs.FilterMessageSnippet("rewound below").Len(); n != 1 {
		t.Fatalf("%d warnings about the rewind, want 1", n)
	}
	p.mu.Lock()
	eo.dropLocked([]*partition{part})
	p.mu.Unlock()
	if _, ok := eo.txnDone[key]; ok {
		t.Fatal("a dropped partition kept its committed floor")
	}
	p.enqueue(fetch(0, 2), false) // a new owner's view: from its committed offset
	if n := p.parts[key].track.Len(); n != 2 {
		t.Fatalf("took %d records after the partition was dropped, want 2", n)
	}
}
