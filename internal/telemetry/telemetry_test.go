package telemetry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/apiendpoint"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"

func TestLoggerRedacts(t *testing.T) {
	canaries := []string{"hunter2-canary", "+84900000001", "canary@example.com", jwt, "079123456789", "B1234567", "12 Canary Street"}
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := NewLogger(LogOptions{Format: format, Level: "debug", Output: &buf})
			if err != nil {
				t.Fatal(err)
			}
			log = log.With(zap.String("client_secret", "hunter2-canary"))
			log.Info("token refreshed for Bearer "+jwt,
				zap.String("phone", "+84900000001"),
				zap.String("email", "canary@example.com"),
				zap.String("idNumber", "079123456789"),
				zap.String("passport-number", "B1234567"),
				zap.String("address", "12 Canary Street"),
				zap.String("detail", "server said: "+jwt),
				zap.Error(errors.New("refresh failed: token "+jwt)),
				zap.Any("access_token", map[string]string{"x": jwt}),
				zap.String("topic", "loyalty.purchase"),
			)
			out := buf.String()
			for _, c := range canaries {
				if strings.Contains(out, c) {
					t.Errorf("log line contains %q: %s", c, out)
				}
			}
			if !strings.Contains(out, "loyalty.purchase") || !strings.Contains(out, events.Redacted) {
				t.Errorf("log lost ordinary fields or markers: %s", out)
			}
		})
	}
}

func TestNewLoggerRejectsBadOptions(t *testing.T) {
	for _, o := range []LogOptions{{Format: "xml"}, {Level: "loud"}} {
		if _, err := NewLogger(o); err == nil {
			t.Errorf("%+v: want error", o)
		}
	}
}

func TestEndpoints(t *testing.T) {
	m := NewMetrics()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/point-accrual") {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer api.Close()
	client := &http.Client{Transport: m.InstrumentTransport(api.Client().Transport)}
	// The label is what the request's context names, whatever the path; a
	// request that names none is "other".
	for _, c := range []struct{ endpoint, path string }{
		{"point-accrual", "/api-point/partner/v1/point-accrual"},
		{"", "/realms/loyalty-partner/protocol/openid-connect/token"},
	} {
		req, err := http.NewRequestWithContext(apiendpoint.With(context.Background(), c.endpoint), http.MethodGet, api.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	m.SetOffsets("loyalty.purchase", 3, 90, 100)
	m.TokenGrant(nil)

	h := NewHealth(HealthOptions{})
	var joined atomic.Bool
	h.Check("group", func(context.Context) error {
		if !joined.Load() {
			return errors.New("not joined")
		}
		return nil
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ServeListener(ctx, ln, Handler(m, h)) }()
	base := "http://" + ln.Addr().String()

	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, body := get("/readyz"); code != 503 || body != "group: failing\n" {
		t.Errorf("/readyz = %d %s", code, body)
	}
	joined.Store(true)
	if code, body := get("/readyz"); code != 200 || body != "group: ok\n" {
		t.Errorf("/readyz after check passes = %d %s", code, body)
	}
	_, body := get("/metrics")
	for _, want := range []string{
		`loyalty_bridge_api_calls_total{endpoint="point-accrual",status="503"} 1`,
		`loyalty_bridge_token_refreshes_total{result="ok"} 1`,
		`loyalty_bridge_consumer_lag{partition="3",topic="loyalty.purchase"} 10`,
		`loyalty_bridge_api_call_duration_seconds_count{endpoint="other"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
