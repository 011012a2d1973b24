package pipeline

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestWaitFreesTheSlot: with one slot, a record waiting in Wait lets a
// record of another key run meanwhile, while the next record of its own key
// waits behind it: the slot is freed, the lane is not.
func TestWaitFreesTheSlot(t *testing.T) {
	e := newEnv(t, 1)
	keys := []string{"a", "b", "a"} // offsets 0, 1, 2
	e.produce(len(keys), func(i int) string { return keys[i] }, func(int) int32 { return 0 })
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	var otherDone atomic.Bool
	o := e.opts("g", echo(func(ctx context.Context, r *kgo.Record, _ Meta) error {
		switch r.Offset {
		case 0:
			note("start 0")
			deadline := time.Now().Add(30 * time.Second)
			for !otherDone.Load() { // waiting out "retries" until offset 1 ran
				if time.Now().After(deadline) {
					return errors.New("offset 1 never ran while offset 0 waited: the slot was not freed")
				}
				if err := Wait(ctx, 5*time.Millisecond); err != nil {
					return err
				}
			}
			note("end 0")
		case 1:
			note("run 1")
			otherDone.Store(true)
		case 2:
			note("run 2")
		}
		return nil
	}))
	o.MaxInFlight = 1
	o.Fallback = func(_ *kgo.Record, cause error) ([]*kgo.Record, error) {
		t.Error(cause)
		return nil, nil
	}
	start(t, o)
	e.waitCommittedToEnd("g")
	mu.Lock()
	defer mu.Unlock()
	want := []string{"start 0", "run 1", "end 0", "run 2"}
	if len(order) != len(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
}

// TestWaitOutsideAHandler is a plain, cancelable wait.
func TestWaitOutsideAHandler(t *testing.T) {
	if err := Wait(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Wait(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a canceled context = %v", err)
	}
}

// TestWaitReturnsAboveTheLimit: a record coming back from Wait gets its slot
// at once, even when every slot is taken by handlers waiting on it (as
// records blocked on a circuit breaker wait on the probe that retries):
// waiting for a slot would deadlock.
func TestWaitReturnsAboveTheLimit(t *testing.T) {
	e := newEnv(t, 1)
	keys := []string{"a", "b"}
	e.produce(len(keys), func(i int) string { return keys[i] }, func(int) int32 { return 0 })
	waiting, resumed := make(chan struct{}), make(chan struct{})
	o := e.opts("g", echo(func(ctx context.Context, r *kgo.Record, _ Meta) error {
		switch r.Offset {
		case 0: // the probe: waits to retry while offset 1 takes the only slot
			close(waiting)
			if err := Wait(ctx, 20*time.Millisecond); err != nil {
				return err
			}
			close(resumed)
		case 1: // blocked on the probe, holding the only slot
			<-waiting
			select {
			case <-resumed:
			case <-time.After(30 * time.Second):
				return errors.New("offset 0 never came back from Wait: it waited for the slot offset 1 holds")
			}
		}
		return nil
	}))
	o.MaxInFlight = 1
	o.Fallback = func(_ *kgo.Record, cause error) ([]*kgo.Record, error) {
		t.Error(cause)
		return nil, nil
	}
	start(t, o)
	e.waitCommittedToEnd("g")
}
