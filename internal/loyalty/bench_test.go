package loyalty_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// BenchmarkClientOverheadStub compares a client call with a bare net/http call
// of the same request to the same server (here the stub API; BenchmarkClientOverhead uses the simulator), in the same run:
//
//	client   loyalty.Client (token cache, retry loop, envelope decode, typed result)
//	bare     http.NewRequest + Do + read the body, token taken once
//	bare+json   bare plus json.Unmarshal of the envelope (what any caller must do)
//
// client − bare+json is the client's own cost per call.
func BenchmarkClientOverheadStub(b *testing.B) {
	clk := newFakeClock()
	s := &stubAPI{now: clk.Now, ttl: time.Hour, issued: map[string]time.Time{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	hc, _ := loyalty.NewHTTPClient(loyalty.TransportOptions{MaxConns: 64})
	defer hc.CloseIdleConnections()
	grant, _ := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: srv.URL, ClientID: "c", ClientSecret: stubSecret,
		Username: "u", Password: stubPassword, HTTPClient: hc, Now: clk.Now})
	cache := tokensource.NewCache(grant, tokensource.CacheOptions{Now: clk.Now})
	c, err := loyalty.New(loyalty.Options{BaseURL: srv.URL, HTTPClient: hc, Tokens: cache})
	if err != nil {
		b.Fatal(err)
	}
	tok, err := cache.Token(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	benchOverhead(b, srv.URL, c, tok.AccessToken)
}

func benchOverhead(b *testing.B, baseURL string, client *loyalty.Client, token string) {
	ctx := context.Background()
	hc, _ := loyalty.NewHTTPClient(loyalty.TransportOptions{MaxConns: 64})
	defer hc.CloseIdleConnections()
	profileURL := baseURL + "/api-user/partner/v1/user-profile/LB00000001"
	accrualURL := baseURL + "/api-point/partner/v1/point-accrual"

	bare := func(b *testing.B, method, url string, body []byte, decode any) {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, _ := http.NewRequestWithContext(ctx, method, url, rd)
		req.Header.Set("Authorization", "Bearer "+token)
		// As the client sends it: the simulator, like a gateway enforcing
		// the spec, refuses a GET without it.
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		if decode != nil {
			if err := json.Unmarshal(data, decode); err != nil {
				b.Fatal(err)
			}
		}
	}
	type env[T any] struct {
		StatusCode int    `json:"statusCode"`
		Message    string `json:"message"`
		Data       *T     `json:"data"`
	}

	b.Run("profile/client", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := client.CustomerInfo(ctx, "LB00000001"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("profile/bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bare(b, http.MethodGet, profileURL, nil, nil)
		}
	})
	b.Run("profile/bare+json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v env[loyalty.MemberProfile]
			bare(b, http.MethodGet, profileURL, nil, &v)
		}
	})
	n := 0
	b.Run("accrue/client", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n++
			if _, _, err := client.Accrue(ctx, benchAccrual(n, "bench-c")); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("accrue/bare+json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n++
			body, _ := json.Marshal(benchAccrual(n, "bench-b"))
			var v env[loyalty.AccrualResult]
			bare(b, http.MethodPost, accrualURL, body, &v)
		}
	})
}

func benchAccrual(n int, prefix string) loyalty.AccrualRequest {
	return loyalty.AccrualRequest{LoyaltyID: fmt.Sprintf("LB%08d", 1+n%20), TransactionID: fmt.Sprintf("%s-%d", prefix, n),
		TransactionDate: loyalty.TransactionDate{Time: time.Now()}, TransactionAmount: 250000, TransactionCurrency: "VND"}
}
