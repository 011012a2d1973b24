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

// SetHandling makes every request call hook(endpoint) once it holds its
// place of Options.Capacity, before faults and the handler, so that a test
// can keep requests in flight. Call it before the Server serves.
func SetHandling(s *Server, hook func(endpoint string)) { s.handling = hook }
