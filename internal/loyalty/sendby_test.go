package loyalty_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// A write call under WithSendBy sends no attempt after that time: not the
// first (its gate or slot waited past it) and not a retry after an answer
// known not to be applied (a 503 whose Retry-After ends past it). The call
// fails with ErrSendLate, not ambiguous, so the caller intends again; the
// bridge's ledger promised other processes that the write leaves by then.
func TestWriteNotSentAfterSendBy(t *testing.T) {
	clk := newFakeClock()
	s := &stubAPI{now: clk.Now, ttl: time.Hour, issued: map[string]time.Time{}}
	var writes atomic.Int64 // business requests that reached the partner
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && !strings.HasSuffix(r.URL.Path, "/openid-connect/token") {
			writes.Add(1)
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	grant, err := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: srv.URL, ClientID: "c", ClientSecret: stubSecret,
		Username: "u", Password: stubPassword, HTTPClient: srv.Client(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	c, err := loyalty.New(loyalty.Options{BaseURL: srv.URL, HTTPClient: srv.Client(), Now: clk.Now,
		Sleep:  func(_ context.Context, d time.Duration) error { clk.Advance(d); return nil },
		Retry:  loyalty.RetryPolicy{MaxAttempts: 5},
		Tokens: tokensource.NewCache(grant, tokensource.CacheOptions{Now: clk.Now})})
	if err != nil {
		t.Fatal(err)
	}
	req := accrual
	late := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, loyalty.ErrSendLate) || loyalty.IsAmbiguous(err) {
			t.Fatalf("%s: %v (ambiguous %v), want ErrSendLate, not ambiguous", what, err, loyalty.IsAmbiguous(err))
		}
	}

	// Past it before the first attempt: nothing reaches the partner.
	_, _, err = c.Accrue(loyalty.WithSendBy(context.Background(), clk.Now().Add(-time.Millisecond)), req)
	late("send-by passed", err)
	if n := writes.Load(); n != 0 {
		t.Fatalf("%d writes sent after their send-by", n)
	}

	// A 503 (Retry-After 1 s) at the first attempt: its retry would leave
	// after the send-by, 500 ms on, and is not sent.
	s.status.Store(http.StatusServiceUnavailable)
	_, _, err = c.Accrue(loyalty.WithSendBy(context.Background(), clk.Now().Add(500*time.Millisecond)), req)
	late("retry past send-by", err)
	if n := writes.Load(); n != 1 {
		t.Fatalf("%d writes sent, want 1 (its retry not sent)", n)
	}

	// Within it: the retry goes, and the write is made.
	s.status.Store(0)
	if _, _, err := c.Accrue(loyalty.WithSendBy(context.Background(), clk.Now().Add(time.Minute)), req); err != nil {
		t.Fatalf("within send-by: %v", err)
	}
	if n := s.ok.Load(); n != 1 {
		t.Fatalf("%d writes made, want 1", n)
	}
	// Reads are not writes: no send-by applies to them.
	if _, _, err := c.CustomerInfo(loyalty.WithSendBy(context.Background(), clk.Now().Add(-time.Hour)), "LB00000001"); err != nil {
		t.Fatalf("a read under a passed send-by: %v", err)
	}
}
