package testkit

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// SimOptions configures StartSim. The zero value is sim.New's defaults,
// served alone.
type SimOptions struct {
	sim.Options
	// Front, when set, sees every request first, with the simulator as
	// next: a test's way to answer for the partner (a status, a body the
	// simulator would not give) or to hold a call at a chosen point.
	Front func(w http.ResponseWriter, r *http.Request, next http.Handler)
}

// Sim is the partner API simulator served over HTTP (auth and base URL are
// both URL).
type Sim struct {
	*sim.Server
	URL string

	mu     sync.Mutex
	closed []func() // run after the server has closed (clients' idle connections)
}

// StartSim starts the simulator behind an httptest server. When tb ends
// the simulator lets hung requests go, the server closes, and then the
// clients NewClient made close their idle connections.
func StartSim(tb testing.TB, o SimOptions) *Sim {
	tb.Helper()
	srv, err := sim.New(o.Options)
	if err != nil {
		tb.Fatalf("testkit: partner simulator did not start: %v", err)
	}
	s := &Sim{Server: srv}
	var h http.Handler = srv
	if o.Front != nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { o.Front(w, r, srv) })
	}
	hs := httptest.NewServer(h)
	s.URL = hs.URL
	tb.Cleanup(func() {
		srv.Close()
		hs.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, f := range s.closed {
			f()
		}
	})
	return s
}

// AfterClose runs f when tb ends, after the simulator's server has closed:
// for a client of the test's own to close its idle connections, which the
// server's closing has ended. Safe for concurrent use.
func (s *Sim) AfterClose(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = append(s.closed, f)
}

// ClientOptions configures NewClient. The zero value is the simulator's
// demo credentials, loyalty's default transport and loyalty.New's defaults.
type ClientOptions struct {
	// Password is the password grant's (default sim.DefaultPassword; a
	// wrong one makes every call an AUTH failure).
	Password string
	// Transport builds the shared http.Client.
	Transport loyalty.TransportOptions
	// Cache configures the token cache; its Logger defaults to Logger.
	Cache tokensource.CacheOptions
	// Client configures the loyalty client; BaseURL, HTTPClient and Tokens
	// are set here, Logger defaults to Logger.
	Client loyalty.Options
	// Logger is the grant's, the cache's and the client's (default no-op).
	Logger *zap.Logger
}

// Client is the loyalty client wired to a simulator as `run` wires it: one
// shared http.Client, the password grant, a token cache.
type Client struct {
	*loyalty.Client
	HTTP   *http.Client
	Tokens *tokensource.Cache
}

// NewClient wires a loyalty client to s. Its idle connections are closed
// after s's server, when tb ends.
func NewClient(tb testing.TB, s *Sim, o ClientOptions) *Client {
	tb.Helper()
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Password == "" {
		o.Password = sim.DefaultPassword
	}
	hc, err := loyalty.NewHTTPClient(o.Transport)
	if err != nil {
		tb.Fatalf("testkit: HTTP client for the simulator: %v", err)
	}
	s.AfterClose(hc.CloseIdleConnections)
	grant, err := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: s.URL, ClientID: sim.DefaultClientID,
		ClientSecret: sim.DefaultClientSecret, Username: sim.DefaultUsername, Password: o.Password, HTTPClient: hc, Logger: o.Logger})
	if err != nil {
		tb.Fatalf("testkit: password grant for the simulator: %v", err)
	}
	if o.Cache.Logger == nil {
		o.Cache.Logger = o.Logger
	}
	c := &Client{HTTP: hc, Tokens: tokensource.NewCache(grant, o.Cache)}
	lo := o.Client
	lo.BaseURL, lo.HTTPClient, lo.Tokens = s.URL, hc, c.Tokens
	if lo.Logger == nil {
		lo.Logger = o.Logger
	}
	if c.Client, err = loyalty.New(lo); err != nil {
		tb.Fatalf("testkit: loyalty client for the simulator: %v", err)
	}
	return c
}
