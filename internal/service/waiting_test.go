package service

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/apiendpoint"
	"github.com/loyalty-bridge/loyalty-bridge/internal/authhold"
	"github.com/loyalty-bridge/loyalty-bridge/internal/circuit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

type refusingTokens struct{}

func (refusingTokens) Token(context.Context) (tokensource.Token, error) {
	return tokensource.Token{}, &loyalty.AuthError{HTTPStatus: http.StatusUnauthorized}
}

// WaitingFor says what holds records, from the breaker, the auth hold and
// the calls waiting to be retried, each in an operator's words.
func TestWaitingFor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	br, err := circuit.New(circuit.Options{ConsecutiveFailures: 2, OpenTimeout: 50 * time.Millisecond,
		IsFailure: loyalty.IsAPIFailure})
	if err != nil {
		t.Fatal(err)
	}
	d := &Deps{Breaker: br}
	check := func(what, want string, wantHeld bool) {
		t.Helper()
		why, held := d.WaitingFor(time.Now())
		if !strings.Contains(why, want) || held != wantHeld || (want == "" && why != "") {
			t.Errorf("%s: %q held %v, want %q held %v", what, why, held, want, wantHeld)
		}
	}
	attempt := func(err error) {
		t.Helper()
		done, aerr := br.Acquire(ctx)
		if aerr != nil {
			t.Fatal(aerr)
		}
		done(err)
	}
	check("nothing happened", "", false)

	failed := &loyalty.TransientError{Op: "point-accrual", Ref: "T-1", Status: 503, RetryAfter: time.Second, Attempts: 2}
	attempt(failed)
	check("one failure", "retrying: last failure ", false)
	check("one failure", "ago: point-accrual answered HTTP 503, Retry-After 1s", false)

	// A call waiting out the partner's Retry-After, seen in the transport.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	req, _ := http.NewRequestWithContext(apiendpoint.With(ctx, "point-accrual"), http.MethodPost, srv.URL, nil)
	resp, err := d.retries.observe(nil).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waiting := make(chan struct{})
	released := make(chan error, 1)
	wctx, stop := context.WithCancel(ctx)
	go func() {
		released <- d.retries.wait(func(ctx context.Context, _ time.Duration) error {
			close(waiting)
			<-ctx.Done()
			return ctx.Err()
		})(wctx, time.Second)
	}()
	<-waiting
	check("a call waiting to be retried", "retrying: 1 call waits to be made again (point-accrual answered 503, Retry-After: 1, ", false)
	stop()
	if err := <-released; !errors.Is(err, context.Canceled) {
		t.Fatalf("wait: %v", err)
	}

	attempt(failed)
	check("the circuit opened", "circuit open since ", true)
	check("the circuit opened", "(last failure ", true)
	for br.State() != circuit.HalfOpen { // the open period is 50 ms
		if ctx.Err() != nil {
			t.Fatal("the circuit stayed open")
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
	check("the open period passed", "circuit half-open since ", true)

	hold, err := authhold.New(authhold.Options{Tokens: refusingTokens{}})
	if err != nil {
		t.Fatal(err)
	}
	d.Hold = hold
	done, err := hold.Admit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done(&loyalty.AuthError{Op: "point-accrual", HTTPStatus: http.StatusUnauthorized})
	check("credentials refused", "the partner refuses the credentials since ", true)
	check("credentials refused", "records are held until a token is obtainable again (loyalty: point-accrual: not authorised (HTTP 401))", true)

	// A hold for a refused encoding says so, not "credentials".
	hold, err = authhold.New(authhold.Options{Tokens: refusingTokens{}})
	if err != nil {
		t.Fatal(err)
	}
	d.Hold = hold
	if done, err = hold.Admit(ctx); err != nil {
		t.Fatal(err)
	}
	done(&loyalty.AuthError{Op: "point-accrual", HTTPStatus: http.StatusBadRequest, Err: heldForTest{}})
	check("encoding refused", "the partner refuses the bridge's encoding of transactionDate since ", true)
	check("encoding refused", "records are held until the partner takes an attempt again", true)

	if why, held := (&Deps{}).WaitingFor(time.Now()); why != "" || held {
		t.Errorf("without the partner API: %q %v", why, held)
	}
}

// heldForTest is a hold's cause with a reason, as the bridge makes for a
// refused encoding.
type heldForTest struct{}

func (heldForTest) Error() string {
	return "the partner refused the transactionDate the bridge encoded"
}
func (heldForTest) HoldReason() string {
	return "the partner refuses the bridge's encoding of transactionDate"
}
