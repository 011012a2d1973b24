package circuit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.uber.org/zap"
)

// State of the circuit, as exported in metrics (0 closed, 1 half-open, 2 open).
type State int

// The three states, numbered as gobreaker numbers them.
const (
	Closed   State = State(gobreaker.StateClosed)
	HalfOpen State = State(gobreaker.StateHalfOpen)
	Open     State = State(gobreaker.StateOpen)
)

func (s State) String() string { return gobreaker.State(s).String() }

// Options configures a Breaker. The zero value is usable.
type Options struct {
	// Off makes a Breaker that never opens: every attempt proceeds however
	// the API fares, so a record spends its retry budget against a failing
	// partner and ends as an error event instead of being held. The
	// thresholds below are then ignored.
	Off bool
	// ConsecutiveFailures opens the circuit after this many failed attempts
	// in a row. Default 20.
	ConsecutiveFailures uint32
	// FailureRatio, when > 0, also opens the circuit once at least
	// MinRequests attempts were made in the current window and this share
	// of them failed. Default 0 (off).
	FailureRatio float64
	// MinRequests guards FailureRatio against tiny samples. Default 20.
	MinRequests uint32
	// Window is the period after which closed-state counts are cleared.
	// Default 30s.
	Window time.Duration
	// OpenTimeout is how long the circuit stays open before letting probes
	// through (half-open). Default 5s.
	OpenTimeout time.Duration
	// HalfOpenProbes is how many attempts may be in flight while half-open;
	// that many consecutive successes close the circuit. Default 1.
	HalfOpenProbes uint32
	// IsFailure classifies an attempt's error; nil errors are successes.
	// Default: every non-nil error except context cancellation is a failure.
	IsFailure func(error) bool
	// OnStateChange is called (synchronously, keep it cheap) on every
	// transition, e.g. to set a gauge.
	OnStateChange func(from, to State)
	// Logger receives one line per transition. Nil means no logs.
	Logger *zap.Logger
}

// Breaker is safe for concurrent use.
type Breaker struct {
	cb          *gobreaker.TwoStepCircuitBreaker[struct{}]
	openTimeout time.Duration
	isFailure   func(error) bool

	mu            sync.Mutex
	changed       chan struct{} // closed and replaced on every transition or probe completion
	openedAt      time.Time
	lastFailure   error
	lastFailureAt time.Time
	lastSuccessAt time.Time
}

// Status is what a Breaker knows of the API's health, for an operator
// asking why records wait.
type Status struct {
	State State
	// OpenedAt is when the circuit last opened (zero: never); the next
	// probe is due OpenTimeout later.
	OpenedAt    time.Time
	OpenTimeout time.Duration
	// LastFailure is the last attempt counted as a failure, at
	// LastFailureAt; LastSuccessAt is when an attempt last found the API
	// healthy (an answer, an error envelope included). Abandoned attempts
	// say nothing and are not recorded.
	LastFailure                  error
	LastFailureAt, LastSuccessAt time.Time
}

// Status reports the circuit's state and the last attempts' verdicts. Safe
// for concurrent use.
func (b *Breaker) Status() Status {
	state := b.State()
	b.mu.Lock()
	defer b.mu.Unlock()
	return Status{State: state, OpenedAt: b.openedAt, OpenTimeout: b.openTimeout,
		LastFailure: b.lastFailure, LastFailureAt: b.lastFailureAt, LastSuccessAt: b.lastSuccessAt}
}

// Defaults of Options.
const (
	// DefaultConsecutiveFailures is high because "in a row" is counted
	// across every caller: at thousands of calls a second, a partner
	// failing a random 10% of calls makes 5 failures in a row every few
	// seconds (p = 1e-5 per call), and the circuit then held every record
	// for an open period (loyalty-bench, 10% 500 over 50k events: 8,330
	// answered in 10 s, a 5 s hold). 20 in a row at 10% is 1e-20; an
	// outage still opens it within 20 calls, and FailureRatio catches a
	// partner failing most calls.
	DefaultConsecutiveFailures = 20
	DefaultOpenTimeout         = 5 * time.Second
)

// New returns a closed Breaker.
func New(opts Options) (*Breaker, error) {
	if opts.FailureRatio < 0 || opts.FailureRatio > 1 {
		return nil, fmt.Errorf("circuit: failure ratio %v outside [0,1]", opts.FailureRatio)
	}
	if opts.ConsecutiveFailures == 0 {
		opts.ConsecutiveFailures = DefaultConsecutiveFailures
	}
	if opts.MinRequests == 0 {
		opts.MinRequests = 20
	}
	if opts.Window <= 0 {
		opts.Window = 30 * time.Second
	}
	if opts.OpenTimeout <= 0 {
		opts.OpenTimeout = DefaultOpenTimeout
	}
	if opts.HalfOpenProbes == 0 {
		opts.HalfOpenProbes = 1
	}
	if opts.IsFailure == nil {
		opts.IsFailure = func(err error) bool { return !errors.Is(err, context.Canceled) }
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	b := &Breaker{openTimeout: opts.OpenTimeout, isFailure: opts.IsFailure, changed: make(chan struct{})}
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "partner-api",
		MaxRequests: opts.HalfOpenProbes,
		Interval:    opts.Window,
		Timeout:     opts.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			if opts.Off {
				return false
			}
			if c.ConsecutiveFailures >= opts.ConsecutiveFailures {
				return true
			}
			return opts.FailureRatio > 0 && c.Requests >= opts.MinRequests &&
				float64(c.TotalFailures)/float64(c.Requests) >= opts.FailureRatio
		},
		// gobreaker calls this with its own lock held: only record and signal.
		OnStateChange: func(_ string, from, to gobreaker.State) {
			b.mu.Lock()
			if to == gobreaker.StateOpen {
				b.openedAt = time.Now()
			}
			close(b.changed)
			b.changed = make(chan struct{})
			b.mu.Unlock()
			log.Info("circuit state changed", zap.Stringer("from", from), zap.Stringer("to", to))
			if opts.OnStateChange != nil {
				opts.OnStateChange(State(from), State(to))
			}
		},
		// Failures are classified by the caller through Done's argument.
		IsSuccessful: func(err error) bool { return err == nil },
		IsExcluded:   func(err error) bool { return errors.Is(err, ErrNotAttempted) },
	})
	return b, nil
}

// State reports the current state (an open circuit whose timeout has passed
// reports half-open).
func (b *Breaker) State() State { return State(b.cb.State()) }

// Ready blocks while the circuit is open and returns nil once it is closed or
// half-open, or ctx's error. It reserves nothing.
func (b *Breaker) Ready(ctx context.Context) error {
	for {
		wake, state := b.waitChan()
		if state != Open {
			return nil
		}
		if err := b.sleep(ctx, wake); err != nil {
			return err
		}
	}
}

// ErrNotAttempted, given to done, says the attempt did not reach the API
// (it ended before any call): it counts neither way, and a half-open
// probe given it frees its slot for the next attempt without closing or
// opening the circuit.
var ErrNotAttempted = errors.New("circuit: the attempt did not reach the API")

// Acquire blocks until one attempt may proceed and returns done, which the
// caller must call exactly once with the attempt's error (nil for success).
// Errors that Options.IsFailure rejects count as successes: the API answered.
// A half-open probe abandoned with context.Canceled counts as a failure.
func (b *Breaker) Acquire(ctx context.Context) (done func(error), err error) {
	for {
		wake, _ := b.waitChan()
		report, err := b.cb.Allow()
		if err == nil {
			probe := b.State() == HalfOpen
			return func(attemptErr error) {
				if errors.Is(attemptErr, ErrNotAttempted) {
					report(ErrNotAttempted)
					b.signal() // a half-open slot is free again
					return
				}
				abandoned := errors.Is(attemptErr, context.Canceled)
				switch {
				case probe && errors.Is(attemptErr, context.Canceled):
					// An abandoned probe learnt nothing: counting it a
					// success would close the circuit on no evidence.
					// Counted a failure, the circuit stays open one more
					// period, which costs only time.
					attemptErr = errProbeAbandoned
				case attemptErr != nil && !b.isFailure(attemptErr):
					attemptErr = nil
				}
				if !abandoned {
					b.note(attemptErr)
				}
				report(attemptErr)
				b.signal() // a finished probe frees a half-open slot
			}, nil
		}
		if !errors.Is(err, gobreaker.ErrOpenState) && !errors.Is(err, gobreaker.ErrTooManyRequests) {
			return nil, fmt.Errorf("circuit: %w", err)
		}
		if err := b.sleep(ctx, wake); err != nil {
			return nil, err
		}
	}
}

// waitChan returns the channel closed on the next change, and the state
// observed after taking it, so no change between the two is missed.
func (b *Breaker) waitChan() (<-chan struct{}, State) {
	b.mu.Lock()
	ch := b.changed
	b.mu.Unlock()
	return ch, b.State()
}

// sleep waits for a change, ctx, or the end of the open period: gobreaker
// moves to half-open lazily, on the next call after the timeout, so nothing
// would close the channel at that moment.
func (b *Breaker) sleep(ctx context.Context, wake <-chan struct{}) error {
	b.mu.Lock()
	until := time.Until(b.openedAt.Add(b.openTimeout))
	b.mu.Unlock()
	if until <= 0 || until > b.openTimeout {
		until = b.openTimeout / 10
	}
	t := time.NewTimer(until)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
	case <-t.C:
	}
	return nil
}

// note records an attempt's verdict for Status.
func (b *Breaker) note(failure error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if failure != nil {
		b.lastFailure, b.lastFailureAt = failure, time.Now()
	} else {
		b.lastSuccessAt = time.Now()
	}
}

func (b *Breaker) signal() {
	b.mu.Lock()
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

var errProbeAbandoned = errors.New("circuit: probe abandoned")
