package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// A traced call's latency carries its trace id as the bucket's exemplar,
// which /metrics serves in the OpenMetrics format to a scraper that asks
// for it; an untraced call's carries none.
func TestLatencyExemplarCarriesTraceID(t *testing.T) {
	for _, traced := range []bool{true, false} {
		name := "untraced"
		if traced {
			name = "traced"
		}
		t.Run(name, func(t *testing.T) {
			e := newSimEnv(t, sim.Options{Members: 5})
			grant, err := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: e.url, ClientID: sim.DefaultClientID,
				ClientSecret: sim.DefaultClientSecret, Username: sim.DefaultUsername, Password: sim.DefaultPassword, HTTPClient: e.hc})
			if err != nil {
				t.Fatal(err)
			}
			o := loyalty.Options{BaseURL: e.url, HTTPClient: e.hc, Tokens: tokensource.NewCache(grant, tokensource.CacheOptions{})}
			ctx := context.Background()
			var traceID string
			if traced {
				e.m.Exemplars = true
				tp := sdktrace.NewTracerProvider()
				t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				o.Tracer = tp.Tracer("test")
				c, sp := o.Tracer.Start(ctx, "record")
				defer sp.End()
				ctx, traceID = c, sp.SpanContext().TraceID().String()
			}
			client, err := loyalty.New(o)
			if err != nil {
				t.Fatal(err)
			}
			// Not found: a business answer, and a call all the same.
			_, info, _ := client.LookupTransaction(ctx, loyalty.LookupRequest{LoyaltyID: sim.MemberID(1), TransactionID: "x-1"})
			if info.Attempts != 1 {
				t.Fatalf("%d attempts, want 1", info.Attempts)
			}
			srv := httptest.NewServer(telemetry.Handler(e.m, telemetry.NewHealth(telemetry.HealthOptions{})))
			defer srv.Close()
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0; charset=utf-8")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
				t.Fatalf("Content-Type %q: not OpenMetrics", ct)
			}
			var bucket string
			for _, l := range strings.Split(string(body), "\n") {
				if strings.HasPrefix(l, "loyalty_bridge_api_call_duration_seconds_bucket{") && strings.Contains(l, `endpoint="lookup-transaction"`) && strings.Contains(l, "#") {
					bucket = l
				}
			}
			switch {
			case traced && !strings.Contains(bucket, `# {trace_id="`+traceID+`"}`):
				t.Fatalf("no bucket of the lookup's latency has exemplar trace_id %s:\n%s", traceID, body)
			case !traced && bucket != "":
				t.Fatalf("an untraced call's latency has an exemplar: %s", bucket)
			}
		})
	}
}
