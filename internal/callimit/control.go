package callimit

import (
	"math"
	"time"
)

// Tuning of the controller (see the package doc). The values were chosen
// with the simulations in sim_test.go.
const (
	// minCut and maxCut bound one decrease: the limit is multiplied by
	// 1 − (push-back share above the noise floor), within these bounds.
	minCut = 0.25
	maxCut = 0.5
	// maxFloor caps the noise floor: a partner pushing back more than this
	// share of calls is overloaded, however steady the share.
	maxFloor = 0.25
	// minFloor: a floor under it counts as none (see floor).
	minFloor = 0.02
	// significance is how many standard deviations above the noise floor
	// the push-backs must be to count as congestion, and slack the
	// push-backs added to that: with a floor of 0, the first push-back is
	// congestion.
	significance = 4.0
	slack        = 0.5
	// probeBand is how close to the limit of the last decrease the limit
	// grows slowly, by probeStep per round, rather than by one or more.
	probeBand = 0.1
	probeStep = 1.0 / 32
	// latencyFactor and latencyMargin: latencyRounds rounds in a row whose
	// mean latency exceeds the base latency by both are congestion. A
	// queue that the partner keeps for us lasts; a busy machine's pauses
	// (our own CPU starved) come and go, and one slow round is no queue.
	latencyFactor = 2.0
	latencyMargin = 5 * time.Millisecond
	latencyRounds = 3
	// baseRTTRounds is how slowly the base latency follows the rounds'
	// above it, in rounds.
	baseRTTRounds = 1024
	// minSample is the fewest outcomes a measurement of the noise floor
	// counts (slow start, a dip).
	minSample = 16
	// slowSample is how many calls slow start sends at the initial limit,
	// to measure the noise floor, before it grows.
	slowSample = 32
	// dipEvery and dipSpan: every dipEvery of wall-clock time, from its
	// start, each replica halves its limit for dipSpan and measures the
	// push-back share (see the package doc).
	dipEvery = 5 * time.Second
	dipSpan  = 100 * time.Millisecond
)

// event is a change of the limit, for the log line.
type event struct {
	cut    bool // a decrease
	reason string
	share  float64
	floor  float64
}

// round gathers the outcomes of about one round trip.
type round struct {
	startSeq uint64    // calls started from here on end the round
	start    time.Time // and not before one smoothed round trip
	done     int       // counted completions
	pushed   int       // of which push-backs and timeouts
	// accDone and accPushed are done and pushed of this round and, halved
	// each round, of the ones before since the last decrease: a refusal
	// per round trip is seen within a few rounds.
	accDone, accPushed float64
	rttSum             time.Duration
	rttN               int
	limited            bool // demand reached the limit during the round
}

// sample is a measurement of the noise floor: the outcomes of the calls
// started in slow start, or in a dip.
type sample struct {
	from, to     uint64 // calls numbered [from, to) count; to 0: still open
	done, pushed int
	ended        int // done, and the calls ignored (Ignore): the sample is over at to - from
}

func (m *sample) count(seq uint64, s Signal) {
	if seq >= m.from && (m.to == 0 || seq < m.to) {
		m.ended++
		if s == Ignore {
			return
		}
		m.done++
		if s == PushBack || s == Timeout {
			m.pushed++
		}
	}
}

// floorFrom sets the noise floor from m, when m says something: enough
// outcomes, and a share not above maxFloor (an overloaded or failing
// partner, not noise). less refusals are not counted: slow start's
// sample is small, and a lone refusal in it is no floor.
func (c *control) floorFrom(m sample, less int) {
	if m.done < minSample {
		return
	}
	pushed := float64(max(0, m.pushed-less))
	if pushed/float64(m.done) > maxFloor {
		return
	}
	if less == 0 && c.slowFloor {
		// The first dip replaces slow start's measurement: slow start
		// began low for this replica, not for the others, which may have
		// been running at full load.
		c.floorPushed, c.floorDone, c.slowFloor = 0, 0, false
	}
	if less != 0 {
		c.slowFloor = true
	}
	// Pooled with the measurements before, the older halved each time:
	// one dip of a few hundred calls misses a 10% share by a few points,
	// and a floor set too low cuts on noise.
	c.floorPushed = c.floorPushed/2 + pushed
	c.floorDone = c.floorDone/2 + float64(m.done)
	c.noise = c.floorPushed / c.floorDone
}

// control is the adaptive limit's state; the Limiter's lock guards it.
type control struct {
	limit, max float64
	seq        uint64 // calls started
	cutSeq     uint64 // calls started before the last decrease are not counted
	r          round
	slow       sample // slow start's first slowSample calls, at the initial limit
	slowDone   bool   // slow's floor is taken
	initial    float64
	dip        sample // the current or last dip's
	dipStart   time.Time
	dipping    bool
	slowStart  bool    // until the first decrease: +1 per success
	wmax       float64 // limit at the last decrease (0: none yet)
	srtt       time.Duration
	// baseRTT is the latency of an unloaded partner: the lowest round
	// mean, drifting up slowly, and reset when a decrease for latency
	// did not lower it (latencyCut is the mean that caused that one).
	baseRTT, latencyCut time.Duration
	latencyRounds       int // rounds since the last decrease for latency
	slowRounds          int // rounds in a row above the base latency
	// noise is the noise floor: the push-back share of the dips, pooled,
	// or of slow start before the first dip.
	noise                  float64
	floorPushed, floorDone float64 // the measurements pooled
	slowFloor              bool    // the pool is slow start's measurement
}

func (c *control) init(initial, max float64) {
	c.limit, c.max, c.slowStart, c.initial = max1(initial), max, true, max1(initial)
	c.slow.to = slowSample
}

func max1(v float64) float64 { return math.Max(1, v) }

// bound is the whole number of calls allowed: half the limit in a dip.
func (c *control) bound() int {
	if c.dipping {
		return int(max1(c.limit / 2))
	}
	return int(max1(c.limit))
}

// clock moves the dip schedule to now: every dipEvery of wall-clock time
// (the same instants on every replica), a dip of dipSpan. The dip's
// measurement is taken once its calls had a round trip to end.
func (c *control) clock(now time.Time) {
	start := now.Truncate(dipEvery)
	in := now.Sub(start) < dipSpan
	switch {
	case in && !c.dipping && !start.Equal(c.dipStart):
		if c.dipStart.IsZero() || c.dip.to != 0 {
			c.floorFromDip()
		}
		c.dipping, c.dipStart = true, start
		c.dip = sample{from: c.seq}
	case !in && c.dipping:
		c.dipping = false
		c.dip.to = c.seq
	case !c.dipping && c.dip.to != 0 && now.Sub(c.dipStart) >= dipSpan+2*c.srtt:
		c.floorFromDip()
	}
}

func (c *control) floorFromDip() {
	if c.dip.to != 0 {
		c.floorFrom(c.dip, 0)
	}
	c.dip = sample{}
}

// floor is the push-back share taken for noise; under minFloor, none:
// a dip is not perfectly clean (the replicas' clocks differ by a few
// milliseconds, calls sent just before it still meet a full partner),
// and a floor of a fraction of a percent already lets two push-backs
// pass where one would cut, which more than doubles the refusals at
// capacity.
func (c *control) floor() float64 {
	if c.noise < minFloor {
		return 0
	}
	return math.Min(maxFloor, c.noise)
}

// started numbers a new call.
func (c *control) started(now time.Time) uint64 {
	c.clock(now)
	s := c.seq
	c.seq++
	return s
}

// limited notes that demand reached the limit.
func (c *control) limited() { c.r.limited = true }

// significant reports whether pushed of n outcomes is more than noise.
func (c *control) significant(pushed, n float64) bool {
	f := c.floor()
	return pushed > f*n+significance*math.Sqrt(n*f*(1-f))+slack
}

// sample counts one call's end.
func (c *control) sample(seq uint64, s Signal, rtt time.Duration, now time.Time) *event {
	if s == Ignore {
		// Nothing about load, but the end of a call slow start waits for.
		c.slow.count(seq, s)
		c.slowSampled()
		return nil
	}
	if s == Success {
		if c.srtt == 0 {
			c.srtt = rtt
		} else {
			c.srtt += (rtt - c.srtt) / 8
		}
	}
	c.clock(now)
	c.slow.count(seq, s)
	c.slowSampled()
	c.dip.count(seq, s)
	if seq < c.cutSeq {
		// Sent at the limit before the last decrease: already judged.
		return nil
	}
	var ev *event
	r := &c.r
	r.done++
	r.accDone++
	switch s {
	case Success:
		r.rttSum += rtt
		r.rttN++
		if c.slowStart && r.limited && c.slowDone {
			c.limit = math.Min(c.max, c.limit+1)
			ev = &event{reason: "slow start"}
		}
	case PushBack, Timeout:
		r.pushed++
		r.accPushed++
		// Decide at once, not at the round's end. Early in a round,
		// refusals (often fast) outnumber the answers still to come:
		// count at least a limit's worth of outcomes.
		n := math.Max(r.accDone, float64(c.bound()))
		share := r.accPushed / n
		// Slow start first measures the floor at its low limit: only an
		// overload ends it before.
		early := c.slowStart && !c.slowDone && share-c.floor() <= maxFloor
		if !early && c.significant(r.accPushed, n) {
			return c.decrease(now, "push-back", share)
		}
	}
	if seq >= r.startSeq && now.Sub(r.start) >= c.srtt {
		if end := c.endRound(now); end != nil {
			ev = end
		}
	}
	return ev
}

// endRound judges a round that saw no significant push-back so far.
func (c *control) endRound(now time.Time) *event {
	r := c.r
	share := 0.0
	if r.done > 0 {
		share = float64(r.pushed) / float64(r.done)
	}
	if r.rttN > 0 {
		mean := r.rttSum / time.Duration(r.rttN)
		if c.latencyRounds++; c.latencyCut > 0 && c.latencyRounds == 2 {
			// Two rounds after a decrease for latency (the first one's
			// calls queued behind the older ones), latency has not
			// fallen: the partner is slower, not queueing our calls.
			if mean*10 >= c.latencyCut*9 {
				c.baseRTT = mean
			}
			c.latencyCut = 0
		}
		switch {
		case c.baseRTT == 0 || mean < c.baseRTT:
			c.baseRTT = mean
		case float64(mean) > latencyFactor*float64(c.baseRTT) && mean-c.baseRTT > latencyMargin:
			if c.slowRounds++; c.slowRounds >= latencyRounds {
				c.latencyCut, c.latencyRounds, c.slowRounds = mean, 0, 0
				return c.decrease(now, "latency", share)
			}
		default:
			c.slowRounds = 0
			c.baseRTT += (mean - c.baseRTT) / baseRTTRounds
		}
	}
	var ev *event
	if r.limited && !c.slowStart && !c.dipping && c.limit < c.max {
		step := 1.0
		switch band := math.Max(1, probeBand*c.wmax); {
		case c.wmax == 0:
		case math.Abs(c.limit-c.wmax) <= band:
			step = probeStep
		case c.limit < c.wmax:
			// Back towards the last decrease's limit in a few rounds
			// (binary search, as TCP BIC): below it the partner coped.
			step = math.Max(1, (c.wmax-band-c.limit)/2)
		}
		c.limit = math.Min(c.max, c.limit+step)
		ev = &event{reason: "growth", share: share, floor: c.floor()}
	}
	c.newRound(now, true)
	return ev
}

// slowSampled takes slow start's measurement once its calls have ended,
// or once twice as many have started: a call its caller never ends must
// not hold slow start at the initial limit for good.
func (c *control) slowSampled() {
	if !c.slowDone && (uint64(c.slow.ended) >= c.slow.to || c.seq >= 2*c.slow.to) {
		c.takeSlowFloor()
	}
}

// takeSlowFloor takes slow start's measurement as the floor, unless a dip
// measured it first: slow start began at a low limit, and its first calls met a
// partner loaded by this replica's few.
func (c *control) takeSlowFloor() {
	c.slowDone = true
	if c.floorDone == 0 {
		c.floorFrom(c.slow, 1)
	}
}

// decrease cuts the limit by the share above the noise floor, and starts
// a round: at most one decrease per round trip.
func (c *control) decrease(now time.Time, reason string, share float64) *event {
	if !c.slowDone {
		c.takeSlowFloor()
	}
	f := c.floor()
	cut := math.Min(maxCut, math.Max(minCut, share-f))
	if c.limit < c.wmax-math.Max(1, probeBand*c.wmax) {
		// Another client took the room: give some of ours (TCP CUBIC's
		// fast convergence).
		c.wmax = c.limit * (1 - cut/2)
	} else {
		c.wmax = c.limit
	}
	c.limit = max1(c.limit * (1 - cut))
	c.slowStart = false
	c.cutSeq = c.seq
	c.newRound(now, false)
	return &event{cut: true, reason: reason, share: share, floor: f}
}

func (c *control) newRound(now time.Time, keep bool) {
	acc := round{}
	if keep {
		acc = c.r
	}
	c.r = round{startSeq: c.seq, start: now, accDone: acc.accDone / 2, accPushed: acc.accPushed / 2}
}
