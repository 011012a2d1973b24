package benchkit

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// A process that stops cleanly on SIGTERM, as the bridge does, returned
// once it has set its handler (a SIGTERM before that kills it).
func cleanStopper(t *testing.T, dir, name string) *proc {
	t.Helper()
	p, err := startCleanStopper(t, dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startCleanStopper is cleanStopper for any goroutine: it fails with an
// error, not the test.
func startCleanStopper(t *testing.T, dir, name string) (*proc, error) {
	ready := filepath.Join(dir, name+".ready")
	p, err := startProc(name, []string{"sh", "-c", `trap 'exit 0' TERM; touch "$0"; while :; do sleep 0.02; done`, ready}, nil, nil,
		filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = p.stop(5 * time.Second) })
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := os.Stat(ready); err == nil {
			return p, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s never set its SIGTERM handler", name)
		}
		time.Sleep(5 * time.Millisecond) // polling a file with a deadline
	}
}

func exitedNow(p *proc) bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// TestRollingRestartsInTurn: process i is stopped only once its share of
// the records is answered and every process is ready, and replaced once
// it has exited; exited closes only when the replacements have exited
// too.
func TestRollingRestartsInTurn(t *testing.T) {
	dir := t.TempDir()
	procs := []*proc{cleanStopper(t, dir, "a"), cleanStopper(t, dir, "b")}
	var answered, notReady atomic.Int64 // notReady: replica+1 whose /readyz fails
	polled := make(chan struct{}, 1)
	relaunched := make(chan int, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := startRolling(ctx, procs, rollingOptions{n: 30, log: io.Discard,
		answered: func() int {
			select {
			case polled <- struct{}{}:
			default:
			}
			return int(answered.Load())
		},
		ready: func(_ context.Context, i int) bool { return notReady.Load() != int64(i+1) },
		relaunch: func(i int) (*proc, error) {
			relaunched <- i
			return startCleanStopper(t, dir, fmt.Sprintf("replaced-%d", i))
		}})
	// waitPolls returns once the loop has looked at the count twice more
	// since the call: whatever it decided on the state set before, it
	// has acted on.
	waitPolls := func() {
		t.Helper()
		for range 3 {
			select {
			case <-polled:
			case <-ctx.Done():
				t.Fatal("the restart loop stopped looking")
			}
		}
	}
	nothingRestarted := func(when string) {
		t.Helper()
		waitPolls()
		if len(relaunched) > 0 || exitedNow(procs[0]) {
			t.Fatalf("%s: replica 0 restarted", when)
		}
	}
	restarted := func(want int) {
		t.Helper()
		select {
		case i := <-relaunched:
			if i != want {
				t.Fatalf("replica %d restarted, want %d", i, want)
			}
		case <-ctx.Done():
			t.Fatalf("replica %d never restarted", want)
		}
		if !exitedNow(procs[want]) {
			t.Fatalf("replica %d replaced before it exited", want)
		}
	}

	answered.Store(9) // the first threshold is 30 × 1/3 = 10
	nothingRestarted("below its share")
	notReady.Store(2)
	answered.Store(10)
	nothingRestarted("replica 1 not ready")
	notReady.Store(0)
	restarted(0)
	if exitedNow(procs[1]) {
		t.Fatal("replica 1 stopped with replica 0")
	}
	answered.Store(20)
	restarted(1)

	exited := r.exited()
	all, err := r.wait(procs)
	if err != nil || len(r.started) != 2 || len(all) != 4 {
		t.Fatalf("wait: %d processes, %d restarts, %v; want 4, 2, nil", len(all), len(r.started), err)
	}
	select {
	case <-exited:
		t.Fatal("exited closed while the replacements run")
	default:
	}
	if err := stopAll(all, 5*time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	select {
	case <-exited:
	case <-ctx.Done():
		t.Fatal("exited never closed after every process stopped")
	}
}

// TestRollingStopsWhenAllAnswered: once every record is answered a
// restart would measure nothing, and none happens.
func TestRollingStopsWhenAllAnswered(t *testing.T) {
	procs := []*proc{cleanStopper(t, t.TempDir(), "a")}
	ctx, cancel := context.WithCancel(context.Background()) // only the test's end ends it
	defer cancel()
	r := startRolling(ctx, procs, rollingOptions{n: 10, log: io.Discard,
		answered: func() int { return 10 },
		ready:    func(context.Context, int) bool { return false }, // would hold a restart forever
		relaunch: func(int) (*proc, error) { return nil, fmt.Errorf("restarted") }})
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("still waiting to restart with every record answered")
	}
	all, err := r.wait(procs)
	if err != nil || len(r.started) != 0 || len(all) != 1 || exitedNow(procs[0]) {
		t.Fatalf("%d processes, %d restarts, %v, exited %v; want the one, untouched", len(all), len(r.started), err, exitedNow(procs[0]))
	}
}
