package benchkit

import (
	"math"
	"slices"
	"time"
)

// Timing is what one contestant's completions add up to. All times are
// Unix nanoseconds on this machine's clock (contestants run here too).
type Timing struct {
	// Done is the number of distinct records completed.
	Done int `json:"done"`
	// Launch is when the contestant was started; First and Last are its
	// first and last completion.
	Launch int64 `json:"launch"`
	First  int64 `json:"first"`
	Last   int64 `json:"last"`
	// P50, P99 and Max are end-to-end latencies (see the package doc) of
	// the Sampled records.
	P50     time.Duration `json:"p50"`
	P99     time.Duration `json:"p99"`
	Max     time.Duration `json:"max"`
	Sampled int           `json:"sampled"`
	// Mid is the median completion time: the rate from Mid to Last
	// leaves out start-up effects (ramp-up, the bridge's idempotency
	// guard on the first records of each partition).
	Mid int64 `json:"mid"`
	// Done10 and Done90 are the 10th and 90th percentile completion times
	// (nearest rank): the rate between them leaves out both the start-up
	// and the tail of the last slow records (a Retry-After wait, a
	// record retried at the very end), which dominate a short run's
	// whole-run rate without saying how fast the records flowed.
	Done10 int64 `json:"done10"`
	Done90 int64 `json:"done90"`
}

// Steady-rate bounds: the completions between these quantiles.
const (
	steadyFrom = 0.10
	steadyTo   = 0.90
)

// SteadyRate is records per second between the 10th and the 90th
// percentile completion times: the completions between their ranks
// (0.8·Done) ÷ (Done90 − Done10). With fewer than 10 completions, or
// both percentiles in one clock tick, it falls back to Rate.
func (t Timing) SteadyRate() float64 {
	from, to := rank(t.Done, steadyFrom), rank(t.Done, steadyTo)
	if t.Done < 10 || to <= from || t.Done90 <= t.Done10 {
		return t.Rate()
	}
	return float64(to-from) / (float64(t.Done90-t.Done10) / 1e9)
}

// SecondHalfRate is records per second over the second half of the
// completions.
func (t Timing) SecondHalfRate() float64 {
	if t.Done < 4 || t.Last <= t.Mid {
		return t.Rate()
	}
	return float64(t.Done-t.Done/2-1) / (float64(t.Last-t.Mid) / 1e9)
}

// Rate is records per second from the first completion to the last; with
// fewer than two completions, or all in one clock tick, it falls back to
// the time since launch.
func (t Timing) Rate() float64 {
	if t.Done == 0 {
		return 0
	}
	if t.Done > 1 && t.Last > t.First {
		return float64(t.Done-1) / (float64(t.Last-t.First) / 1e9)
	}
	if t.Last > t.Launch {
		return float64(t.Done) / (float64(t.Last-t.Launch) / 1e9)
	}
	return 0
}

// Startup is the time from launch to the first completion.
func (t Timing) Startup() time.Duration {
	if t.Done == 0 {
		return 0
	}
	return time.Duration(t.First - t.Launch)
}

// FirstTenth is the time from launch to the 10th percentile completion:
// when a tenth of the records were answered (a start-up stall shows
// here, a slow first record alone does not).
func (t Timing) FirstTenth() time.Duration {
	if t.Done == 0 || t.Done10 == 0 {
		return 0
	}
	return time.Duration(t.Done10 - t.Launch)
}

// Wall is the time from launch to the last completion.
func (t Timing) Wall() time.Duration {
	if t.Done == 0 {
		return 0
	}
	return time.Duration(t.Last - t.Launch)
}

// completions records, per record, when it became available and when it
// was completed. Not safe for concurrent use, except that distinct
// records' done entries may be written by distinct goroutines.
type completions struct {
	launch int64
	// avail[i] is when record i became available; nil means a backlog:
	// every record was there before the launch.
	avail []int64
	// done[i] is when record i was completed, 0 if it was not.
	done []int64
}

func newCompletions(launch int64, n int, avail []int64) *completions {
	return &completions{launch: launch, avail: avail, done: make([]int64, n)}
}

// timing sums up. A record's latency counts from the later of its
// availability and the launch. With steadyOnly, records that became
// available before the first completion (while the contestant was still
// starting) are left out of the latencies, though not out of the counts.
func (c *completions) timing(steadyOnly bool) Timing {
	t := Timing{Launch: c.launch}
	for _, d := range c.done {
		if d == 0 {
			continue
		}
		if t.Done == 0 || d < t.First {
			t.First = d
		}
		t.Last = max(t.Last, d)
		t.Done++
	}
	if t.Done == 0 {
		return t
	}
	doneSorted := make([]int64, 0, t.Done)
	for _, d := range c.done {
		if d != 0 {
			doneSorted = append(doneSorted, d)
		}
	}
	slices.Sort(doneSorted)
	t.Mid = doneSorted[len(doneSorted)/2]
	t.Done10 = quantile(doneSorted, steadyFrom)
	t.Done90 = quantile(doneSorted, steadyTo)
	lat := doneSorted[:0] // reuse

	for i, d := range c.done {
		if d == 0 {
			continue
		}
		avail := c.launch
		if c.avail != nil {
			avail = max(avail, c.avail[i])
			if steadyOnly && c.avail[i] < t.First {
				continue
			}
		}
		lat = append(lat, max(0, d-avail))
	}
	t.Sampled = len(lat)
	if len(lat) == 0 {
		return t
	}
	slices.Sort(lat)
	t.P50 = time.Duration(quantile(lat, 0.50))
	t.P99 = time.Duration(quantile(lat, 0.99))
	t.Max = time.Duration(lat[len(lat)-1])
	return t
}

// quantile is the nearest-rank q-quantile of sorted, which is not empty.
func quantile(sorted []int64, q float64) int64 {
	return sorted[rank(len(sorted), q)-1]
}

// rank is the 1-based nearest rank of the q-quantile of n values, in
// [1, n] (0 for none).
func rank(n int, q float64) int {
	if n == 0 {
		return 0
	}
	// The epsilon keeps 0.99 × 100 (99.00000000000001 in floating point)
	// at rank 99.
	r := int(math.Ceil(q*float64(n) - 1e-9))
	return min(max(r, 1), n)
}

// median of ms values (sorted in place); 0 for none.
func medianMs(v []int64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return float64(quantile(v, 0.5))
}
