package telemetry_test

// Metrics against the real protocol: the loyalty client and the token
// grants, over the simulator behind httptest, through the transport the
// service builds (loyalty.NewHTTPClient wrapped by InstrumentTransport).

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// fakeClock is a clock the test moves; read from the cache's grant
// goroutine, hence atomic.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// simEnv is the simulator over HTTP and the instrumented shared client.
type simEnv struct {
	sim *sim.Server
	url string
	m   *telemetry.Metrics
	hc  *http.Client
}

func newSimEnv(t *testing.T, opts sim.Options) *simEnv {
	t.Helper()
	s, err := sim.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	m := telemetry.NewMetrics()
	hc, err := loyalty.NewHTTPClient(loyalty.TransportOptions{Wrap: m.InstrumentTransport})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); srv.Close(); hc.CloseIdleConnections() })
	return &simEnv{sim: s, url: srv.URL, m: m, hc: hc}
}

func (e *simEnv) passwordCache(t *testing.T, password string, clk *fakeClock) *tokensource.Cache {
	t.Helper()
	grant, err := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: e.url, ClientID: sim.DefaultClientID,
		ClientSecret: sim.DefaultClientSecret, Username: sim.DefaultUsername, Password: password, HTTPClient: e.hc, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return tokensource.NewCache(grant, tokensource.CacheOptions{Now: clk.Now, OnGrant: e.m.TokenGrant})
}

func (e *simEnv) refreshes(result string) int {
	return int(counter(e.m.TokenRefreshes.WithLabelValues(result)))
}

func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// N failed grants count N errors, not 2N: the cache's OnGrant counts a
// grant once and the transport, which sees the grant's request, does not
// count it again. (The token-error alert names a number of failures.)
func TestFailedGrantsCountedOnce(t *testing.T) {
	e := newSimEnv(t, sim.Options{})
	clk := newFakeClock()
	cache := e.passwordCache(t, "wrong", clk)
	const n = 5
	for i := range n {
		if _, err := cache.Token(context.Background()); err == nil {
			t.Fatalf("grant %d: a wrong password was accepted", i)
		}
		clk.Advance(tokensource.DefaultMaxGrantBackoff) // past the cache's back-off: the next call is a grant
	}
	if got := e.sim.TotalCalls(sim.EndpointToken); got != n {
		t.Fatalf("%d grant requests, want %d", got, n)
	}
	if got := e.refreshes("error"); got != n {
		t.Errorf("token_refreshes_total{result=\"error\"} = %d after %d failed grants", got, n)
	}
	if got := e.refreshes("ok"); got != 0 {
		t.Errorf("token_refreshes_total{result=\"ok\"} = %d, want 0", got)
	}
}

// A refused refresh that falls back to a login is one good grant, though
// it made two requests, one of them answered 400.
func TestRefreshFallbackIsOneGoodGrant(t *testing.T) {
	e := newSimEnv(t, sim.Options{})
	clk := newFakeClock()
	cache := e.passwordCache(t, sim.DefaultPassword, clk)
	tok, err := cache.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	e.sim.RevokeTokens()
	cache.Invalidate(tok) // as after a 401
	if _, err := cache.Token(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.sim.TotalCalls(sim.EndpointToken); got != 3 {
		t.Fatalf("%d token requests, want 3 (login, refused refresh, login)", got)
	}
	if ok, bad := e.refreshes("ok"), e.refreshes("error"); ok != 2 || bad != 0 {
		t.Errorf("token_refreshes_total ok=%d error=%d, want 2 and 0", ok, bad)
	}
}
