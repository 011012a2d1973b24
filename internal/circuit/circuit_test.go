package circuit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	errTransient = errors.New("503")
	errBusiness  = errors.New("400 INSUFFICIENT_POINT")
)

func newTestBreaker(t *testing.T, opts Options) *Breaker {
	t.Helper()
	if opts.IsFailure == nil {
		opts.IsFailure = func(err error) bool { return errors.Is(err, errTransient) }
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func attempt(t *testing.T, b *Breaker, result error) {
	t.Helper()
	done, err := b.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	done(result)
}

func TestOpensOnlyOnFailures(t *testing.T) {
	tests := []struct {
		name    string
		results []error
		want    State
	}{
		{"successes", []error{nil, nil, nil}, Closed},
		{"business errors prove health", []error{errBusiness, errBusiness, errBusiness, errBusiness}, Closed},
		{"failures below threshold", []error{errTransient, errTransient, nil, errTransient, errTransient}, Closed},
		{"consecutive failures", []error{errTransient, errTransient, errTransient}, Open},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTestBreaker(t, Options{ConsecutiveFailures: 3, OpenTimeout: time.Hour})
			for _, r := range tt.results {
				attempt(t, b, r)
			}
			if got := b.State(); got != tt.want {
				t.Fatalf("state = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFailureRatio(t *testing.T) {
	b := newTestBreaker(t, Options{ConsecutiveFailures: 100, FailureRatio: 0.5, MinRequests: 4, OpenTimeout: time.Hour})
	for _, r := range []error{errTransient, nil, errTransient} {
		attempt(t, b, r)
	}
	if b.State() != Closed {
		t.Fatal("opened below MinRequests")
	}
	attempt(t, b, nil) // 2 of 4 failed
	if b.State() != Closed {
		t.Fatal("opened on a success")
	}
	attempt(t, b, errTransient) // 3 of 5
	if b.State() != Open {
		t.Fatalf("state = %v, want open", b.State())
	}
}

func TestOpenHoldsThenProbes(t *testing.T) {
	var mu sync.Mutex
	var transitions []State
	b := newTestBreaker(t, Options{
		ConsecutiveFailures: 1,
		OpenTimeout:         30 * time.Millisecond,
		OnStateChange: func(_, to State) {
			mu.Lock()
			transitions = append(transitions, to)
			mu.Unlock()
		},
	})
	attempt(t, b, errTransient)

	// While open, Ready and Acquire hold instead of failing fast: with an
	// already-cancelled context they report only the context's error.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Ready(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ready while open = %v", err)
	}
	if _, err := b.Acquire(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire while open = %v", err)
	}

	// Once the open period ends the waiters get through: one probe.
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := b.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	probe, err := b.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.State() != HalfOpen {
		t.Fatalf("state = %v, want half-open", b.State())
	}

	// A second attempt waits for the probe's verdict.
	short, stopShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stopShort()
	if _, err := b.Acquire(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second attempt during the probe = %v, want it held", err)
	}
	probe(nil)
	attempt(t, b, nil)
	if b.State() != Closed {
		t.Fatalf("state = %v, want closed", b.State())
	}
	mu.Lock()
	defer mu.Unlock()
	want := []State{Open, HalfOpen, Closed}
	if len(transitions) != len(want) {
		t.Fatalf("transitions = %v, want %v", transitions, want)
	}
	for i := range want {
		if transitions[i] != want[i] {
			t.Fatalf("transitions = %v, want %v", transitions, want)
		}
	}
}

func TestFailedProbeReopens(t *testing.T) {
	b := newTestBreaker(t, Options{ConsecutiveFailures: 1, OpenTimeout: 20 * time.Millisecond})
	attempt(t, b, errTransient)
	attempt(t, b, errTransient) // waits out the open period, probes, fails
	if b.State() != Open {
		t.Fatalf("state = %v, want open", b.State())
	}
}

func TestNewRejectsBadRatio(t *testing.T) {
	if _, err := New(Options{FailureRatio: 1.5}); err == nil {
		t.Fatal("want error")
	}
}

// A half-open probe abandoned by its caller (revoke, shutdown) must not
// close the circuit.
func TestAbandonedProbeKeepsCircuitOpen(t *testing.T) {
	b, err := New(Options{ConsecutiveFailures: 1, OpenTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	done, err := b.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done(errors.New("boom"))
	if b.State() != Open {
		t.Fatalf("state %v after a failure", b.State())
	}
	probe, err := b.Acquire(ctx) // waits for half-open
	if err != nil {
		t.Fatal(err)
	}
	probe(context.Canceled)
	if b.State() == Closed {
		t.Fatal("an abandoned probe closed the circuit")
	}
}

// Off never opens, whatever fails, so nothing ever waits in Acquire or
// Ready: failures reach the caller's retry budget at once.
func TestOffNeverOpens(t *testing.T) {
	b := newTestBreaker(t, Options{Off: true, ConsecutiveFailures: 1, FailureRatio: 0.1, MinRequests: 1, OpenTimeout: time.Hour})
	for range 50 {
		attempt(t, b, errTransient)
	}
	if b.State() != Closed {
		t.Fatalf("state = %v, want closed", b.State())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a wait would return this error
	if err := b.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
}

// Status says when the circuit opened and what the last failure was; an
// abandoned attempt says nothing.
func TestStatus(t *testing.T) {
	b := newTestBreaker(t, Options{ConsecutiveFailures: 2, OpenTimeout: time.Hour})
	if st := b.Status(); st.State != Closed || !st.OpenedAt.IsZero() || st.LastFailure != nil || !st.LastSuccessAt.IsZero() {
		t.Fatalf("a new breaker: %+v", st)
	}
	attempt(t, b, errBusiness) // an answer: healthy
	st := b.Status()
	if st.LastSuccessAt.IsZero() || st.LastFailure != nil {
		t.Fatalf("after an answer: %+v", st)
	}
	attempt(t, b, errTransient)
	attempt(t, b, context.Canceled)
	st = b.Status()
	if st.State != Closed || !errors.Is(st.LastFailure, errTransient) || st.LastFailureAt.Before(st.LastSuccessAt) {
		t.Fatalf("after a failure and an abandoned attempt: %+v", st)
	}
	attempt(t, b, errTransient)
	attempt(t, b, errTransient)
	st = b.Status()
	if st.State != Open || st.OpenedAt.IsZero() || st.OpenTimeout != time.Hour {
		t.Fatalf("after two failures: %+v", st)
	}
}

// An attempt that made no call (answered from the ledger, another
// process's write heeded) says nothing of the API: it does not break a run
// of failures in the closed state, and as the half-open probe it neither
// closes nor reopens the circuit, but frees the slot for the next attempt,
// whose call decides.
func TestAttemptWithoutCallCountsNeitherWay(t *testing.T) {
	b, err := New(Options{ConsecutiveFailures: 3, OpenTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, e := range []error{errTransient, errTransient, ErrNotAttempted, errTransient} {
		attempt(t, b, e)
	}
	if b.State() != Open {
		t.Fatalf("state %v after three failures with a call-less attempt between them, want open", b.State())
	}
	probe, err := b.Acquire(ctx) // waits for half-open
	if err != nil {
		t.Fatal(err)
	}
	probe(ErrNotAttempted)
	if b.State() != HalfOpen {
		t.Fatalf("state %v after a probe without a call, want half-open", b.State())
	}
	if st := b.Status(); !st.LastSuccessAt.IsZero() {
		t.Fatalf("a call-less attempt noted as a success: %+v", st)
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	next, err := b.Acquire(actx) // the slot is free again
	if err != nil {
		t.Fatalf("the probe slot was not freed: %v", err)
	}
	next(nil)
	if b.State() != Closed {
		t.Fatalf("state %v after a probe whose call succeeded, want closed", b.State())
	}
}
