package callimit

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"
)

// A discrete-event simulation of clients, each with its own Limiter,
// calling one partner: deterministic (a seeded random source, a simulated
// clock), so the tests assert outcomes of the algorithm, not timings.
//
// The partner is modelled on internal/sim: a request beyond Capacity is
// refused at once (no latency), a random fault is answered after the
// latency like any request. Each client has an endless backlog: a call
// pushed back frees its slot at once and the next record's call takes it
// (the record itself waits out its Retry-After elsewhere), which is what
// makes a limit above the capacity expensive.

type partner struct {
	capacity  int           // 0: unlimited
	latency   time.Duration // of a handled request
	jitter    float64       // latency varies uniformly by ± this share
	overhead  time.Duration // client side, per call, half each way
	pushShare float64       // share of handled requests answered 503 at random
	failShare float64       // share answered 500 at random
	down      func(t time.Duration) bool
	queue     bool // beyond capacity, requests wait for a place instead of being refused
}

type simClient struct {
	l          *Limiter
	start, end time.Duration // active in [start, end); end 0: to the end
	ok, pushed int
	limitSum   float64 // limit × time, over the measured span
	maxInUse   int
}

type simEvent struct {
	at     time.Duration
	kind   int // 0 arrive at the partner, 1 the partner frees a place, 2 answer at the client, 3 wake a client
	client int
	call   *Call
	sig    Signal
	fn     func()
}

type eventQueue []simEvent

func (q eventQueue) Len() int                    { return len(q) }
func (q eventQueue) Less(i, j int) bool          { return q[i].at < q[j].at }
func (q eventQueue) Swap(i, j int)               { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)                 { *q = append(*q, x.(simEvent)) }
func (q *eventQueue) Pop() any                   { old := *q; e := old[len(old)-1]; *q = old[:len(old)-1]; return e }
func (q *eventQueue) add(e simEvent)             { heap.Push(q, e) }
func (q *eventQueue) next() simEvent             { return heap.Pop(q).(simEvent) }
func (q *eventQueue) empty() bool                { return len(*q) == 0 }
func (c *simClient) active(t time.Duration) bool { return t >= c.start && (c.end == 0 || t < c.end) }

type simResult struct {
	clients    []*simClient
	measured   time.Duration
	ok, pushed int
	limitTrace [][]int // per client, the limit every traceEvery
}

var traceEvery = 100 * time.Millisecond

// simulate runs the clients against p for d of simulated time and measures
// from measureFrom on.
func simulate(t *testing.T, p partner, maxCalls int, clients []*simClient, d, measureFrom time.Duration, seed uint64) simResult {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	base := time.Unix(0, 0)
	var now time.Duration
	var q eventQueue
	for i, c := range clients {
		l, err := New(Options{Max: maxCalls, Now: func() time.Time { return base.Add(now) },
			AfterFunc: func(d time.Duration, f func()) { q.add(simEvent{at: now + d, kind: 4, client: i, fn: f}) }})
		if err != nil {
			t.Fatal(err)
		}
		c.l = l
	}
	inPartner := 0
	var waiting []simEvent
	handle := func(e simEvent) {
		inPartner++
		lat := time.Duration(float64(p.latency) * (1 + p.jitter*(2*rng.Float64()-1)))
		sig := Success
		switch u := rng.Float64(); {
		case u < p.pushShare:
			sig = PushBack
		case u < p.pushShare+p.failShare:
			sig = Failure
		}
		q.add(simEvent{at: now + lat, kind: 1})
		q.add(simEvent{at: now + lat + p.overhead/2, kind: 2, client: e.client, call: e.call, sig: sig})
	}
	res := simResult{clients: clients, limitTrace: make([][]int, len(clients))}
	send := func(i int) {
		c := clients[i]
		if !c.active(now) {
			return
		}
		for {
			call, ok := c.l.TryAcquire()
			if !ok {
				return
			}
			c.maxInUse = max(c.maxInUse, c.l.InUse())
			q.add(simEvent{at: now + p.overhead/2, kind: 0, client: i, call: call})
		}
	}
	for i, c := range clients {
		q.add(simEvent{at: c.start, kind: 3, client: i})
	}
	var lastT time.Duration
	nextTrace := time.Duration(0)
	for !q.empty() {
		e := q.next()
		if e.at > d {
			break
		}
		// Time-weighted limits over the measured span.
		if e.at > measureFrom {
			from := max(lastT, measureFrom)
			for _, c := range clients {
				if c.active(from) {
					c.limitSum += float64(c.l.Limit()) * float64(e.at-from)
				}
			}
		}
		for nextTrace <= e.at {
			for i, c := range clients {
				res.limitTrace[i] = append(res.limitTrace[i], c.l.Limit())
			}
			nextTrace += traceEvery
		}
		lastT, now = e.at, e.at
		switch e.kind {
		case 0:
			switch down := p.down != nil && p.down(now); {
			case down || (p.capacity > 0 && inPartner >= p.capacity && !p.queue):
				q.add(simEvent{at: now + p.overhead/2, kind: 2, client: e.client, call: e.call, sig: PushBack})
			case p.capacity > 0 && inPartner >= p.capacity:
				waiting = append(waiting, e)
			default:
				handle(e)
			}
		case 1:
			inPartner--
			if len(waiting) > 0 {
				handle(waiting[0])
				waiting = waiting[1:]
			}
		case 2:
			c := clients[e.client]
			e.call.Done(e.sig)
			if now >= measureFrom && c.active(now) {
				switch e.sig {
				case Success:
					c.ok++
					res.ok++
				case PushBack:
					c.pushed++
					res.pushed++
				}
			}
			send(e.client)
		case 3:
			send(e.client)
		case 4:
			e.fn()
			send(e.client)
		}
	}
	res.measured = d - measureFrom
	return res
}

func (c *simClient) meanLimit(r simResult) float64 {
	span := r.measured
	if c.end != 0 {
		span = c.end - max(c.start, r.measured)
	}
	return c.limitSum / float64(span)
}

func (r simResult) rate() float64 { return float64(r.ok) / r.measured.Seconds() }

func (r simResult) pushedShare() float64 {
	if r.ok+r.pushed == 0 {
		return 0
	}
	return float64(r.pushed) / float64(r.ok+r.pushed)
}

// capacityPartner is the figure: 32 at once at 10 ms, 3,200 calls/s.
func capacityPartner() partner {
	return partner{capacity: 32, latency: 10 * time.Millisecond, jitter: 0.1, overhead: 600 * time.Microsecond}
}

func TestOneClientFindsTheCapacity(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		c := &simClient{}
		r := simulate(t, capacityPartner(), 256, []*simClient{c}, 30*time.Second, 5*time.Second, seed)
		capRate := 32 / (10 * time.Millisecond).Seconds()
		t.Logf("seed %d: mean limit %.1f, %.0f calls/s (%.2f× the capacity), %.2f%% pushed back",
			seed, c.meanLimit(r), r.rate(), r.rate()/capRate, 100*r.pushedShare())
		if r.rate() < 0.9*capRate {
			t.Errorf("seed %d: %.0f calls/s, want at least 0.9 × %.0f", seed, r.rate(), capRate)
		}
		if r.pushedShare() > 0.01 {
			t.Errorf("seed %d: %.2f%% of calls pushed back, want at most 1%%", seed, 100*r.pushedShare())
		}
	}
}

// The fault figures: 64 in flight at 5 ms, 10% of calls 503 (or
// 500) at random, whatever the load. Random push-backs must not collapse
// the limit: success per second at least 0.8 × the fault-free run's.
func TestRandomFaultsDoNotCollapse(t *testing.T) {
	clean := partner{latency: 5 * time.Millisecond, jitter: 0.1, overhead: 600 * time.Microsecond}
	c := &simClient{}
	base := simulate(t, clean, 64, []*simClient{c}, 20*time.Second, 5*time.Second, 1).rate()
	for _, tc := range []struct {
		name string
		p    partner
	}{
		{"503", partner{latency: clean.latency, jitter: clean.jitter, overhead: clean.overhead, pushShare: 0.1}},
		{"500", partner{latency: clean.latency, jitter: clean.jitter, overhead: clean.overhead, failShare: 0.1}},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			c := &simClient{}
			r := simulate(t, tc.p, 64, []*simClient{c}, 20*time.Second, 5*time.Second, seed)
			t.Logf("%s seed %d: mean limit %.1f of 64, %.0f successes/s, %.2f× the fault-free %.0f/s, noise floor %.3f",
				tc.name, seed, c.meanLimit(r), r.rate(), r.rate()/base, base, c.l.ctl.floor())
			if r.rate() < 0.8*base {
				t.Errorf("%s seed %d: %.0f successes/s, want at least 0.8 × %.0f", tc.name, seed, r.rate(), base)
			}
		}
	}
}

// Three clients, each with its own limiter and no coordinator, share the
// capacity-32 partner: together they hold the capacity with at most 1%
// pushed back, and each converges to about a third.
func TestClientsShareTheCapacity(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		cs := []*simClient{{}, {}, {}}
		r := simulate(t, capacityPartner(), 256, cs, 60*time.Second, 20*time.Second, seed)
		capRate := 32 / (10 * time.Millisecond).Seconds()
		var shares []float64
		for _, c := range cs {
			shares = append(shares, float64(c.ok)/float64(r.ok))
		}
		t.Logf("seed %d: %.0f calls/s (%.2f× the capacity), %.2f%% pushed back, limits %.1f %.1f %.1f, shares %.2f %.2f %.2f, floors %.3f %.3f %.3f",
			seed, r.rate(), r.rate()/capRate, 100*r.pushedShare(), cs[0].meanLimit(r), cs[1].meanLimit(r), cs[2].meanLimit(r),
			shares[0], shares[1], shares[2], cs[0].l.ctl.floor(), cs[1].l.ctl.floor(), cs[2].l.ctl.floor())
		if r.rate() < 0.9*capRate {
			t.Errorf("seed %d: %.0f calls/s together, want at least 0.9 × %.0f", seed, r.rate(), capRate)
		}
		if r.pushedShare() > 0.01 {
			t.Errorf("seed %d: %.2f%% of calls pushed back, want at most 1%%", seed, 100*r.pushedShare())
		}
		for i, s := range shares {
			if s < 0.25 || s > 0.42 {
				t.Errorf("seed %d: client %d has %.2f of the successes, want about a third", seed, i, s)
			}
		}
	}
}

// Three replicas started together (a deployment, a bench) share the
// capacity from their first call: over the first 12 s, start-up included,
// at most 1% pushed back. Slow start measured its noise floor while the
// limits grew, and so measured the other replicas' growth too: one took
// it for noise and most of the capacity, another collapsed to 1, and up
// to 10% of calls were pushed back until the first dip.
func TestClientsStartingTogether(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		cs := []*simClient{{}, {}, {}}
		r := simulate(t, capacityPartner(), 256, cs, 12*time.Second, 0, seed)
		var shares []float64
		for _, c := range cs {
			shares = append(shares, float64(c.ok)/float64(r.ok))
		}
		t.Logf("seed %d: %.0f calls/s (%.2f× the capacity), %.2f%% pushed back, shares %.2f %.2f %.2f",
			seed, r.rate(), r.rate()/3200, 100*r.pushedShare(), shares[0], shares[1], shares[2])
		if r.pushedShare() > 0.01 {
			t.Errorf("seed %d: %.2f%% of calls pushed back, want at most 1%%", seed, 100*r.pushedShare())
		}
		for i, s := range shares {
			if s < 0.2 || s > 0.46 {
				t.Errorf("seed %d: client %d has %.2f of the successes, want about a third", seed, i, s)
			}
		}
	}
}

// A partner down for 3 s (every call refused) takes the limit to the
// bottom; once it is back, the limit finds the capacity again.
func TestRecoveryAfterOutage(t *testing.T) {
	p := capacityPartner()
	p.down = func(at time.Duration) bool { return at >= 5*time.Second && at < 8*time.Second }
	traceEvery = 100 * time.Millisecond
	c := &simClient{}
	r := simulate(t, p, 256, []*simClient{c}, 15*time.Second, 10*time.Second, 1)
	trace := r.limitTrace[0]
	during := trace[79] // 7.9 s
	after := r.rate()
	t.Logf("limit before the outage %d, during %d, 2 s after %d; %.0f calls/s from 10 s, %.2f%% pushed back",
		trace[49], during, trace[99], after, 100*r.pushedShare())
	if during > 2 {
		t.Errorf("limit %d during the outage, want at most 2", during)
	}
	if after < 0.9*3200 || r.pushedShare() > 0.01 {
		t.Errorf("after the outage: %.0f calls/s, %.2f%% pushed back; want the capacity back", after, 100*r.pushedShare())
	}
}

// A replica started later, while two others hold the capacity, gets its
// share: the others give room, as TCP flows do to a new one.
func TestLateClientGetsItsShare(t *testing.T) {
	cs := []*simClient{{}, {}, {start: 10 * time.Second}}
	r := simulate(t, capacityPartner(), 256, cs, 60*time.Second, 30*time.Second, 1)
	var shares []float64
	for _, c := range cs {
		shares = append(shares, float64(c.ok)/float64(r.ok))
	}
	t.Logf("%.0f calls/s, %.2f%% pushed back, shares %.2f %.2f %.2f", r.rate(), 100*r.pushedShare(), shares[0], shares[1], shares[2])
	for i, s := range shares {
		if s < 0.25 || s > 0.42 {
			t.Errorf("client %d has %.2f of the successes, want about a third", i, s)
		}
	}
	if r.pushedShare() > 0.01 {
		t.Errorf("%.2f%% pushed back, want at most 1%%", 100*r.pushedShare())
	}
}

// A partner that queues the excess instead of refusing it says nothing
// but its latency: the limit stays within a few times the capacity (the
// latency doubles at twice the capacity) rather than filling the queue
// up to the maximum.
func TestRisingLatencyShrinks(t *testing.T) {
	p := capacityPartner()
	p.queue = true
	c := &simClient{}
	r := simulate(t, p, 256, []*simClient{c}, 20*time.Second, 5*time.Second, 1)
	t.Logf("mean limit %.1f of 256, %.0f calls/s", c.meanLimit(r), r.rate())
	if c.meanLimit(r) > 3*32 {
		t.Errorf("mean limit %.1f: the queue filled up", c.meanLimit(r))
	}
	if r.rate() < 0.9*3200 {
		t.Errorf("%.0f calls/s, want at least 0.9 × 3200", r.rate())
	}
}
