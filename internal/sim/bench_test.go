package sim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// accrualJSON is a request body built cheaply, so that the benchmark
// measures the simulator rather than the request's encoding.
func accrualJSON(member int, prefix string, n int64) []byte {
	return fmt.Appendf(nil, `{"loyaltyId":%q,"transactionId":"%s%d","itemId":"SKU-1","transactionDes":{"sku":"SKU-1","qty":1},`+
		`"transactionDate":1763787600000,"transactionAmount":150000,"transactionCurrency":"VND","extraData":{"store":"HN-01"}}`,
		sim.MemberID(member), prefix, n)
}

// BenchmarkAccrual is the simulator's own cost per accrual: handler only
// (token check, JSON in and out, state update), no network, parallel over
// 1,000 members with unique transaction ids. Later benchmarks subtract it
// to know the simulator is not their bottleneck.
func BenchmarkAccrual(b *testing.B) {
	e := newEnv(b, func(o *sim.Options) { o.Members = 1000; o.AccessTokenTTL = time.Hour })
	token := "Bearer " + e.bearer()
	var seq atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			body := accrualJSON(int(n%1000)+1, "B-", n)
			req := httptest.NewRequest(http.MethodPost, sim.PathAccrual, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", token)
			w := httptest.NewRecorder()
			e.sim.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	})
}

// BenchmarkAccrualHTTP is the same over loopback HTTP (keep-alive), i.e.
// what a client sees from an in-process simulator.
func BenchmarkAccrualHTTP(b *testing.B) {
	e := newEnv(b, func(o *sim.Options) { o.Members = 1000; o.AccessTokenTTL = time.Hour })
	e.client.Transport = &http.Transport{MaxIdleConnsPerHost: 256}
	token := "Bearer " + e.bearer()
	var seq atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			body := accrualJSON(int(n%1000)+1, "H-", n)
			req, _ := http.NewRequest(http.MethodPost, e.srv.URL+sim.PathAccrual, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", token)
			res, err := e.client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var out struct{ StatusCode int }
			_ = json.NewDecoder(res.Body).Decode(&out)
			res.Body.Close()
			if out.StatusCode != http.StatusOK {
				b.Fatalf("%d", out.StatusCode)
			}
		}
	})
}
