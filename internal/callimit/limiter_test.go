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
		// A round trip of 100 ms measured on successes.
		var calls []*Call
		for range 16 {
			c, _ := l.TryAcquire()
			calls = append(calls, c)
		}
		time.Sleep(100 * time.Millisecond)
		for _, c := range calls {
			c.Done(Success)
		}
		c, _ := l.TryAcquire()
		c.Done(PushBack) // at once
		if l.InUse() != 1 {
			t.Fatalf("in use %d right after a fast push-back, want its slot held", l.InUse())
		}
		if l.Limit() >= 32 || gauge != l.Limit() {
			t.Fatalf("limit %d (gauge %d) after the first push-back, want a cut from slow start's 32", l.Limit(), gauge)
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
			t.Errorf("%d log lines from 32 to 1, want one per halving", n)
		}
	})
}
