package pipeline

import (
	"math/rand/v2"
	"testing"
)

// TestCountersInvariant drives the counters through random legal lives of
// records (dispatch, any number of waits, release, finish) and checks
// active ≤ handling ≤ inFlight after every step, and that every count
// returns to zero once every record finished.
func TestCountersInvariant(t *testing.T) {
	type stage int
	const (
		running  stage = iota // counted active
		waiting               // yielded its slot
		released              // handler returned, outputs pending
	)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var c counters
		var live []stage
		for step := 0; step < 500 || len(live) > 0; step++ {
			if step < 500 && (len(live) == 0 || rng.IntN(3) == 0) {
				c.dispatch()
				live = append(live, running)
			} else {
				i := rng.IntN(len(live))
				switch live[i] {
				case running:
					if rng.IntN(2) == 0 {
						c.yield()
						live[i] = waiting
					} else {
						c.release()
						live[i] = released
					}
				case waiting:
					c.reclaim()
					live[i] = running
				case released:
					c.finish()
					live = append(live[:i], live[i+1:]...)
				}
			}
			if err := c.check(); err != nil {
				t.Fatalf("round %d, step %d: %v", round, step, err)
			}
			want := counters{inFlight: len(live)}
			for _, s := range live {
				if s != released {
					want.handling++
				}
				if s == running {
					want.active++
				}
			}
			if c != want {
				t.Fatalf("round %d, step %d: counters %+v, want %+v", round, step, c, want)
			}
		}
		if c != (counters{}) {
			t.Fatalf("round %d: every record finished, counters %+v", round, c)
		}
	}
}

// TestCountersCheck: check catches each way the counts can go wrong, so the
// test above can fail.
func TestCountersCheck(t *testing.T) {
	for _, c := range []counters{
		{inFlight: 1, handling: 1, active: 2}, // a slot reclaimed twice
		{inFlight: 1, handling: 2, active: 1}, // finished before its handler returned
		{inFlight: 1, handling: 1, active: -1},
		{inFlight: -1},
	} {
		if c.check() == nil {
			t.Errorf("%+v passed the check", c)
		}
	}
	if err := (counters{inFlight: 3, handling: 2, active: 1}).check(); err != nil {
		t.Error(err)
	}
}
