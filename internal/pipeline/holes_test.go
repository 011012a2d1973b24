package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// holdFirst is the handler of the drain tests: in each partition, record 0
// (key "k<partition>") waits until release is closed, as a record waiting
// out a Retry-After; record 1 has the same key and so waits behind it
// (the hole); records 2 to n-1 have keys of their own and are done at
// once. later counts those done.
func holdFirst(release <-chan struct{}, later *atomic.Int32) Handler {
	return echo(func(ctx context.Context, r *kgo.Record, _ Meta) error {
		switch {
		case r.Offset == 0:
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		case r.Offset > 1:
			later.Add(1)
		}
		return nil
	})
}

// The drain tests' input: holesPerPart records in each of holeParts
// partitions, keyed by holeKeys.
const holeParts, holesPerPart = 2, 10

func holeEnv(t *testing.T) *env {
	e := newEnv(t, holeParts)
	e.produce(holeParts*holesPerPart, func(i int) string { return holeKeys(i, holeParts) }, func(i int) int32 { return int32(i % holeParts) })
	return e
}

// laterDone waits until every partition's records after the first two
// are done.
func laterDone(t *testing.T, later *atomic.Int32) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		return later.Load() == holeParts*(holesPerPart-2), fmt.Sprintf("%d later records done", later.Load())
	})
}

func holeKeys(i, parts int) string {
	if p, off := i%parts, i/parts; off > 1 {
		return fmt.Sprintf("k%d-%d", p, off)
	}
	return fmt.Sprintf("k%d", i%parts)
}

// revokeSignal is an Observer that closes revoked at the first revoke.
type revokeSignal struct {
	NopObserver
	once    sync.Once
	revoked chan struct{}
}

func (s *revokeSignal) Assigned(_ string, _ []int32, assigned, _ bool) {
	if !assigned {
		s.once.Do(func() { close(s.revoked) })
	}
}

// TestRevokeDrainRunsTheHoles: a partition is revoked while its record 0
// waits and record 1 (same key) waits behind it, with the later records
// done. The drain runs record 1 once record 0 is done, so the final commit
// passes the later records and the next owner redoes none of them: every
// input has exactly one output. Before, record 1 stayed undone, the commit
// stopped at it, and the next owner redid (and answered again) every
// record after it.
func TestRevokeDrainRunsTheHoles(t *testing.T) {
	e := holeEnv(t)
	release := make(chan struct{})
	var later atomic.Int32
	o := e.opts("g", holdFirst(release, &later))
	signal := &revokeSignal{revoked: make(chan struct{})}
	o.Observer = signal
	start(t, o)
	laterDone(t, &later)

	second := o
	second.Observer = nil
	start(t, second)
	select {
	case <-signal.revoked: // the first member drains the partition it gives up
	case <-time.After(30 * time.Second):
		t.Fatal("the second member's join revoked nothing")
	}
	close(release)
	e.waitCommittedToEnd("g")
	e.checkOutputs(e.outputs(outTopic, holeParts*holesPerPart), true)
}

// TestShutdownDrainRunsTheHoles: the same at shutdown. The member stops
// while record 0 waits and record 1 waits behind it; its drain runs record
// 1 too, and its final commit reaches the end of both partitions.
func TestShutdownDrainRunsTheHoles(t *testing.T) {
	e := holeEnv(t)
	release := make(chan struct{})
	var later atomic.Int32
	p, err := New(e.opts("g", holdFirst(release, &later)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	laterDone(t, &later)
	cancel()
	testkit.Eventually(t, 30*time.Second, func() (bool, string) { return p.isClosing(), "not draining yet" })
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return")
	}
	e.waitCommittedToEnd("g")
	e.checkOutputs(e.outputs(outTopic, holeParts*holesPerPart), true)
}

// TestFailureDrainsWithoutHoles: a record that stops Run (no fallback)
// frees its key's lane, and the next record of the key is then below the
// highest dispatched offset; a failing pipeline dispatches nothing, so the
// drain must not wait for it: Run returns without a drain timeout.
func TestFailureDrainsWithoutHoles(t *testing.T) {
	e := newEnv(t, 1)
	// Keys a, b, c … with "a" at offsets 0 and 1: 0 fails while b, c …
	// run, and 1 waits behind it.
	e.produce(20, func(i int) string {
		if i < 2 {
			return "a"
		}
		return strconv.Itoa(i)
	}, func(int) int32 { return 0 })
	later := make(chan struct{})
	var done atomic.Int32
	o := e.opts("g", echo(func(ctx context.Context, r *kgo.Record, _ Meta) error {
		if r.Offset == 0 {
			select { // fail once later records ran
			case <-later:
			case <-ctx.Done():
				return ctx.Err()
			}
			return errTest
		}
		if r.Offset > 1 && done.Add(1) == 18 {
			close(later)
		}
		return nil
	}))
	core, logs := observer.New(zap.InfoLevel)
	o.Logger = zap.New(core)
	o.DrainTimeout = time.Minute
	err := start(t, o).wait(t)
	if !errors.Is(err, errTest) {
		t.Fatalf("Run = %v, want the handler's error", err)
	}
	if n := logs.FilterMessageSnippet("drain timed out").Len(); n != 0 {
		t.Errorf("the drain waited for a record a failing pipeline never runs (%d drain timeouts)", n)
	}
}
