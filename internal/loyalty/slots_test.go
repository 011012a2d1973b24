package loyalty_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
)

// With MaxCalls 1, a second call waits for the first's answer before its
// request is sent; a call whose context ends while it waits makes no
// request; and the slot is free again once an answer is read.
func TestMaxCalls(t *testing.T) {
	release := make(chan struct{})
	var arrived atomic.Int32
	var inUse atomic.Int32
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == 1 {
			// Or the call ends: a test that fails before release (its
			// deferred cancel) must not leave the server's Close waiting
			// for this handler for ever.
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		ok(w, `{"loyaltyId":"LB1","status":"ACTIVE"}`)
	}, func(o *loyalty.Options) {
		o.MaxCalls, o.OnCalls, o.Timeout = 1, func(n int) { inUse.Store(int32(n)) }, 20*time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, _, err := f.client.CustomerInfo(ctx, "LB1")
		first <- err
	}()
	for deadline := time.Now().Add(20 * time.Second); arrived.Load() < 1; {
		if time.Now().After(deadline) {
			t.Fatal("the first call never reached the server")
		}
		time.Sleep(time.Millisecond) // polling, not synchronising
	}
	if inUse.Load() != 1 {
		t.Fatalf("slots in use %d, want 1", inUse.Load())
	}
	// Waiting for the slot, its context ends: no request is made.
	short, cancelShort := context.WithCancel(ctx)
	waiting := make(chan error, 1)
	go func() {
		_, _, err := f.client.CustomerInfo(short, "LB2")
		waiting <- err
	}()
	cancelShort()
	if err := <-waiting; !errors.Is(err, context.Canceled) {
		t.Fatalf("a call cancelled while waiting for a slot: %v", err)
	}
	if n := arrived.Load(); n != 1 {
		t.Fatalf("%d requests reached the server", n)
	}
	// A second call waits, and goes once the first is answered.
	second := make(chan error, 1)
	go func() {
		_, _, err := f.client.CustomerInfo(ctx, "LB3")
		second <- err
	}()
	close(release)
	for _, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if n, u := arrived.Load(), inUse.Load(); n != 2 || u != 0 {
		t.Fatalf("%d requests, %d slots in use after both answers", n, u)
	}
}
