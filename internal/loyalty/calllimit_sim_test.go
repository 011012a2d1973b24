package loyalty_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/callimit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
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

// BenchmarkSimCapacityReplicas measures the capacity figure over
// HTTP: replicas, each its own client and adaptive limit (up to 256),
// share a simulator that handles 32 requests at once at 10 ms (3,200
// calls/s) and refuses the excess with 503 and Retry-After. Every replica
// has 128 callers that send again at once, as a backlog does. Reported,
// over the last 20 s of 30 (the steady state): calls/s together
// (answered, not refused), the share refused, and each replica's share of
// the answered calls; and the share refused and the replicas' shares over
// the first 10 s, started together (the start-up: slow starts overlap,
// and the first noise floor comes from them until the first dip).
//
//	go test -run '^$' -bench SimCapacityReplicas -benchtime 1x ./internal/loyalty
func BenchmarkSimCapacityReplicas(b *testing.B) {
	for _, replicas := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			for b.Loop() {
				benchReplicas(b, replicas)
			}
		})
	}
}

func benchReplicas(b *testing.B, replicas int) {
	const capacity, callers, warmUp, span = 32, 128, 10 * time.Second, 20 * time.Second
	e := newSimEnv(b, simConfig{simOpts: sim.Options{Capacity: capacity, Faults: sim.Faults{Latency: 10 * time.Millisecond}}})
	clients := make([]*loyalty.Client, replicas)
	limits := make([]*callimit.Limiter, replicas)
	for i := range clients {
		hc, err := loyalty.NewHTTPClient(loyalty.TransportOptions{MaxConns: 256})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(hc.CloseIdleConnections)
		grant, err := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: e.srv.URL, ClientID: sim.DefaultClientID,
			ClientSecret: sim.DefaultClientSecret, Username: sim.DefaultUsername, Password: sim.DefaultPassword, HTTPClient: hc})
		if err != nil {
			b.Fatal(err)
		}
		if limits[i], err = callimit.New(callimit.Options{Max: 256}); err != nil {
			b.Fatal(err)
		}
		if clients[i], err = loyalty.New(loyalty.Options{BaseURL: e.srv.URL, Tokens: tokensource.NewCache(grant, tokensource.CacheOptions{}),
			HTTPClient: hc, Calls: limits[i], Retry: loyalty.RetryPolicy{MaxAttempts: 1}}); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), warmUp+span)
	defer cancel()
	answered := make([]atomic.Int64, replicas)
	early := make([]atomic.Int64, replicas)
	var measuring atomic.Bool
	var wg sync.WaitGroup
	for r, c := range clients {
		for i := range callers {
			wg.Go(func() {
				for ctx.Err() == nil {
					if _, _, err := c.CustomerInfo(ctx, sim.MemberID(1+i%20)); err == nil {
						if measuring.Load() {
							answered[r].Add(1)
						} else {
							early[r].Add(1)
						}
					}
				}
			})
		}
	}
	time.Sleep(warmUp) // the span is measured, not synchronised with
	refusedBefore := e.sim.OverCapacity("user-profile")
	measuring.Store(true)
	wg.Wait()
	var earlyTotal int64
	for r := range early {
		earlyTotal += early[r].Load()
	}
	b.ReportMetric(100*float64(refusedBefore)/float64(int64(refusedBefore)+earlyTotal), "%refused-first-10s")
	for r := range early {
		b.Logf("replica %d: %.2f of the answered calls in the first 10 s", r, float64(early[r].Load())/float64(earlyTotal))
	}
	var total int64
	for r := range answered {
		total += answered[r].Load()
	}
	refused := e.sim.OverCapacity("user-profile") - refusedBefore
	b.ReportMetric(float64(total)/span.Seconds(), "calls/s")
	b.ReportMetric(100*float64(refused)/float64(int64(refused)+total), "%refused")
	for r := range answered {
		b.Logf("replica %d: %.2f of the answered calls, limit %d at the end", r, float64(answered[r].Load())/float64(total), limits[r].Limit())
	}
}
