package sim

import (
	"sync/atomic"
	"testing"
	"time"
)

// within fails t unless f returns within 5s: a broken count of writes
// landing makes flush and stop wait for good, and the test must fail, not
// hang.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s did not return within 5s", what)
	}
}

// Whoever reaches a late write first (its timer, a flush, another flush)
// applies it; the others find nothing, and flush and stop still return.
func TestLateAppliesExactlyOnce(t *testing.T) {
	var l lateApplies
	var applied atomic.Int32
	l.add(time.Hour, func() { applied.Add(1) })
	l.add(time.Hour, func() { applied.Add(1) })
	l.fire(0) // as its timer would
	l.fire(0) // as a flush that listed it before the timer took it would
	within(t, "flush", l.flush)
	within(t, "flush", l.flush)
	if got := applied.Load(); got != 2 {
		t.Fatalf("applied %d times, want 2 (each write once)", got)
	}
	l.add(time.Hour, func() { applied.Add(1) })
	within(t, "stop", l.stop)
	l.add(time.Hour, func() { applied.Add(1) })
	l.fire(2)
	within(t, "flush", l.flush)
	if pending, dropped := l.counts(); applied.Load() != 2 || pending != 0 || dropped != 2 {
		t.Fatalf("after stop: applied %d, pending %d, dropped %d; want 2, 0, 2", applied.Load(), pending, dropped)
	}
}

// A flush (and stop) returns only once a write its timer took just before
// has landed, so that what a test reads after a flush is final.
func TestLateFlushWaitsForLanding(t *testing.T) {
	for _, name := range []string{"flush", "stop"} {
		t.Run(name, func(t *testing.T) {
			var l lateApplies
			started, release := make(chan struct{}), make(chan struct{})
			var applied atomic.Int32
			l.add(time.Hour, func() {
				close(started)
				<-release
				applied.Add(1)
			})
			timerDone := make(chan struct{})
			go func() {
				defer close(timerDone)
				l.fire(0) // as its timer would
			}()
			within(t, "the write starting", func() { <-started })
			returned := make(chan struct{})
			go func() {
				defer close(returned)
				if name == "flush" {
					l.flush()
				} else {
					l.stop()
				}
			}()
			// A correct flush cannot return here; a broken one is caught
			// unless it is slower than this.
			select {
			case <-returned:
				close(release)
				t.Fatalf("%s returned while a write was landing", name)
			case <-time.After(50 * time.Millisecond):
			}
			close(release)
			within(t, name, func() { <-returned })
			within(t, "the timer", func() { <-timerDone })
			if applied.Load() != 1 {
				t.Fatalf("applied %d, want 1", applied.Load())
			}
		})
	}
}
