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
	Launch, First, Last int64
	// P50, P99 and Max are end-to-end latencies (see the package doc).
	P50, P99, Max time.Duration
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

// Wall is the time from launch to the last completion.
func (t Timing) Wall() time.Duration {
	if t.Done == 0 {
		return 0
	}
	return time.Duration(t.Last - t.Launch)
}

// latencies accumulates one contestant's completions. Not safe for
// concurrent use.
type latencies struct {
	launch      int64
	first, last int64
	lat         []int64
}

func newLatencies(launch int64, capacity int) *latencies {
	return &latencies{launch: launch, lat: make([]int64, 0, capacity)}
}

// add records a completion at done of a record that became available at
// avail (clamped to the launch: a backlog is available from the start).
func (l *latencies) add(avail, done int64) {
	if len(l.lat) == 0 || done < l.first {
		l.first = done
	}
	if done > l.last {
		l.last = done
	}
	l.lat = append(l.lat, max(0, done-max(avail, l.launch)))
}

// timing sorts the latencies (once; add no more afterwards) and sums up.
func (l *latencies) timing() Timing {
	t := Timing{Done: len(l.lat), Launch: l.launch, First: l.first, Last: l.last}
	if len(l.lat) == 0 {
		return t
	}
	slices.Sort(l.lat)
	t.P50 = time.Duration(quantile(l.lat, 0.50))
	t.P99 = time.Duration(quantile(l.lat, 0.99))
	t.Max = time.Duration(l.lat[len(l.lat)-1])
	return t
}

// quantile is the nearest-rank q-quantile of sorted, which is not empty.
func quantile(sorted []int64, q float64) int64 {
	// The epsilon keeps 0.99 × 100 (99.00000000000001 in floating point)
	// at rank 99.
	rank := int(math.Ceil(q*float64(len(sorted)) - 1e-9))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}
