package telemetry_test

// Metrics against the real protocol: the loyalty client and the token
// grants, over the simulator behind httptest, through the transport the
// service builds (loyalty.NewHTTPClient wrapped by InstrumentTransport).

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"maps"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
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
	s := testkit.StartSim(t, testkit.SimOptions{Options: opts})
	m := telemetry.NewMetrics()
	hc, err := loyalty.NewHTTPClient(loyalty.TransportOptions{Wrap: m.InstrumentTransport})
	if err != nil {
		t.Fatal(err)
	}
	s.AfterClose(hc.CloseIdleConnections)
	return &simEnv{sim: s.Server, url: s.URL, m: m, hc: hc}
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
		clk.Advance(tokensource.DefaultMaxRefusedBackoff) // past the back-off of a refused login: the next call is a grant
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

// labelCounts sums the series of the metric family name by their endpoint
// label: calls for a counter, observations for a histogram.
func labelCounts(t *testing.T, m *telemetry.Metrics, name string) map[string]int {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "endpoint" {
					out[l.GetValue()] += int(s.GetCounter().GetValue()) + int(s.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return out
}

// Each client method, called once over the simulator, and each grant type:
// every request is labelled with its own endpoint's name, as the client and
// the grants tell the transport, and the simulator, which routes by path,
// counts the same number of requests under the same name. Nothing is
// "other".
func TestEveryEndpointLabelled(t *testing.T) {
	business := []string{sim.EndpointCustomerInfo, sim.EndpointCustomerProfile, sim.EndpointOnboard, sim.EndpointLink,
		sim.EndpointUnlink, sim.EndpointAccrual, sim.EndpointRedemption, sim.EndpointLookup}
	for _, tc := range []struct {
		grant string // the grant's endpoint
	}{{tokensource.EndpointToken}, {tokensource.EndpointExchange}} {
		t.Run(tc.grant, func(t *testing.T) {
			key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			signer, err := signing.New(key, signing.Options{Issuer: sim.DefaultClientID, KID: "partner-1"})
			if err != nil {
				t.Fatal(err)
			}
			e := newSimEnv(t, sim.Options{Members: 5, PartnerKeys: []sim.PartnerKey{{KID: "partner-1", Key: signer.PublicKey()}}})
			var grant tokensource.Source
			if tc.grant == tokensource.EndpointExchange {
				grant, err = tokensource.NewExchange(tokensource.ExchangeOptions{BaseURL: e.url, Signer: signer, HTTPClient: e.hc})
			} else {
				grant, err = tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: e.url, ClientID: sim.DefaultClientID,
					ClientSecret: sim.DefaultClientSecret, Username: sim.DefaultUsername, Password: sim.DefaultPassword, HTTPClient: e.hc})
			}
			if err != nil {
				t.Fatal(err)
			}
			client, err := loyalty.New(loyalty.Options{BaseURL: e.url, HTTPClient: e.hc, Signer: signer,
				Tokens: tokensource.NewCache(grant, tokensource.CacheOptions{OnGrant: e.m.TokenGrant})})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			member := sim.MemberID(1)
			check := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			_, _, err = client.CustomerInfo(ctx, member)
			check("CustomerInfo", err)
			_, _, err = client.CustomerProfile(ctx, member)
			check("CustomerProfile", err)
			_, _, err = client.Onboard(ctx, loyalty.OnboardRequest{Phone: "+84901234567", FullName: "Nguyen Van An", Gender: "male",
				Birthday: "1990-01-31", IsKYC: true, IDNumber: "079201001234", PlaceOfIssue: "Ha Noi", PlaceOfBirth: "Hai Phong",
				IssueDate: "2020-01-15", ExpireDate: "2035-01-15", Nationality: "VNM", Address: "12 Ly Thuong Kiet", ExternalID: "E-1"})
			check("Onboard", err)
			_, _, err = client.Link(ctx, loyalty.LinkRequest{LoyaltyID: member, PartnerMemberID: "P-1"})
			check("Link", err)
			_, _, err = client.Unlink(ctx, loyalty.LinkRequest{LoyaltyID: member, PartnerMemberID: "P-1"})
			check("Unlink", err)
			_, _, err = client.Accrue(ctx, loyalty.AccrualRequest{LoyaltyID: member, TransactionID: "A-1",
				TransactionDate: loyalty.TransactionDate{Time: time.Now()}, TransactionAmount: 250000})
			check("Accrue", err)
			_, _, err = client.Redeem(ctx, loyalty.RedemptionRequest{TransactionID: "R-1", LoyaltyID: member,
				TransactionDate: "2026-11-22T10:00:00Z", TransactionAmount: 10, UsedPoint: 5})
			check("Redeem", err)
			_, _, err = client.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: member, TransactionID: "A-1"})
			check("LookupTransaction", err)

			want := append([]string{tc.grant}, business...)
			for _, family := range []string{"loyalty_bridge_api_calls_total", "loyalty_bridge_api_call_duration_seconds"} {
				got := labelCounts(t, e.m, family)
				if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(slices.Values(want))) {
					t.Errorf("%s endpoint labels %v, want %v", family, slices.Sorted(maps.Keys(got)), slices.Sorted(slices.Values(want)))
				}
				for _, name := range want {
					if n := e.sim.TotalCalls(name); got[name] != n || n == 0 {
						t.Errorf("%s{endpoint=%q} counts %d requests, the simulator %d", family, name, got[name], n)
					}
				}
			}
		})
	}
}
