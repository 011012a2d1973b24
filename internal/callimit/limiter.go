package callimit

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Signal is what one attempt's end tells the limiter about the partner's
// load.
type Signal int

const (
	// Ignore says nothing about load: the caller gave up (its context
	// ended), or gave its slot back without sending anything (a write
	// whose gate closed while it waited for the slot). A connection that
	// could not be made or broke is a Failure.
	Ignore Signal = iota
	// Success is an answer the partner processed: a 2xx, or a 4xx of the
	// business (insufficient points, unknown member). Its latency is
	// measured.
	Success
	// Failure is an answer that failed but is no push-back: a 500, a
	// malformed answer, a connection refused or broken. Neutral: it
	// neither grows nor shrinks the limit, and its latency is not measured
	// (failures are often fast).
	Failure
	// PushBack is the partner refusing work because of load: 429, 503
	// (with or without Retry-After) and 408.
	PushBack
	// Timeout is an attempt that ran out of time: the partner is slower
	// than the attempt's bound, a push-back the partner did not say.
	Timeout
)

func (s Signal) String() string {
	switch s {
	case Ignore:
		return "ignore"
	case Success:
		return "success"
	case Failure:
		return "failure"
	case PushBack:
		return "push-back"
	case Timeout:
		return "timeout"
	}
	return fmt.Sprintf("Signal(%d)", int(s))
}

// DefaultInitial is the limit an adaptive Limiter starts at (or Max if
// lower). It stays there for slow start's first 32 calls (the noise
// floor's first measurement), then grows, doubling per round trip until
// the first push-back, so a fresh replica does not greet an overloaded
// partner with --max-in-flight calls at once.
const DefaultInitial = 8

// Options configures New.
type Options struct {
	// Max is the limit's ceiling (--max-in-flight); at least 1.
	Max int
	// Fixed keeps the limit at Max: a plain semaphore
	// (--adaptive-concurrency=false).
	Fixed bool
	// Initial is the adaptive limit at start (default DefaultInitial, at
	// most Max).
	Initial int
	// Logger gets one line per large change of the limit (default no-op).
	Logger *zap.Logger
	// OnLimit, when set, is told the limit whenever it changes (a gauge);
	// also once from New. Called with the Limiter's lock held: it must not
	// call the Limiter.
	OnLimit func(limit int)
	// Now is the clock (default time.Now) and AfterFunc runs f after d
	// (default time.AfterFunc): test hooks for a simulation.
	Now       func() time.Time
	AfterFunc func(d time.Duration, f func())
}

// Limiter bounds calls in progress by a limit that adapts between 1 and
// Options.Max (see the package doc). Safe for concurrent use.
type Limiter struct {
	mu      sync.Mutex
	fixed   bool
	max     int
	now     func() time.Time
	after   func(time.Duration, func())
	log     *zap.Logger
	onLimit func(int)
	ctl     control
	inUse   int
	waiters list.List // of chan struct{}, FIFO
	shown   int       // the limit last told to onLimit
	logged  int       // the limit last logged
}

// New validates o and returns a Limiter.
func New(o Options) (*Limiter, error) {
	if o.Max < 1 {
		return nil, fmt.Errorf("callimit: Max %d: must be at least 1", o.Max)
	}
	if o.Initial < 0 {
		return nil, fmt.Errorf("callimit: Initial %d: must not be negative", o.Initial)
	}
	l := &Limiter{fixed: o.Fixed, max: o.Max, now: o.Now, after: o.AfterFunc, log: o.Logger, onLimit: o.OnLimit}
	if l.now == nil {
		l.now = time.Now
	}
	if l.after == nil {
		l.after = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	}
	if l.log == nil {
		l.log = zap.NewNop()
	}
	initial := o.Initial
	if initial == 0 {
		initial = DefaultInitial
	}
	if o.Fixed {
		initial = o.Max
	}
	l.ctl.init(float64(min(initial, o.Max)), float64(o.Max))
	l.shown, l.logged = l.limit(), l.limit()
	if l.onLimit != nil {
		l.onLimit(l.shown)
	}
	return l, nil
}

// Limit is the number of calls allowed in progress now.
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit()
}

// limit is Limit with l.mu held.
func (l *Limiter) limit() int {
	if l.fixed {
		return l.max
	}
	return l.ctl.bound()
}

// Max is Options.Max.
func (l *Limiter) Max() int { return l.max }

// InUse is the number of calls in progress.
func (l *Limiter) InUse() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inUse
}

// Call is one call in progress. End it exactly once with Done.
type Call struct {
	l     *Limiter
	seq   uint64
	start time.Time
	done  bool
}

// TryAcquire starts a call if the limit allows it now.
func (l *Limiter) TryAcquire() (*Call, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiters.Len() > 0 || l.inUse >= l.limit() {
		return nil, false
	}
	return l.grant(), true
}

// Acquire waits until the limit allows one more call in progress, or ctx
// ends (its error is returned). Waiters are served in order.
func (l *Limiter) Acquire(ctx context.Context) (*Call, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	if l.waiters.Len() == 0 && l.inUse < l.limit() {
		c := l.grant()
		l.mu.Unlock()
		return c, nil
	}
	l.ctl.limited() // demand exceeds the limit: growth is warranted
	ready := make(chan struct{})
	el := l.waiters.PushBack(ready)
	l.mu.Unlock()
	select {
	case <-ready:
		// wake granted the slot (inUse counted) before closing ready.
		l.mu.Lock()
		c := l.newCall()
		l.mu.Unlock()
		return c, nil
	case <-ctx.Done():
		l.mu.Lock()
		select {
		case <-ready:
			// Granted as ctx ended: give the slot to the next waiter.
			l.inUse--
			l.wake()
		default:
			l.waiters.Remove(el)
			// The head leaving may let the next ones in.
			l.wake()
		}
		l.mu.Unlock()
		return nil, ctx.Err()
	}
}

// grant counts a new call in progress; l.mu held.
func (l *Limiter) grant() *Call {
	l.inUse++
	return l.newCall()
}

func (l *Limiter) newCall() *Call {
	if l.inUse >= l.limit() {
		l.ctl.limited()
	}
	now := l.now()
	return &Call{l: l, seq: l.ctl.started(now), start: now}
}

// Done ends the call with what its answer said. A second Done is ignored.
func (c *Call) Done(s Signal) {
	if c == nil {
		return
	}
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.done {
		return
	}
	c.done = true
	if l.fixed {
		l.inUse--
		l.wake()
		return
	}
	now := l.now()
	if ev := l.ctl.sample(c.seq, s, now.Sub(c.start), now); ev != nil {
		l.changed(ev)
	}
	if hold := c.start.Add(l.ctl.srtt).Sub(now); hold > 0 && (s == PushBack || s == Timeout) {
		// A refusal answered in less than a round trip keeps its slot
		// for the rest of one: otherwise the slot is used again at once,
		// refused again at once, and each slot above the partner's
		// capacity costs dozens of refusals per round trip instead of one.
		// The timer has no owner to stop it, and needs none: it fires
		// within one smoothed round trip (less than the attempt timeout),
		// and only gives the slot back under l.mu; a Limiter no longer
		// used is kept that long, then collected.
		l.after(hold, l.release)
		return
	}
	l.inUse--
	l.wake()
}

func (l *Limiter) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inUse--
	l.wake()
}

// wake lets waiters in while the limit allows; l.mu held.
func (l *Limiter) wake() {
	for l.waiters.Len() > 0 && l.inUse < l.limit() {
		el := l.waiters.Front()
		l.waiters.Remove(el)
		l.inUse++
		close(el.Value.(chan struct{}))
	}
}

// changed reports a move of the limit: the gauge on every change of the
// whole number, a log line when it has halved or doubled since the last
// line (a sawtooth around the partner's capacity logs nothing); l.mu held.
func (l *Limiter) changed(ev *event) {
	n := l.limit()
	if ev.cut {
		if ce := l.log.Check(zap.DebugLevel, "partner call concurrency limit cut"); ce != nil {
			ce.Write(zap.Int("limit", n), zap.String("reason", ev.reason), zap.Float64("push_back_share", ev.share),
				zap.Float64("noise_floor", ev.floor))
		}
	}
	if n == l.shown {
		return
	}
	l.shown = n
	if l.onLimit != nil {
		l.onLimit(n)
	}
	if n*2 <= l.logged || n >= l.logged*2 {
		l.log.Info("partner call concurrency limit changed", zap.Int("from", l.logged), zap.Int("limit", n),
			zap.Int("max", l.max), zap.String("reason", ev.reason), zap.Float64("push_back_share", ev.share),
			zap.Float64("noise_floor", ev.floor))
		l.logged = n
	}
}
