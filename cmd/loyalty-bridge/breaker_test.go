package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// With the breaker off, `run` against a partner answering 503 holds
// nothing: every record spends its attempts (all of them reach the
// partner) and ends as an error event, and the circuit never opens.
func TestRunWithBreakerOff(t *testing.T) {
	s := newReplayStack(t)
	s.st.Sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, RetryAfter: sim.NoRetryAfter, Endpoints: []string{sim.EndpointAccrual}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errs testkit.SyncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errs, lookup: s.lookup}, []string{"run",
			"--breaker-failures", "off", "--record-attempts", "2", "--record-backoff", "1ms", "--api-max-attempts", "1", "--log-level", "info"})
	}()
	failing := ids("down", 16) // 32 failed attempts: far more than the breaker's default 20 in a row
	s.produce(t, nil, failing...)
	errors := s.replies(t, codec.DefaultPurchaseTopic+".error", len(failing))
	cancel()
	if code := <-exit; code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errs.String())
	}
	all, _ := byKey(errors)
	for _, id := range failing {
		if all[id] != 1 {
			t.Errorf("%s: %d error events, want 1", id, all[id])
		}
	}
	if n := s.st.Sim.Calls(sim.EndpointAccrual, 503); n != 2*len(failing) {
		t.Errorf("%d accrual calls answered 503, want %d (every attempt of every record)", n, 2*len(failing))
	}
	if strings.Contains(errs.String(), "circuit state changed") {
		t.Errorf("the circuit changed state with the breaker off:\n%s", errs.String())
	}
}

// With the breaker off, a replay against a failing partner ends: each
// record spends its attempts and ends as a TRANSIENT_EXHAUSTED error
// event, and the replay exits 1 saying they are still failing.
func TestReplayWithBreakerOff(t *testing.T) {
	s := newOpsStack(t, sim.Options{})
	s.produce(t, nil, ids("down", 8)...)
	s.st.Sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, RetryAfter: sim.NoRetryAfter, Endpoints: []string{sim.EndpointAccrual}})
	start := time.Now()
	code, out, errs := s.cli(t, "replay", "--topic", s.topics.Purchase, "--partition", "0", "--from-offset", "0",
		"--breaker-failures", "off", "--record-attempts", "2", "--record-backoff", "1ms", "--api-max-attempts", "1")
	if code != 1 || outcome(t, out, "error TRANSIENT_EXHAUSTED") != 4 || !strings.Contains(out, "still failing (replay them again later): 4") {
		t.Fatalf("replay: exit %d after %s\n%s\n%s", code, time.Since(start), out, errs)
	}
	if n := s.st.Sim.Calls(sim.EndpointAccrual, 503); n != 8 {
		t.Errorf("%d accrual calls answered 503, want 8 (every attempt of every record)", n)
	}
}
