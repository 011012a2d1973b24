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
	within(t, "stop", l.stop)
}
