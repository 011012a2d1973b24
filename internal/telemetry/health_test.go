package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// serveTelemetry serves h on a loopback port until the test ends, through
// wrap when set, and returns its base URL.
func serveTelemetry(t *testing.T, h *Health, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	handler := Handler(NewMetrics(), h)
	if wrap != nil {
		handler = wrap(handler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ServeListener(ctx, ln, handler) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	return "http://" + ln.Addr().String()
}

func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestReadyzShowsStatesNotErrors: an identity provider refuses the grant
// with an error code that is a canary. /readyz names the failing check and
// nothing of the error; the log has the detail, once however many probes
// come, and the recovery once.
func TestReadyzShowsStatesNotErrors(t *testing.T) {
	const canary = "canary_idp_error_code"
	var refuse atomic.Bool
	refuse.Store(true)
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if refuse.Load() {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":%q,"error_description":"canary description"}`, canary)
			return
		}
		fmt.Fprint(w, `{"access_token":"eyJaccess.1.sig","expires_in":600,"token_type":"Bearer"}`)
	}))
	defer idp.Close()
	grant, err := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: idp.URL, ClientID: "cid",
		ClientSecret: "s", Username: "u", Password: "p", HTTPClient: idp.Client()})
	if err != nil {
		t.Fatal(err)
	}
	// Fake clock: the cache's back-off after a refusal must not hold the
	// second grant back.
	var clk atomic.Int64
	clk.Store(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clk.Load()) }
	tokens := tokensource.NewCache(grant, tokensource.CacheOptions{Now: now})
	if _, err := tokens.Token(context.Background()); err == nil || !strings.Contains(err.Error(), canary) {
		t.Fatalf("the grant's error does not carry the canary, so the test shows nothing: %v", err)
	}

	core, logs := observer.New(zap.InfoLevel)
	h := NewHealth(HealthOptions{Logger: zap.New(core)})
	h.Check("token", func(context.Context) error { return tokens.Health() })
	h.Check("group", func(context.Context) error { return nil })
	base := serveTelemetry(t, h, nil)

	for range 5 {
		code, body := getBody(t, base+"/readyz")
		if code != http.StatusServiceUnavailable || body != "group: ok\ntoken: failing\n" {
			t.Fatalf("/readyz = %d %q", code, body)
		}
	}
	failing := logs.FilterMessage("readiness check failing").All()
	if len(failing) != 1 || failing[0].ContextMap()["check"] != "token" || !strings.Contains(fmt.Sprint(failing[0].ContextMap()["detail"]), canary) {
		t.Fatalf("want one log line with the detail, got %v", logs.All())
	}

	refuse.Store(false)
	clk.Add(int64(time.Hour))
	if _, err := tokens.Token(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if code, body := getBody(t, base+"/readyz"); code != http.StatusOK || body != "group: ok\ntoken: ok\n" {
			t.Fatalf("/readyz after the grant = %d %q", code, body)
		}
	}
	if n := len(logs.FilterMessage("readiness check passing").All()); n != 1 || logs.Len() != 2 {
		t.Fatalf("want one recovery line and two lines in all, got %v", logs.All())
	}
}

// TestReadyzSharesTheRegistryCheck: N concurrent probes make one request
// to the registry, and so do further probes until the result is older than
// the TTL; then one probe asks again.
func TestReadyzSharesTheRegistryCheck(t *testing.T) {
	const probes = 16
	var requests atomic.Int32
	arrived := make(chan struct{})
	var arrivals atomic.Int32
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		// Answer once every probe is in: the others wait for this run.
		select {
		case <-arrived:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, `["loyalty.purchase-value"]`)
	}))
	defer registry.Close()
	var clk atomic.Int64
	now := func() time.Time { return time.Unix(0, clk.Load()) }
	h := NewHealth(HealthOptions{})
	h.Check("registry", Shared(func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, registry.URL+"/subjects", nil)
		if err != nil {
			return err
		}
		resp, err := registry.Client().Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}, ShareOptions{TTL: 5 * time.Second, Now: now}))
	base := serveTelemetry(t, h, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if arrivals.Add(1) == probes {
				close(arrived)
			}
			next.ServeHTTP(w, r)
		})
	})

	var wg sync.WaitGroup
	codes := make([]int, probes)
	for i := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(base + "/readyz")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	if n := requests.Load(); n != 1 {
		t.Fatalf("%d concurrent probes made %d registry requests, want 1", probes, n)
	}
	for _, c := range codes {
		if c != codes[0] {
			t.Fatalf("probes answered differently: %v", codes)
		}
	}
	getBody(t, base+"/readyz")
	clk.Add(int64(5*time.Second - 1))
	getBody(t, base+"/readyz")
	if n := requests.Load(); n != 1 {
		t.Fatalf("probes within the TTL made %d registry requests, want 1", n)
	}
	clk.Add(1)
	if code, body := getBody(t, base+"/readyz"); code != http.StatusOK || body != "registry: ok\n" {
		t.Fatalf("/readyz = %d %q", code, body)
	}
	if n := requests.Load(); n != 2 {
		t.Fatalf("after the TTL: %d registry requests, want 2", n)
	}
}

// TestSharedForgetsAbandonedRuns: a run whose caller gave up is not
// remembered (the next probe asks again); a failure and a run cut by its
// deadline are.
func TestSharedForgetsAbandonedRuns(t *testing.T) {
	for _, c := range []struct {
		name       string
		err        error
		ctx        func() (context.Context, context.CancelFunc)
		remembered bool
	}{
		{"failure", errors.New("registry down"), func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, true},
		{"deadline", context.DeadlineExceeded, func() (context.Context, context.CancelFunc) { return context.WithTimeout(context.Background(), 0) }, true},
		{"caller gone", context.Canceled, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var runs int
			check := Shared(func(ctx context.Context) error {
				runs++
				if runs == 1 {
					return c.err
				}
				return nil
			}, ShareOptions{Now: func() time.Time { return time.Time{} }})
			ctx, cancel := c.ctx()
			defer cancel()
			if err := check(ctx); !errors.Is(err, c.err) {
				t.Fatalf("first run: %v", err)
			}
			err := check(context.Background())
			if remembered := err != nil; remembered != c.remembered || runs != 2-b2i(c.remembered) {
				t.Fatalf("second probe got %v after %d runs; remembered %v, want %v", err, runs, remembered, c.remembered)
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestServerLimits: the telemetry server bounds headers, idle connections
// and slow clients; a request with 64 KiB of headers is refused.
func TestServerLimits(t *testing.T) {
	srv := newServer(http.NotFoundHandler())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 ||
		srv.MaxHeaderBytes <= 0 || srv.MaxHeaderBytes > 64<<10 {
		t.Fatalf("unbounded: %+v", srv)
	}
	base := serveTelemetry(t, NewHealth(HealthOptions{}), nil)
	req, err := http.NewRequest(http.MethodGet, base+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Padding", strings.Repeat("x", 64<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("64 KiB of headers: %d", resp.StatusCode)
	}
}
