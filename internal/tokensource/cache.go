package tokensource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
)

// Defaults of CacheOptions.
const (
	DefaultRefreshFraction = 0.2
	DefaultRefreshBefore   = 30 * time.Second
	DefaultFetchTimeout    = 30 * time.Second
	DefaultGrantBackoff    = time.Second
	// DefaultMaxGrantBackoff bounds how long after credentials are restored
	// the bridge notices: records held through a credentials outage resume
	// within it. One failed grant per 4 s per replica is no storm.
	DefaultMaxGrantBackoff = 4 * time.Second
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
	// grant call until GrantBackoff × 2^(failures−1), capped at
	// MaxGrantBackoff, has passed (defaults 1 s and 4 s). A refused
	// password retried by every record and every readiness probe could
	// lock the partner account.
	GrantBackoff    time.Duration
	MaxGrantBackoff time.Duration
	Now             func() time.Time // default time.Now
	Logger          *zap.Logger      // default no-op
	// OnGrant, when set, is called after every grant call with its error
	// (nil on success), e.g. to count refreshes in a metric.
	OnGrant func(err error)
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
		if c.failures > 0 && now.Before(c.nextGrant) {
			err := &BackoffError{Err: c.lastErr, Failures: c.failures, Next: c.nextGrant.Sub(now)}
			c.mu.Unlock()
			return Token{}, err
		}
		c.refreshing = true
		c.mu.Unlock()

		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.FetchTimeout)
		defer cancel()
		t, err := c.src.Token(fctx)
		if c.opts.OnGrant != nil {
			c.opts.OnGrant(err)
		}
		c.mu.Lock()
		c.refreshing = false
		if err == nil {
			c.tok, c.granted, c.lastErr, c.failures = t, true, nil, 0
		} else {
			c.failures++
			c.lastErr = err
			wait := min(c.opts.GrantBackoff<<min(c.failures-1, 20), c.opts.MaxGrantBackoff)
			c.nextGrant = c.opts.Now().Add(wait)
		}
		c.mu.Unlock()
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
