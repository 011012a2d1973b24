package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/loyalty-bridge/loyalty-bridge/internal/apiendpoint"
	"github.com/loyalty-bridge/loyalty-bridge/internal/authhold"
	"github.com/loyalty-bridge/loyalty-bridge/internal/circuit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
)

// WaitingFor says, for an operator, what records wait for at now: the
// partner refusing the credentials (the auth hold), an open or probing
// circuit, or attempts being retried after a failure (with the partner's
// Retry-After when it asked for one). held is set when the partner is
// known to be failing (hold or circuit), not merely retried. It returns
// "" when nothing holds records: they are calling, or queued behind
// others. Safe for concurrent use; without the partner API (a dry run)
// nothing holds records.
func (d *Deps) WaitingFor(now time.Time) (why string, held bool) {
	if d.Hold != nil {
		if on, since, cause := d.Hold.Status(); on {
			why = "the partner refuses the credentials since " + clock(since) + "; records are held until a token is obtainable again"
			if r := authhold.Why(cause); r != authhold.Why(nil) {
				why = r + " since " + clock(since) + "; records are held until the partner takes an attempt again"
			}
			if cause != nil {
				why += " (" + failure(cause) + ")"
			}
			return why, true
		}
	}
	if d.Breaker == nil {
		return "", false
	}
	st := d.Breaker.Status()
	last := ""
	if st.LastFailure != nil {
		last = fmt.Sprintf("last failure %s ago: %s", ago(now, st.LastFailureAt), failure(st.LastFailure))
	}
	switch st.State {
	case circuit.Open:
		why = "circuit open since " + clock(st.OpenedAt) + ", next probe at " + clock(st.OpenedAt.Add(st.OpenTimeout))
	case circuit.HalfOpen:
		why = "circuit half-open since " + clock(st.OpenedAt.Add(st.OpenTimeout)) + ": probing whether the partner API answers again"
	default:
		failing := st.LastFailure != nil && !st.LastFailureAt.Before(st.LastSuccessAt)
		waits, asked, askedAt := d.retries.status()
		calls := fmt.Sprintf("retrying: %d calls wait to be made again", waits)
		if waits == 1 {
			calls = "retrying: 1 call waits to be made again"
		}
		switch {
		case waits > 0 && asked != "" && !askedAt.Before(st.LastSuccessAt):
			return fmt.Sprintf("%s (%s, %s ago)", calls, asked, ago(now, askedAt)), false
		case waits > 0 && failing:
			return calls + " (" + last + ")", false
		case waits > 0:
			return calls, false
		case failing:
			return "retrying: " + last, false
		}
		return "", false
	}
	if last != "" {
		why += " (" + last + ")"
	}
	return why, true
}

// failure is the gist of an API call's error: the endpoint and the HTTP
// status or transport error, and the partner's Retry-After.
func failure(err error) string {
	var te *loyalty.TransientError
	if !errors.As(err, &te) {
		return err.Error()
	}
	s := te.Op
	switch {
	case te.Status != 0:
		s += fmt.Sprintf(" answered HTTP %d", te.Status)
	case te.Err != nil:
		cause := te.Err
		var ue *url.Error
		if errors.As(cause, &ue) { // the URL is known; its cause is the news
			cause = ue.Err
		}
		s += ": " + cause.Error()
	}
	if te.RetryAfter > 0 {
		s += fmt.Sprintf(", Retry-After %s", te.RetryAfter)
	}
	return s
}

func clock(t time.Time) string { return t.Format(time.TimeOnly) }

func ago(now, t time.Time) string { return max(now.Sub(t), 0).Round(100 * time.Millisecond).String() }

// retryWatch sees what makes calls wait to be retried: the client's waits
// before a retry (config.BuildOptions.Wait) and the partner's last answer
// asking for one (429 or 503 with Retry-After, seen in the transport).
// The zero value is ready; safe for concurrent use.
type retryWatch struct {
	mu      sync.Mutex
	waits   int       // calls waiting to be retried
	asked   string    // "point-accrual answered 503, Retry-After: 1"
	askedAt time.Time // when
}

// wait wraps the client's wait before a retry, counting the calls in it.
func (w *retryWatch) wait(inner func(context.Context, time.Duration) error) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		w.mu.Lock()
		w.waits++
		w.mu.Unlock()
		defer func() {
			w.mu.Lock()
			w.waits--
			w.mu.Unlock()
		}()
		return inner(ctx, d)
	}
}

// observe wraps the partner API's transport, noting answers that ask for
// a retry later. The header is shown as the partner sent it (trimmed to
// printable text): the client is what interprets it.
func (w *retryWatch) observe(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
			return resp, err
		}
		ra := resp.Header.Get("Retry-After")
		if ra == "" {
			return resp, err
		}
		ep, _ := apiendpoint.From(req.Context())
		if len(ra) > 40 {
			ra = ra[:40]
		}
		ra = strings.Map(func(r rune) rune {
			if unicode.IsPrint(r) {
				return r
			}
			return -1
		}, ra)
		w.mu.Lock()
		w.asked, w.askedAt = fmt.Sprintf("%s answered %d, Retry-After: %s", ep, resp.StatusCode, ra), time.Now()
		w.mu.Unlock()
		return resp, err
	})
}

func (w *retryWatch) status() (waits int, asked string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waits, w.asked, w.askedAt
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
