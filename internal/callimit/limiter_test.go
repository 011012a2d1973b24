package callimit

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOptions(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("Max 0 accepted")
	}
	if _, err := New(Options{Max: 4, Initial: -1}); err == nil {
		t.Error("negative Initial accepted")
	}
	var told []int
	l, err := New(Options{Max: 4, OnLimit: func(n int) { told = append(told, n) }})
	if err != nil {
		t.Fatal(err)
	}
	if l.Limit() != 4 || len(told) != 1 || told[0] != 4 {
		t.Errorf("limit %d, told %v: want the initial limit capped at Max (4), told once", l.Limit(), told)
	}
	l, _ = New(Options{Max: 64})
	if l.Limit() != DefaultInitial {
		t.Errorf("limit %d at start, want DefaultInitial", l.Limit())
	}
}

// A fixed Limiter is a semaphore of Max: no signal moves it.
func TestFixed(t *testing.T) {
	l, err := New(Options{Max: 2, Fixed: true})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		c, ok := l.TryAcquire()
		if !ok {
			t.Fatal("no slot")
		}
		c.Done(PushBack)
	}
	a, _ := l.TryAcquire()
	b, _ := l.TryAcquire()
	if _, ok := l.TryAcquire(); ok || l.Limit() != 2 || l.InUse() != 2 {
		t.Fatalf("limit %d, in use %d: want a third call refused at 2", l.Limit(), l.InUse())
	}
	a.Done(Success)
	a.Done(Success) // a second Done is ignored
	b.Done(Success)
	if l.InUse() != 0 {
		t.Fatalf("in use %d after both ended", l.InUse())
	}
}

// Acquire waits for a slot in order, gives up with its context, and a
// waiter that gave up does not hold the ones behind it.
func TestAcquireWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := New(Options{Max: 1, Fixed: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		first, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		gaveUp := make(chan error, 1)
		go func() {
			_, err := l.Acquire(short)
			gaveUp <- err
		}()
		got := make(chan *Call, 1)
		synctest.Wait()
		go func() {
			c, err := l.Acquire(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- c
		}()
		synctest.Wait()
		time.Sleep(2 * time.Second) // fake time: the first waiter's deadline passes
		if err := <-gaveUp; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a waiter past its deadline: %v", err)
		}
		select {
		case <-got:
			t.Fatal("a waiter got a slot while the only one was held")
		default:
		}
		first.Done(Success)
		c := <-got
		if l.InUse() != 1 {
			t.Fatalf("in use %d, want the second waiter's 1", l.InUse())
		}
		c.Done(Success)
		if _, err := l.Acquire(canceled()); !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire with an ended context: %v", err)
		}
	})
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// A push-back answered at once keeps its slot until a round trip has
// passed since its call began; the limit falls, the gauge is told, and a
// large change is logged once.
func TestPushBackHoldsItsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.InfoLevel)
		var gauge int
		l, err := New(Options{Max: 64, Initial: 16, Logger: zap.New(core), OnLimit: func(n int) { gauge = n }})
		if err != nil {
			t.Fatal(err)
		}
		// A round trip of 100 ms measured on successes, and slow start's
		// first 32 calls, at the initial limit (halved for the first
		// 100 ms: the fake clock starts at a dip), with no push-back: no
		// noise. Then it grows.
		for range 3 {
			roundOf(l, 100*time.Millisecond, Success)
		}
		before := l.Limit()
		if before <= 16 {
			t.Fatalf("limit %d after slow start's first 40 calls, want growth", before)
		}
		c, _ := l.TryAcquire()
		c.Done(PushBack) // at once
		if l.InUse() != 1 {
			t.Fatalf("in use %d right after a fast push-back, want its slot held", l.InUse())
		}
		if l.Limit() >= before || gauge != l.Limit() {
			t.Fatalf("limit %d (gauge %d) after the first push-back, want a cut from slow start's %d", l.Limit(), gauge, before)
		}
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		if l.InUse() != 0 {
			t.Fatalf("in use %d a round trip later", l.InUse())
		}
		// An outage: every call refused, round after round, down to 1.
		for l.Limit() > 1 {
			var cs []*Call
			for {
				c, ok := l.TryAcquire()
				if !ok {
					break
				}
				cs = append(cs, c)
			}
			time.Sleep(100 * time.Millisecond)
			for _, c := range cs {
				c.Done(PushBack)
			}
		}
		if n := logs.FilterMessage("partner call concurrency limit changed").Len(); n < 2 || n > 5 {
			t.Errorf("%d log lines from %d to 1, want one per halving", n, before)
		}
	})
}

// roundOf takes every slot the limit allows and, after rtt, ends them with
// s one by one, taking the slots each end frees at once (a client with a
// backlog): the next round's calls.
func roundOf(l *Limiter, rtt time.Duration, s Signal) {
	var calls []*Call
	take := func() {
		for {
			c, ok := l.TryAcquire()
			if !ok {
				return
			}
			calls = append(calls, c)
		}
	}
	take()
	time.Sleep(rtt)
	ending := calls
	calls = nil
	for _, c := range ending {
		c.Done(s)
		take()
	}
	for _, c := range calls {
		c.Done(Ignore) // the next round's, never sent
	}
}

// Slow start holds the initial limit until its first calls have ended,
// ignored ones included (a write whose gate closed while it waited for
// its slot gives it back with Ignore, as at a start-up that waits for
// the group): then it grows.
func TestSlowStartEndsWithIgnoredCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := New(Options{Max: 64, Initial: 8})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond) // past the dip the fake clock starts at
		for range 2 {
			roundOf(l, 10*time.Millisecond, Success)
		}
		if l.Limit() != 8 {
			t.Fatalf("limit %d while slow start measures, want the initial 8", l.Limit())
		}
		for range 4 {
			roundOf(l, 10*time.Millisecond, Ignore)
		}
		for range 3 {
			roundOf(l, 10*time.Millisecond, Success)
		}
		if l.Limit() <= 16 {
			t.Fatalf("limit %d after its first 32 calls ended (ignored ones among them) and three round trips of successes, want slow start's growth", l.Limit())
		}
	})
}

// A call its caller never ends does not hold slow start at the initial
// limit: the measurement is taken once twice its calls have started.
func TestSlowStartOutlivesALostCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := New(Options{Max: 64, Initial: 8})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond) // past the dip the fake clock starts at
		lost, _ := l.TryAcquire()
		defer lost.Done(Ignore)
		for range 12 {
			roundOf(l, 10*time.Millisecond, Success)
		}
		if l.Limit() <= 8 {
			t.Fatalf("limit %d with one call never ended, want slow start's growth", l.Limit())
		}
	})
}
