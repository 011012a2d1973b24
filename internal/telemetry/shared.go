package telemetry

import (
	"context"
	"errors"
	"sync"
	"time"
)

// DefaultShareTTL is how long Shared reuses a check's result by default:
// whatever the probes' rate, a pod asks the peer at most once in this
// time, and readiness lags the peer by at most as much.
const DefaultShareTTL = 5 * time.Second

// ShareOptions configures Shared. The zero value is useful.
type ShareOptions struct {
	TTL time.Duration    // how long a result is reused (default DefaultShareTTL)
	Now func() time.Time // test hook (default time.Now)
}

// Shared wraps a readiness check that asks a peer (the schema registry)
// so that probes do not turn into requests: a result is reused for TTL,
// and probes that arrive while the check runs wait for that run instead
// of starting their own. A probe that gives up waiting gets its context's
// error and leaves the run alone; a run whose own caller gave up
// (context.Canceled) is not remembered, and the next probe runs the check
// again. A run cut by its deadline is remembered as the failure it is: the
// peer did not answer in time. The returned function is safe for
// concurrent use.
func Shared(check func(context.Context) error, o ShareOptions) func(context.Context) error {
	s := &shared{check: check, ttl: o.TTL, now: o.Now}
	if s.ttl <= 0 {
		s.ttl = DefaultShareTTL
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s.run
}

type shared struct {
	check func(context.Context) error
	ttl   time.Duration
	now   func() time.Time

	mu      sync.Mutex
	have    bool      // at and err hold a result
	at      time.Time // when the result was obtained
	err     error
	running chan struct{} // closed when the run in progress ends; nil when none runs
}

func (s *shared) run(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.have && s.now().Sub(s.at) < s.ttl {
			err := s.err
			s.mu.Unlock()
			return err
		}
		if wait := s.running; wait != nil {
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		done := make(chan struct{})
		s.running = done
		s.mu.Unlock()
		return s.lead(ctx, done)
	}
}

// lead runs the check for every waiting probe. The run ends, and the
// waiters go on, even if the check panics (nothing is remembered then).
func (s *shared) lead(ctx context.Context, done chan struct{}) error {
	finished := false
	var err error
	defer func() {
		s.mu.Lock()
		if finished && !errors.Is(ctx.Err(), context.Canceled) {
			s.have, s.at, s.err = true, s.now(), err
		}
		s.running = nil
		close(done)
		s.mu.Unlock()
	}()
	err = s.check(ctx)
	finished = true
	return err
}
