package pipeline

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// The release marker and the claim (release.go), against kfake over TCP.
// A wait a test expects to be skipped is a minute long, so that a member
// that waits fails the test on its deadline rather than by a clock
// reading; a wait it expects is two seconds, checked from the assignment.

// noWait is a takeover wait no test outlives.
const noWait = time.Minute

// handledLog notes when each member first handled a record, and how many
// records it handled.
type handledLog struct {
	first atomic.Int64 // unix nanoseconds
	n     atomic.Int32
}

func (h *handledLog) note() {
	h.first.CompareAndSwap(0, time.Now().UnixNano())
	h.n.Add(1)
}

// groupMembers is the number of members of group, as the coordinator
// sees it.
func (e *env) groupMembers(group string) int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gs, err := e.adm.DescribeGroups(ctx, group)
	if err != nil {
		return 0
	}
	g, ok := gs[group]
	if !ok || g.Err != nil || g.State != "Stable" {
		return 0
	}
	return len(g.Members)
}

// TestExactlyOnceCleanHandoverDoesNotWait: a member that stops cleanly
// releases its partition, and the member that takes it over runs its
// records at once. A fresh group's first member does not wait either,
// nor guards its records (none is Fresh): nobody ever claimed its
// partition.
func TestExactlyOnceCleanHandoverDoesNotWait(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(5, strconv.Itoa, func(int) int32 { return 0 })
	var a, b handledLog
	var fresh atomic.Int32
	oa := e.eosOpts("g", "member-a", echo(func(_ context.Context, _ *kgo.Record, m Meta) error {
		if m.Fresh {
			fresh.Add(1)
		}
		a.note()
		return nil
	}))
	oa.TakeoverWait = noWait
	ra := start(t, oa)
	testkit.Eventually(t, 20*time.Second, func() (bool, string) {
		return a.n.Load() >= 5, fmt.Sprintf("the first member of a fresh group handled %d of 5 records", a.n.Load())
	})
	if n := fresh.Load(); n != 0 {
		t.Errorf("%d records of a partition never committed handled Fresh, want none: nobody can have handled them", n)
	}
	e.waitCommittedToEnd("g")

	ob := e.eosOpts("g", "member-b", echo(func(context.Context, *kgo.Record, Meta) error { b.note(); return nil }))
	ob.TakeoverWait = noWait
	start(t, ob)
	testkit.Eventually(t, 20*time.Second, func() (bool, string) {
		n := e.groupMembers("g")
		return n == 2, fmt.Sprintf("%d members in a stable group, want 2", n)
	})
	if err := ra.stop(t); err != nil {
		t.Fatalf("member a: %v", err)
	}
	e.produce(5, strconv.Itoa, func(int) int32 { return 0 })
	testkit.Eventually(t, 20*time.Second, func() (bool, string) {
		return b.n.Load() >= 5, fmt.Sprintf("the member taking over a released partition handled %d of 5 records", b.n.Load())
	})
	e.waitCommittedToEnd("g")
	e.checkOutputs(e.readAll(outTopic, true), true)
}

// killableEOS is a member whose network can be cut while its handler holds
// a record in its call: a crash, as far as the broker can tell.
type killableEOS struct {
	sw      *testkit.NetSwitch
	r       *running
	log     handledLog
	holding atomic.Bool
	held    chan struct{}
}

// startKillable starts a member that handles records until hold is set,
// then holds the next one in its call until canceled.
func startKillable(t *testing.T, e *env, txnID string, wait time.Duration) *killableEOS {
	k := &killableEOS{sw: &testkit.NetSwitch{}, held: make(chan struct{})}
	var once atomic.Bool
	o := e.eosOpts("g", txnID, echo(func(ctx context.Context, _ *kgo.Record, _ Meta) error {
		k.log.note()
		if k.holding.Load() {
			if once.CompareAndSwap(false, true) {
				close(k.held)
			}
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}))
	o.TakeoverWait = wait
	o.DrainTimeout = time.Second
	o.ClientOpts = append(o.ClientOpts, kgo.Dialer(k.sw.Dial), kgo.SessionTimeout(time.Second))
	k.r = start(t, o)
	return k
}

// kill holds the next record's call, then cuts the member's network while
// it is held; the member's Run ends in the background.
func (k *killableEOS) kill(t *testing.T, e *env) {
	t.Helper()
	k.holding.Store(true)
	e.produce(1, strconv.Itoa, func(int) int32 { return 0 })
	select {
	case <-k.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the member to be killed took no record to hold")
	}
	k.sw.Cut()
	stopped := make(chan struct{})
	go func() { k.r.stop(t); close(stopped) }()
	t.Cleanup(func() {
		select {
		case <-stopped:
		case <-time.After(60 * time.Second):
			t.Error("the killed member's Run did not return")
		}
	})
}

// waitsAfterAssignment starts a member with TakeoverWait wait and checks
// that its first record runs no sooner than wait after its assignment.
func waitsAfterAssignment(t *testing.T, e *env, txnID string, wait time.Duration) {
	t.Helper()
	var c handledLog
	o := e.eosOpts("g", txnID, echo(func(context.Context, *kgo.Record, Meta) error { c.note(); return nil }))
	o.TakeoverWait = wait
	clock := &assignClock{}
	o.Observer = clock
	start(t, o)
	testkit.Eventually(t, 60*time.Second, func() (bool, string) { return c.first.Load() != 0, "the new owner handled no record" })
	if gap := time.Duration(c.first.Load() - clock.at.Load()); gap < wait-clockSlack {
		t.Errorf("first record handled %v after the assignment, want at least the takeover wait %v", gap, wait)
	}
}

// TestExactlyOnceTakeoverWait: a member killed with a call on the wire
// leaves its claim or a round's commit as the partition's latest commit,
// and its next owner waits TakeoverWait from the assignment before the
// first record runs.
func TestExactlyOnceTakeoverWait(t *testing.T) {
	e := newEnv(t, 1, kfake.GroupMinSessionTimeout(500*time.Millisecond))
	e.produce(5, strconv.Itoa, func(int) int32 { return 0 })
	a := startKillable(t, e, "member-a", noWait)
	testkit.Eventually(t, 20*time.Second, func() (bool, string) { return a.log.n.Load() >= 5, "member a handled too few records" })
	a.kill(t, e)
	waitsAfterAssignment(t, e, "member-b", 2*time.Second)
}

// TestExactlyOnceReleaseDoesNotOutliveIt: a member releases its
// partition; the next owner runs its first record at once (the release),
// and is killed with that record's call on the wire. Its claim replaced
// the release marker, so the third owner waits: the marker said nothing
// of the second owner's calls.
func TestExactlyOnceReleaseDoesNotOutliveIt(t *testing.T) {
	e := newEnv(t, 1, kfake.GroupMinSessionTimeout(500*time.Millisecond))
	e.produce(5, strconv.Itoa, func(int) int32 { return 0 })
	var a handledLog
	oa := e.eosOpts("g", "member-a", echo(func(context.Context, *kgo.Record, Meta) error { a.note(); return nil }))
	oa.TakeoverWait = noWait
	ra := start(t, oa)
	e.waitCommittedToEnd("g")
	if err := ra.stop(t); err != nil {
		t.Fatalf("member a: %v", err)
	}

	// Killed in its first round, before any commit of its own but the
	// claim: without the claim, the release would be the latest commit.
	// kill's record is taken within kill's bound only if the member does
	// not wait.
	b := startKillable(t, e, "member-b", noWait)
	b.kill(t, e)
	waitsAfterAssignment(t, e, "member-c", 2*time.Second)
}

// TestExactlyOnceCutRoundThenStopWaits: a member whose last round was
// aborted with a handler in its call (shutdown's drain timed out) does not
// release the partition, though it stops and leaves the group: its next
// owner waits.
func TestExactlyOnceCutRoundThenStopWaits(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(5, strconv.Itoa, func(int) int32 { return 0 })
	var a handledLog
	var hold atomic.Bool
	held := make(chan struct{})
	var once atomic.Bool
	oa := e.eosOpts("g", "member-a", echo(func(ctx context.Context, _ *kgo.Record, _ Meta) error {
		a.note()
		if hold.Load() {
			if once.CompareAndSwap(false, true) {
				close(held)
			}
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}))
	oa.TakeoverWait = noWait
	oa.DrainTimeout = 200 * time.Millisecond
	ra := start(t, oa)
	testkit.Eventually(t, 20*time.Second, func() (bool, string) { return a.n.Load() >= 5, "member a handled too few records" })
	hold.Store(true)
	e.produce(1, strconv.Itoa, func(int) int32 { return 0 })
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("member a took no record to hold")
	}
	if err := ra.stop(t); err != nil {
		t.Fatalf("member a: %v", err)
	}
	waitsAfterAssignment(t, e, "member-b", 2*time.Second)
}

// TestSetPartitionMetadata: a claim or release marks the partitions it
// means, adds those the session did not poll, and never commits below
// what this member's own transactions committed.
func TestSetPartitionMetadata(t *testing.T) {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = inTopic
	member := "member-id"
	for _, at := range []struct {
		n int32
		o int64
	}{{0, 3}, {1, 7}} {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata = at.n, at.o, &member
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	want := map[tp]int64{{inTopic, 0}: 3, {inTopic, 2}: 4, {"other", 0}: 9, {inTopic, 3}: -1}
	floor := map[tp]int64{{inTopic, 0}: 10, {inTopic, 1}: 8, {inTopic, 2}: 6}
	setPartitionMetadata(req, want, floor, "marker")
	got := map[tp]string{}
	for _, t := range req.Topics {
		for _, rp := range t.Partitions {
			got[tp{t.Topic, rp.Partition}] = fmt.Sprintf("%d %s", rp.Offset, deref(rp.Metadata))
		}
	}
	wantGot := map[tp]string{
		{inTopic, 0}: "10 marker",   // raised to the floor, marked
		{inTopic, 1}: "8 member-id", // raised, not marked
		{inTopic, 2}: "6 marker",    // added at the floor
		{"other", 0}: "9 marker",    // added in a topic of its own
	}
	if !maps.Equal(got, wantGot) {
		t.Errorf("request %v, want %v", got, wantGot)
	}
}

// TestExactlyOnceRebalanceMoveDoesNotWait: a member joins mid-stream and
// takes a partition from a running one. The round in progress is aborted,
// but its handlers finish their calls before the revocation returns, and
// the revoked partition is released: the new owner runs its records at
// once, the old one goes on with the partition it kept without a wait,
// and a read_committed reader sees every output once.
func TestExactlyOnceRebalanceMoveDoesNotWait(t *testing.T) {
	e := newEnv(t, 2)
	const n = 400
	e.produce(n, func(i int) string { return fmt.Sprintf("k%d", i%40) }, func(i int) int32 { return int32(i % 2) })
	work := func(log *handledLog) Handler {
		return echo(func(ctx context.Context, _ *kgo.Record, _ Meta) error {
			log.note()
			select {
			case <-time.After(5 * time.Millisecond): // a partner call
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}
	var a, b handledLog
	oa := e.eosOpts("g", "member-a", work(&a))
	oa.TakeoverWait = noWait
	start(t, oa)
	testkit.Eventually(t, 20*time.Second, func() (bool, string) { return a.n.Load() >= 40, "member a handled too few records" })
	ob := e.eosOpts("g", "member-b", work(&b))
	ob.TakeoverWait = noWait
	start(t, ob)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		return b.n.Load() > 0, "the member that joined handled no record of the partition it took"
	})
	e.waitCommittedToEnd("g")
	e.checkOutputs(e.readAll(outTopic, true), true)
}
