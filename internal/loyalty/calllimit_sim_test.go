package loyalty_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/callimit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// The adaptive call limit over HTTP against the simulator with a capacity
// of 6: 48 callers start it at 48, and the limit shrinks to about the
// capacity; an outage (every call 503) takes it to the bottom; once the
// partner is back it grows again. Polls with deadlines, asserts no timing.
func TestSimCallLimitShrinksAndRecovers(t *testing.T) {
	const capacity, callers = 6, 48
	var limit atomic.Int64
	lim, err := callimit.New(callimit.Options{Max: callers, Initial: callers, OnLimit: func(n int) { limit.Store(int64(n)) }})
	if err != nil {
		t.Fatal(err)
	}
	e := newSimEnv(t, simConfig{
		simOpts: sim.Options{Capacity: capacity, Faults: sim.Faults{Latency: 10 * time.Millisecond}},
		mod: func(o *loyalty.Options) {
			o.Calls = lim
			o.Retry.MaxAttempts = 1 // each caller sends again at once: load, not retries
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, _, _ = e.client.CustomerInfo(ctx, sim.MemberID(1+i%20))
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: limit %d after 30 s", what, limit.Load())
			}
			time.Sleep(5 * time.Millisecond) // polling, not synchronising
		}
	}
	waitFor("shrinks to the capacity", func() bool { return limit.Load() <= 2*capacity })
	refusedBefore := e.sim.OverCapacity("user-profile")
	if refusedBefore == 0 {
		t.Fatal("the simulator refused nothing: the limit never met the capacity")
	}
	e.sim.SetFaults(sim.Faults{Latency: 10 * time.Millisecond, ErrorRates: map[int]float64{503: 1}})
	waitFor("shrinks to 1 in an outage", func() bool { return limit.Load() == 1 })
	e.sim.SetFaults(sim.Faults{Latency: 10 * time.Millisecond})
	waitFor("recovers after the outage", func() bool { return limit.Load() >= capacity-1 })
	if lim.Max() != callers {
		t.Fatalf("Max %d", lim.Max())
	}
}
