package loyalty_test

// Sim-independent checks with a stub partner API (identity provider plus
// one business endpoint) whose token expiry follows a fake clock.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

const (
	stubSecret   = "stub-client-secret-42"
	stubPassword = "stub-password-42"
)

type stubAPI struct {
	now    func() time.Time
	ttl    time.Duration
	mu     sync.Mutex
	issued map[string]time.Time // token → expiry
	grants atomic.Int64
	ok     atomic.Int64
	unauth atomic.Int64
	status atomic.Int64 // forced status for business calls when non-zero
}

func (s *stubAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/openid-connect/token") {
		_ = r.ParseForm()
		if r.PostForm.Get("client_secret") != stubSecret || (r.PostForm.Get("grant_type") == "password" && r.PostForm.Get("password") != stubPassword) {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"error":"invalid_grant","error_description":"Invalid user credentials"}`)
			return
		}
		n := s.grants.Add(1)
		tok := fmt.Sprintf("eyJstub.%d.sig", n)
		s.mu.Lock()
		s.issued[tok] = s.now().Add(s.ttl)
		s.mu.Unlock()
		fmt.Fprintf(w, `{"access_token":%q,"expires_in":%g,"refresh_expires_in":3600,"refresh_token":"eyJrefresh.%d.sig","token_type":"Bearer","session_state":"x","scope":"profile"}`,
			tok, s.ttl.Seconds(), n)
		return
	}
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	exp, known := s.issued[tok]
	s.mu.Unlock()
	if !known || !s.now().Before(exp) {
		s.unauth.Add(1)
		w.WriteHeader(401)
		fmt.Fprint(w, `{"statusCode":401,"message":"Unauthorized","errors":{"code":"UNAUTHORIZED","message":"token expired"}}`)
		return
	}
	if st := s.status.Load(); st != 0 {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(int(st))
		fmt.Fprintf(w, `{"statusCode":%d,"message":"x","errors":{"code":"X","message":"x"}}`, st)
		return
	}
	s.ok.Add(1)
	ok(w, `{"loyaltyId":"LB00000001","transactionId":"t","bitReference":"B"}`)
}

func newStub(t *testing.T, clk *testkit.Clock, ttl time.Duration, password string, log *zap.Logger) (*stubAPI, *loyalty.Client, *sleeps) {
	t.Helper()
	s := &stubAPI{now: clk.Now, ttl: ttl, issued: map[string]time.Time{}}
	srv := httptest.NewServer(s)
	hc, _ := loyalty.NewHTTPClient(loyalty.TransportOptions{MaxConns: 64})
	grant, err := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: srv.URL, ClientID: "c", ClientSecret: stubSecret,
		Username: "u", Password: password, HTTPClient: hc, Now: clk.Now, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	sl := &sleeps{}
	c, err := loyalty.New(loyalty.Options{BaseURL: srv.URL, HTTPClient: hc, Logger: log, Sleep: sl.Sleep, Retry: loyalty.RetryPolicy{MaxAttempts: 2},
		Tokens: tokensource.NewCache(grant, tokensource.CacheOptions{Now: clk.Now, Logger: log})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(); hc.CloseIdleConnections() })
	return s, c, sl
}

func TestStubConcurrentCallersOneGrantPerExpiry(t *testing.T) {
	clk := newFakeClock()
	s, c, _ := newStub(t, clk, 2*time.Second, stubPassword, nil)
	const callers = 500
	rounds := 0
	for _, step := range []time.Duration{0, 1700 * time.Millisecond, 2500 * time.Millisecond, 1700 * time.Millisecond, 5 * time.Second} {
		clk.Advance(step)
		rounds++
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				if _, _, err := c.CustomerInfo(context.Background(), "LB00000001"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if s.grants.Load() != int64(rounds) || s.unauth.Load() != 0 || s.ok.Load() != int64(callers*rounds) {
		t.Fatalf("grants %d (want %d), 401s %d, ok %d", s.grants.Load(), rounds, s.unauth.Load(), s.ok.Load())
	}
}

func TestStubNoSecretInLogsOrErrors(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)
	clk := newFakeClock()
	s, c, _ := newStub(t, clk, time.Minute, stubPassword, log)
	var texts []string
	note := func(err error) {
		if err != nil {
			texts = append(texts, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
		}
	}
	ctx := context.Background()
	_, _, err := c.CustomerInfo(ctx, "LB00000001")
	note(err)
	clk.Advance(2 * time.Minute) // expired: refresh grant
	for _, st := range []int{503, 500, 429} {
		s.status.Store(int64(st))
		_, _, err = c.Accrue(ctx, accrual)
		note(err)
		_, _, err = c.CustomerInfo(ctx, "LB00000001")
		note(err)
	}
	_, bad, _ := newStub(t, clk, time.Minute, "wrong-"+stubPassword, log)
	_, _, err = bad.CustomerInfo(ctx, "LB00000001")
	if loyalty.Category(err) != loyalty.CategoryAuth {
		t.Fatalf("bad password: %v", err)
	}
	note(err)
	for _, e := range logs.All() {
		texts = append(texts, e.Message+" "+fmt.Sprint(e.ContextMap()))
	}
	if len(logs.All()) < 3 {
		t.Fatalf("only %d log lines", len(logs.All()))
	}
	for _, s := range texts {
		for _, secret := range []string{stubSecret, stubPassword, "eyJ"} {
			if strings.Contains(s, secret) {
				t.Errorf("%q leaks %s", s, secret)
			}
		}
	}
}
