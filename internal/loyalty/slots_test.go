package loyalty_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/apiendpoint"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// A call slot is held from sending until the answer's body is closed;
// token grants take none.
func TestCallSlots(t *testing.T) {
	release := make(chan struct{})
	var arrived atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		if r.URL.Path == "/slow" {
			<-release
		}
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()
	defer close(release)
	var inUse atomic.Int32
	hc, err := loyalty.NewHTTPClient(loyalty.TransportOptions{MaxConns: 4, MaxCalls: 1, OnCalls: func(n int) { inUse.Store(int32(n)) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	get := func(ctx context.Context, endpoint, path string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(apiendpoint.With(ctx, endpoint), http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return hc.Do(req)
	}
	// The first call holds the only slot until the server answers.
	first := make(chan *http.Response, 1)
	go func() {
		resp, err := get(ctx, "point-accrual", "/slow")
		if err != nil {
			t.Error(err)
		}
		first <- resp
	}()
	for arrived.Load() < 1 {
		time.Sleep(time.Millisecond) // polling, not synchronising
	}
	if inUse.Load() != 1 {
		t.Fatalf("slots in use %d, want 1", inUse.Load())
	}
	// A second business call waits for the slot: it gives up at its
	// deadline without reaching the server.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := get(short, "lookup-transaction", "/fast"); err == nil {
		t.Fatal("a second call got a slot")
	}
	cancelShort()
	if n := arrived.Load(); n != 1 {
		t.Fatalf("%d requests reached the server", n)
	}
	// A token grant does not wait.
	for _, ep := range []string{tokensource.EndpointToken, tokensource.EndpointExchange} {
		resp, err := get(ctx, ep, "/token")
		if err != nil {
			t.Fatalf("%s while the slot is taken: %v", ep, err)
		}
		resp.Body.Close()
	}
	// The slot comes back when the first answer's body is closed.
	release <- struct{}{}
	resp := <-first
	if inUse.Load() != 1 {
		t.Fatalf("slot released before the body was closed (in use %d)", inUse.Load())
	}
	resp.Body.Close()
	if inUse.Load() != 0 {
		t.Fatalf("slots in use %d after close", inUse.Load())
	}
	resp, err = get(ctx, "lookup-transaction", "/fast")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
