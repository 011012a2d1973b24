package sim

import (
	"math/rand/v2"
	"time"
)

// SampleLatency draws n latencies as requests under f would wait.
func SampleLatency(f Faults, seed int64, n int) []time.Duration {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(seed)))
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = f.plan(rng, EndpointAccrual, true).delay
	}
	return out
}
