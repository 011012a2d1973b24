package authhold

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// Defaults of Options.
const (
	DefaultBackoff = 500 * time.Millisecond
	// DefaultMaxBackoff: a rewritten secret file, or an identity provider
	// back from a transient failure, is noticed within seconds. Probes are
	// cheap: after a refusal the token cache makes no login for minutes
	// unless the secret files change (tokensource.CacheOptions).
	DefaultMaxBackoff = 4 * time.Second
)

// Tokens is what a probe asks for a token (a *tokensource.Cache).
type Tokens interface {
	Token(ctx context.Context) (tokensource.Token, error)
}

// Options configures New. Tokens is required.
type Options struct {
	// Tokens is the token source a probe asks first: while it refuses, no
	// probe calls the API.
	Tokens Tokens
	// Backoff is the wait before the first probe after a refusal; it
	// doubles with every refused probe up to MaxBackoff (defaults
	// DefaultBackoff and DefaultMaxBackoff). The token cache adds its own
	// grant back-off: a probe during it fails without a grant.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// OnRefused is called for every refused attempt or probe, e.g. to
	// count them in a metric.
	OnRefused func()
	// OnChange is called (synchronously, keep it cheap) when the hold
	// starts (true) or ends (false), e.g. to set a gauge.
	OnChange func(held bool)
	// Logger receives one line per change of state. Nil means none.
	Logger *zap.Logger
}

// Hold is safe for concurrent use; share one per process.
type Hold struct {
	o   Options
	log *zap.Logger

	mu        sync.Mutex
	held      bool
	since     time.Time     // when the hold started
	cause     error         // the refusal that started or prolonged the hold
	probing   bool          // an admitted probe is in progress
	waiting   int           // attempts inside Admit while held
	failures  int           // refused probes since the hold started
	nextProbe time.Time     // no probe before this
	changed   chan struct{} // closed and replaced on every change
}

// New returns a Hold that is not holding.
func New(o Options) (*Hold, error) {
	if o.Tokens == nil {
		return nil, errors.New("authhold: Tokens is required")
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	o.MaxBackoff = max(o.MaxBackoff, o.Backoff)
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Hold{o: o, log: log, changed: make(chan struct{})}, nil
}

// Reason is an error that holds records for something other than refused
// credentials and says what: a sign or a wire encoding of the bridge's that
// the partner refuses. The hold is the same (every record would fail the
// same way, and no retry of one changes it); what an operator is told to
// check is not.
type Reason interface {
	HoldReason() string
}

// Why is what a hold for err is about, for a log line or a status: the
// Reason err carries, or "the partner refuses the credentials".
func Why(err error) string {
	var r Reason
	if errors.As(err, &r) {
		return r.HoldReason()
	}
	return "the partner refuses the credentials"
}

// ErrHeld is what Health wraps while credentials are refused.
var ErrHeld = errors.New("authhold: the partner refuses the credentials; records are held")

// Held reports whether attempts are being held.
func (h *Hold) Held() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// Status reports whether attempts are held, since when, and the refusal
// that holds them (which names no secret).
func (h *Hold) Status() (held bool, since time.Time, cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held, h.since, h.cause
}

// Health is nil unless attempts are held; then it is ErrHeld with the
// refusal (which names no secret).
func (h *Hold) Health() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.held {
		return nil
	}
	return errors.Join(ErrHeld, h.cause)
}

// Admit blocks while attempts are held and returns done, which the caller
// must call exactly once with the attempt's error (nil for success). An
// attempt whose error is a refused credential (loyalty.IsCredentialRefused)
// starts or prolongs the hold; the caller then calls Admit again rather
// than count the attempt. Admit returns ctx's error if ctx ends first.
func (h *Hold) Admit(ctx context.Context) (done func(error), err error) {
	h.mu.Lock()
	if !h.held {
		h.mu.Unlock()
		return h.done(false), nil
	}
	h.waiting++
	h.signalLocked() // the gate counts waiters
	defer func() {
		h.mu.Lock()
		h.waiting--
		h.signalLocked()
		h.mu.Unlock()
	}()
	for {
		if !h.held {
			h.mu.Unlock()
			return h.done(false), nil
		}
		wait := time.Until(h.nextProbe)
		if !h.probing && wait <= 0 {
			h.probing = true
			h.mu.Unlock()
			if _, err := h.o.Tokens.Token(ctx); err != nil {
				h.mu.Lock()
				h.probing = false
				if ctx.Err() != nil {
					h.signalLocked()
					h.mu.Unlock()
					return nil, ctx.Err()
				}
				h.refusedLocked(err, true)
				continue
			}
			return h.done(true), nil
		}
		wake, probing := h.changed, h.probing
		h.mu.Unlock()
		if err := sleep(ctx, wake, wait, probing); err != nil {
			return nil, err
		}
		h.mu.Lock()
	}
}

// sleep waits for a change, ctx, or (unless a probe is in progress, whose
// end is a change) the time to the next probe.
func sleep(ctx context.Context, wake <-chan struct{}, wait time.Duration, probing bool) error {
	var timeout <-chan time.Time
	if !probing {
		t := time.NewTimer(max(wait, 0))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
	case <-timeout:
	}
	return nil
}

// done returns the report function of one admitted attempt.
func (h *Hold) done(probe bool) func(error) {
	return func(err error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if probe {
			h.probing = false
		}
		switch {
		case loyalty.IsCredentialRefused(err):
			h.refusedLocked(err, probe)
		case probe && errors.Is(err, context.Canceled):
			// An abandoned probe learnt nothing; another waiter probes.
			h.signalLocked()
		case probe && h.held:
			h.held, h.failures, h.cause = false, 0, nil
			h.log.Info("partner credentials accepted again; held records resume")
			if h.o.OnChange != nil {
				h.o.OnChange(false)
			}
			h.signalLocked()
		}
	}
}

// refusedLocked starts the hold after a refusal, or prolongs it after a
// refused probe. A refusal of an attempt admitted before the hold began
// says nothing new. h.mu is held.
func (h *Hold) refusedLocked(err error, probe bool) {
	if h.o.OnRefused != nil {
		h.o.OnRefused()
	}
	h.cause = err
	if !h.held {
		h.held, h.failures, h.since = true, 0, time.Now()
		h.nextProbe = h.since.Add(h.o.Backoff)
		if r := Why(err); r != Why(nil) {
			h.log.Warn(r+"; records are held until the partner takes an attempt again", zap.Error(err))
		} else {
			h.log.Warn("partner refuses the credentials; records are held until a token is obtainable again", zap.Error(err))
		}
		if h.o.OnChange != nil {
			h.o.OnChange(true)
		}
		h.signalLocked()
		return
	}
	if !probe {
		return
	}
	h.failures++
	h.nextProbe = time.Now().Add(min(h.o.Backoff<<min(h.failures, 20), h.o.MaxBackoff))
	h.signalLocked()
}

// Ready blocks while attempts are held and some attempt already waits in
// the hold: dispatching more would only add waiters. It returns nil when
// dispatch may go on (one record at a time while held, so that a probe
// exists), or ctx's error. It implements pipeline.Gate.
func (h *Hold) Ready(ctx context.Context) error {
	for {
		h.mu.Lock()
		if !h.held || h.waiting == 0 {
			h.mu.Unlock()
			return nil
		}
		wake := h.changed
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

func (h *Hold) signalLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}
