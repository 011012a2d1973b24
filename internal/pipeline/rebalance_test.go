package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// TestRebalance: a second member joins mid-stream; revoked partitions are
// drained and committed before they move, so every record has an output and
// the commits reach the end. Member 1 holds its records past the first 300
// until its revocation starts, so the rebalance is mid-stream by
// construction, with thousands of records left for member 2: a run in which
// it was not fails.
func TestRebalance(t *testing.T) {
	e := newEnv(t, 4)
	const n, before = 4000, 300
	e.produce(n, func(i int) string { return fmt.Sprintf("k%d", i%101) }, func(i int) int32 { return int32(i % 4) })
	gate := make(chan struct{})
	var once sync.Once
	open := func(int32) { once.Do(func() { close(gate) }) }
	defer open(0)
	var taken atomic.Int32
	work := func(context.Context, *kgo.Record, Meta) error {
		if taken.Add(1) > before {
			<-gate // ignores ctx: only member 1's revocation opens it
		}
		return nil
	}
	rec1, rec2 := &releaseOnRevoke{recorder: newRecorder(), free: open}, newRecorder()
	o1 := e.opts("g", echo(work))
	o1.Observer = rec1
	o1.MaxInFlight = 8
	o2 := o1
	o2.Observer = rec2
	r1 := start(t, o1)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		d := rec1.doneCount(Processed)
		return d >= before, fmt.Sprintf("member 1 processed %d", d)
	})
	r2 := start(t, o2)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		return rec2.owns() > 0, "member 2 was never assigned a partition"
	})
	got := e.outputs(outTopic, n)
	e.checkOutputs(got, false)
	e.waitCommittedToEnd("g")
	dups := 0
	for _, c := range got {
		dups += c - 1
	}
	p1, p2 := rec1.doneCount(Processed), rec2.doneCount(Processed)
	t.Logf("member 1 processed %d, member 2 %d, duplicate outputs %d", p1, p2, dups)
	if p2 == 0 || p1 >= n {
		t.Errorf("the rebalance was not mid-stream: member 1 processed %d, member 2 %d of %d", p1, p2, n)
	}
	for i, r := range []*running{r1, r2} {
		if err := r.stop(t); err != nil {
			t.Errorf("member %d: %v", i+1, err)
		}
	}
}

// TestShutdownDrains: cancel while a record is in flight; Run waits for it
// and commits past it. A restart resumes from the commit without loss.
func TestShutdownDrains(t *testing.T) {
	e := newEnv(t, 1)
	const n, held = 300, 100
	e.produce(n, strconv.Itoa, func(int) int32 { return 0 })
	release := make(chan struct{})
	started := make(chan struct{})
	rec := newRecorder()
	o := e.opts("g", echo(func(ctx context.Context, r *kgo.Record, _ Meta) error {
		if r.Offset == held {
			close(started)
			<-release // deliberately ignores ctx: shutdown must wait for it
		}
		return nil
	}))
	o.Observer = rec
	o.Mode = ordering.Partition
	r := start(t, o)
	<-started
	r.cancel()
	close(release)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if a := rec.doneCount(Abandoned); a != 0 {
		t.Errorf("%d records abandoned; the drain should have finished them", a)
	}
	got := e.committed("g")
	if got[0] < held+1 {
		t.Fatalf("committed %d after shutdown; the drained record %d was not committed", got[0], held)
	}
	t.Logf("committed %d of %d at shutdown", got[0], n)

	start(t, e.opts("g", echo(nil)))
	e.checkOutputs(e.outputsCovering(outTopic), false)
	e.waitCommittedToEnd("g")
}

// TestShutdownDrainTimeout: a record that does not finish within
// DrainTimeout is abandoned and not committed.
func TestShutdownDrainTimeout(t *testing.T) {
	e := newEnv(t, 1)
	const n, stuck = 50, 20
	e.produce(n, strconv.Itoa, func(int) int32 { return 0 })
	rec := newRecorder()
	o := e.opts("g", echo(func(ctx context.Context, r *kgo.Record, _ Meta) error {
		if r.Offset == stuck {
			<-ctx.Done() // only the drain timeout ends it
			return ctx.Err()
		}
		return nil
	}))
	o.Observer = rec
	o.DrainTimeout = 200 * time.Millisecond
	core, logs := observer.New(zap.InfoLevel)
	o.Logger = zap.New(core)
	r := start(t, o)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		d := rec.doneCount(Processed)
		return d == n-1, fmt.Sprintf("processed %d", d)
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if a := rec.doneCount(Abandoned); a != 1 {
		t.Errorf("abandoned %d records, want 1", a)
	}
	if got := e.committed("g"); got[0] != stuck {
		t.Errorf("committed %d, want %d (the stuck record)", got[0], stuck)
	}
	// One line for the partition left behind, saying where and why.
	left := logs.FilterMessageSnippet("partition left with uncommitted records").All()
	if len(left) != 1 {
		t.Fatalf("%d lines about partitions left behind, want 1", len(left))
	}
	f := left[0].ContextMap()
	if f["partition"] != int32(0) || f["from_offset"] != int64(stuck) || f["uncommitted"] != int64(n-stuck) ||
		!strings.Contains(f["reason"].(string), "drain timed out") {
		t.Errorf("left-behind line: %v", f)
	}
}

// TestFallback: handler errors and panics become fallback outputs; the
// commits still reach the end.
// TestRevokeDrains: records in flight on a revoked partition finish before
// the partition moves, and their offsets are committed first, so the new
// owner neither loses nor repeats anything, nor guards anything.
func TestRevokeDrains(t *testing.T) {
	e := newEnv(t, 2)
	const n, blocked = 400, 5
	e.produce(n, strconv.Itoa, func(i int) int32 { return int32(i % 2) })
	release := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var once [2]sync.Once
	free := func(p int32) { once[p].Do(func() { close(release[p]) }) }
	defer free(0)
	defer free(1)
	rec1 := &releaseOnRevoke{recorder: newRecorder(), free: free}
	o1 := e.opts("g", echo(func(_ context.Context, r *kgo.Record, _ Meta) error {
		if r.Offset == blocked {
			<-release[r.Partition] // ignores ctx: only the drain may wait for it
		}
		return nil
	}))
	o1.Observer = rec1
	o1.MaxInFlight = 16
	o1.MaxInFlightPerPartition = 8
	o1.MaxBufferedPerPartition = 32 // member 1 stops near offset 40: member 2 has work
	start(t, o1)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		got := e.committed("g")
		return got[0] == blocked && got[1] == blocked, fmt.Sprintf("committed %v", got)
	})

	var mu sync.Mutex
	var fresh []string
	o2 := e.opts("g", echo(func(_ context.Context, r *kgo.Record, m Meta) error {
		if m.Fresh {
			mu.Lock()
			fresh = append(fresh, coord(r))
			mu.Unlock()
		}
		return nil
	}))
	rec2 := newRecorder()
	o2.Observer = rec2
	start(t, o2)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		return rec2.owns() > 0, "member 2 was never assigned a partition"
	})
	free(0)
	free(1)
	e.checkOutputs(e.outputs(outTopic, n), true)
	e.waitCommittedToEnd("g")
	if a := rec1.doneCount(Abandoned); a != 0 {
		t.Errorf("member 1 abandoned %d records; the revoke drain should have finished them", a)
	}
	// Released comes after the drain: the ledger forgets a partition
	// there, which the draining records still read.
	released := 0
	for p := range int32(2) {
		n, unreleased := rec1.releasedCount(p)
		released += n
		if unreleased != 0 {
			t.Errorf("member 1 released a partition with %d records still running", unreleased)
		}
	}
	if released == 0 {
		t.Error("member 1 was revoked but never released a partition")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range fresh {
		if off, _ := strconv.Atoi(c[strings.LastIndex(c, "/")+1:]); off <= blocked {
			t.Errorf("member 2 received %s, at or below the drained record", c)
		}
	}
	// The drain finished everything member 1 had dispatched, so its last
	// commit lowered the dispatch horizon to the commit point: nothing
	// is uncertain, and member 2 guards nothing.
	if len(fresh) != 0 {
		t.Errorf("member 2 marked %d records Fresh after a drained revoke, e.g. %s", len(fresh), fresh[0])
	}
}

// releaseOnRevoke frees a partition's blocked record when its revocation
// starts.
type releaseOnRevoke struct {
	*recorder
	free func(int32)
}

func (r *releaseOnRevoke) Assigned(topic string, parts []int32, assigned, lost bool) {
	r.recorder.Assigned(topic, parts, assigned, lost)
	if !assigned {
		for _, p := range parts {
			r.free(p)
		}
	}
}

// TestGateShutdown: a gate that never opens does not keep Run from
// returning.
func TestGateShutdown(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(10, strconv.Itoa, func(int) int32 { return 0 })
	rec := newRecorder()
	g := &gate{open: make(chan struct{})}
	o := e.opts("g", echo(nil))
	o.Gate = g
	o.Observer = rec
	r := start(t, o)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.buffered == 10 && g.waits.Load() > 0, fmt.Sprintf("buffered %d", rec.buffered)
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := e.committed("g"); got[0] != 0 {
		t.Errorf("committed %d with nothing processed", got[0])
	}
}

type brokenGate struct{}

func (brokenGate) Ready(context.Context) error { return errors.New("gate broken") }

// TestBrokenGateStops: a gate error other than cancellation stops Run.
func TestBrokenGateStops(t *testing.T) {
	e := newEnv(t, 1)
	o := e.opts("g", echo(nil))
	o.Gate = brokenGate{}
	err := start(t, o).wait(t)
	if err == nil || !strings.Contains(err.Error(), "gate broken") {
		t.Fatalf("Run = %v, want the gate's error", err)
	}
}

// TestLostPartition: when the group says this member's generation is gone,
// the partitions are dropped without committing, handlers of the lost
// partitions see their context canceled, and after rejoining the records
// are processed again, the first ones marked Fresh.
func TestLostPartition(t *testing.T) {
	e := newEnv(t, 1)
	const n, stuck = 100, 5
	e.produce(n, strconv.Itoa, func(int) int32 { return 0 })
	var attempts atomic.Int32
	var freshRetry atomic.Bool
	rec := newRecorder()
	lost := make(chan struct{})
	o := e.opts("g", echo(func(ctx context.Context, r *kgo.Record, m Meta) error {
		if r.Offset != stuck {
			return nil
		}
		if attempts.Add(1) == 1 {
			<-ctx.Done() // canceled when the partition is lost
			return ctx.Err()
		}
		freshRetry.Store(m.Fresh)
		return nil
	}))
	o.Observer = &lostSignal{recorder: rec, lost: lost}
	start(t, o)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		d := rec.doneCount(Processed)
		return d == n-1 && e.committed("g")[0] == stuck, fmt.Sprintf("processed %d, committed %v", d, e.committed("g"))
	})

	// Every heartbeat until the loss, not just the next one: the
	// pipeline's lease sends heartbeats of its own (lease.go).
	e.c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		select {
		case <-lost:
			return nil, nil, false
		default:
			e.c.KeepControl()
		}
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.IllegalGeneration.Code
		return resp, nil, true
	})
	select {
	case <-lost:
	case <-time.After(30 * time.Second):
		t.Fatal("the partition was never reported lost")
	}
	e.checkOutputs(e.outputsCovering(outTopic), false)
	e.waitCommittedToEnd("g")
	if a := rec.doneCount(Abandoned); a < 1 {
		t.Errorf("abandoned %d records; the stuck record's handler should have been canceled", a)
	}
	if attempts.Load() != 2 || !freshRetry.Load() {
		t.Errorf("stuck record handled %d times, retry fresh %v; want 2, true", attempts.Load(), freshRetry.Load())
	}
}

type lostSignal struct {
	*recorder
	lost chan struct{}
	once sync.Once
}

func (l *lostSignal) Assigned(topic string, parts []int32, assigned, lost bool) {
	l.recorder.Assigned(topic, parts, assigned, lost)
	if lost {
		l.once.Do(func() { close(l.lost) })
	}
}
