package tokensource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
)

// Defaults of CacheOptions.
const (
	DefaultRefreshFraction = 0.2
	DefaultRefreshBefore   = 30 * time.Second
	DefaultFetchTimeout    = 30 * time.Second
	DefaultGrantBackoff    = time.Second
	// DefaultMaxGrantBackoff bounds the wait after a transient grant
	// failure (no answer, a timeout, 408, 429, 5xx): the identity provider
	// is back within seconds of its recovery. Such failures are no login
	// attempts, so they cannot lock the account.
	DefaultMaxGrantBackoff = 4 * time.Second
	// DefaultRefusedBackoff and DefaultMaxRefusedBackoff are the waits
	// after a refused grant (bad credentials: not IsTransient): 1 s,
	// doubling to 5 minutes, 20 failed logins in the first hour and 12 an
	// hour after it, per replica, where a 4 s cap made 900, enough to trip
	// a brute-force lockout. It starts at a second, not at minutes: a
	// refusal that lasts seconds (a partner rotating its identity
	// provider's keys, a token revoked with its session) still ends within
	// seconds, and the long waits come only with a refusal that lasts. A
	// credential fixed by rewriting its file ends the wait at once
	// (CacheOptions.CredentialsChanged); one fixed at the identity provider
	// alone is noticed within the wait in force, at most the cap.
	DefaultRefusedBackoff    = time.Second
	DefaultMaxRefusedBackoff = 5 * time.Minute
)

// CacheOptions configures NewCache. The zero value gives the defaults.
type CacheOptions struct {
	// A token is refreshed ahead of expiry once less than
	// min(RefreshBefore, RefreshFraction × lifetime) of it remains
	// (defaults 30 s and 0.2: a 5-minute token is refreshed 30 s early, a
	// 2-second one 0.4 s early). While the ahead-of-time refresh runs,
	// other callers keep getting the still-valid token without waiting.
	RefreshFraction float64
	RefreshBefore   time.Duration
	// FetchTimeout bounds one grant call. The call runs detached from the
	// callers' contexts, so one impatient caller cannot fail it for the
	// others (default 30 s).
	FetchTimeout time.Duration
	// After a failed grant, callers get that failure back without a new
	// grant call until a back-off has passed. After a transient failure
	// (IsTransient) it is GrantBackoff × 2^(failures−1), capped at
	// MaxGrantBackoff (defaults 1 s and 4 s). After a refusal (any other
	// failure: the credentials are wrong, or cannot be read) it is
	// RefusedBackoff × 2^(refusals−1), capped at MaxRefusedBackoff
	// (defaults 1 s and 5 minutes; RefusedBackoff is at most
	// MaxRefusedBackoff). A refused password retried by every record and
	// every readiness probe, or every few seconds, could lock the partner
	// account.
	GrantBackoff      time.Duration
	MaxGrantBackoff   time.Duration
	RefusedBackoff    time.Duration
	MaxRefusedBackoff time.Duration
	// CredentialsChanged, when set, reports whether the credentials may
	// have changed since its previous call (a secretfile.Watch of the
	// secret files does). It is asked before every grant call and, while
	// backing off, at every call that would have made one: when it says
	// yes, the back-off ends and the new credentials are tried at once. It
	// must be cheap (a stat) and safe for concurrent use.
	CredentialsChanged func() bool
	Now                func() time.Time // default time.Now
	Logger             *zap.Logger      // default no-op
	// OnGrant, when set, is called after every grant call with its error
	// (nil on success), e.g. to count refreshes in a metric.
	OnGrant func(err error)
	// Tracer, when set, makes a span of each grant call ("token grant",
	// its result: ok, transient or refused), a child of the span of the
	// caller whose wait started it. nil: none (tracing off).
	Tracer trace.Tracer
}

// Cache wraps a Source with caching, proactive refresh and single flight.
// Safe for concurrent use; share one per process.
type Cache struct {
	src  Source
	opts CacheOptions
	log  *zap.Logger
	sf   singleflight.Group

	mu         sync.Mutex
	tok        Token
	refreshing bool
	granted    bool      // a grant succeeded at least once
	lastErr    error     // of the last grant, nil after a success
	failures   int       // consecutive failed grants
	refusals   int       // consecutive refused grants among them
	nextGrant  time.Time // no grant call before this while failing
}

// NewCache wraps src.
func NewCache(src Source, opts CacheOptions) *Cache {
	if opts.RefreshFraction <= 0 || opts.RefreshFraction >= 1 {
		opts.RefreshFraction = DefaultRefreshFraction
	}
	if opts.RefreshBefore <= 0 {
		opts.RefreshBefore = DefaultRefreshBefore
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = DefaultFetchTimeout
	}
	if opts.GrantBackoff <= 0 {
		opts.GrantBackoff = DefaultGrantBackoff
	}
	if opts.MaxGrantBackoff <= 0 {
		opts.MaxGrantBackoff = DefaultMaxGrantBackoff
	}
	if opts.RefusedBackoff <= 0 {
		opts.RefusedBackoff = DefaultRefusedBackoff
	}
	if opts.MaxRefusedBackoff <= 0 {
		opts.MaxRefusedBackoff = DefaultMaxRefusedBackoff
	}
	opts.RefusedBackoff = min(opts.RefusedBackoff, opts.MaxRefusedBackoff)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Cache{src: src, opts: opts, log: log}
}

// refreshAt is when t becomes due for a proactive refresh.
func (c *Cache) refreshAt(t Token) time.Time {
	ahead := time.Duration(float64(t.Lifetime()) * c.opts.RefreshFraction)
	ahead = min(ahead, c.opts.RefreshBefore)
	return t.Expiry.Add(-ahead)
}

// Token returns the cached token while it is fresh. In the refresh window
// the first caller refreshes (and still gets the old token if the refresh
// fails) while the others carry on with the old token; once it has expired
// every caller waits for the one grant call in flight.
func (c *Cache) Token(ctx context.Context) (Token, error) {
	now := c.opts.Now()
	c.mu.Lock()
	t, refreshing := c.tok, c.refreshing
	c.mu.Unlock()
	if t.Valid(now) {
		if now.Before(c.refreshAt(t)) || refreshing {
			return t, nil
		}
		nt, err := c.fetch(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("proactive token refresh failed; using the current token", zap.Error(err),
					zap.Time("expires", t.Expiry))
			}
			return t, nil
		}
		return nt, nil
	}
	return c.fetch(ctx)
}

// fetch joins or starts the one grant call.
func (c *Cache) fetch(ctx context.Context) (Token, error) {
	ch := c.sf.DoChan("token", func() (any, error) {
		// A flight that finished just before this one started may have
		// left a fresh token: use it rather than call again.
		c.mu.Lock()
		now := c.opts.Now()
		if t := c.tok; t.Valid(now) && now.Before(c.refreshAt(t)) {
			c.mu.Unlock()
			return t, nil
		}
		backingOff := c.failures > 0 && now.Before(c.nextGrant)
		c.mu.Unlock()
		// Flights are one at a time, so the question is asked by one
		// goroutine at a time, outside the lock (it is a system call).
		changed := c.opts.CredentialsChanged != nil && c.opts.CredentialsChanged()
		c.mu.Lock()
		if backingOff && !changed {
			err := &BackoffError{Err: c.lastErr, Failures: c.failures, Next: c.nextGrant.Sub(now)}
			c.mu.Unlock()
			return Token{}, err
		}
		cutShort := changed && c.failures > 0
		if cutShort {
			c.failures, c.refusals = 0, 0
		}
		c.refreshing = true
		c.mu.Unlock()
		if cutShort {
			c.log.Info("credentials changed; trying them without waiting out the back-off")
		}

		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.FetchTimeout)
		defer cancel()
		fctx, span := c.startGrant(fctx)
		t, err := c.src.Token(fctx)
		endGrant(span, err)
		if c.opts.OnGrant != nil {
			c.opts.OnGrant(err)
		}
		refused := err != nil && !IsTransient(err)
		c.mu.Lock()
		c.refreshing = false
		var wait time.Duration
		refusals := 0
		switch {
		case err == nil:
			c.tok, c.granted, c.lastErr, c.failures, c.refusals = t, true, nil, 0, 0
		case refused:
			c.failures++
			c.refusals++
			wait = min(c.opts.RefusedBackoff<<min(c.refusals-1, 20), c.opts.MaxRefusedBackoff)
		default:
			c.failures++
			wait = min(c.opts.GrantBackoff<<min(c.failures-1, 20), c.opts.MaxGrantBackoff)
		}
		if err != nil {
			c.lastErr = err
			c.nextGrant = c.opts.Now().Add(wait)
			refusals = c.refusals
		}
		c.mu.Unlock()
		if refused {
			c.log.Warn("token grant refused; no new login until the back-off passes or the credentials change",
				zap.Error(err), zap.Int("refusals", refusals), zap.Duration("backoff", wait))
		}
		if err != nil {
			return Token{}, err
		}
		c.log.Info("access token obtained", zap.Duration("lifetime", t.Lifetime()),
			zap.Time("expires", t.Expiry), zap.Bool("refreshable", t.RefreshToken != ""))
		return t, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return Token{}, r.Err
		}
		return r.Val.(Token), nil
	case <-ctx.Done():
		return Token{}, ctx.Err()
	}
}

// Invalidate drops the cached token if it is stale (the one a 401
// rejected), then tells the wrapped source.
func (c *Cache) Invalidate(stale Token) {
	c.mu.Lock()
	dropped := c.tok.AccessToken != "" && c.tok.AccessToken == stale.AccessToken
	if dropped {
		c.tok = Token{}
	}
	c.mu.Unlock()
	if dropped {
		c.log.Info("access token rejected by the service; dropped")
	}
	c.src.Invalidate(stale)
}

// Health reports, without any grant call, whether tokens are obtainable:
// nil once a grant succeeded and the last one did not fail. For readiness
// probes, which must not log in on every probe.
func (c *Cache) Health() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.lastErr != nil:
		return c.lastErr
	case !c.granted:
		return errors.New("tokensource: no token obtained yet")
	}
	return nil
}

// BackoffError is what callers get while the cache backs off after failed
// grants: the last grant's error, which it wraps (IsTransient and
// errors.As see through it).
type BackoffError struct {
	Err      error
	Failures int           // consecutive failed grants
	Next     time.Duration // until the next grant call may be made
}

func (e *BackoffError) Error() string {
	return fmt.Sprintf("%v (%d failed grants; next attempt in %s)", e.Err, e.Failures, e.Next.Round(time.Millisecond))
}

func (e *BackoffError) Unwrap() error { return e.Err }

// Cached returns the current token without any grant call (zero Token if
// none), e.g. for a readiness check.
func (c *Cache) Cached() Token {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tok
}

// ErrNoToken is what Static returns when it holds no token.
var ErrNoToken = errors.New("tokensource: no valid token")

// Static is a Source that always returns one token (for tests and for a
// token obtained by hand).
type Static struct{ T Token }

// Token returns s.T.
func (s Static) Token(context.Context) (Token, error) {
	if s.T.AccessToken == "" {
		return Token{}, ErrNoToken
	}
	return s.T, nil
}

// Invalidate does nothing.
func (Static) Invalidate(Token) {}
