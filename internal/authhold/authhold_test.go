package authhold

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// tokens refuses while refuse is set.
type tokens struct{ refuse atomic.Bool }

func (t *tokens) Token(context.Context) (tokensource.Token, error) {
	if t.refuse.Load() {
		return tokensource.Token{}, &loyalty.AuthError{HTTPStatus: http.StatusUnauthorized}
	}
	return tokensource.Token{AccessToken: "t"}, nil
}

var refused = &loyalty.AuthError{HTTPStatus: http.StatusUnauthorized}

// TestHoldAndResume: a refused attempt starts the hold (Health, OnChange,
// OnRefused); attempts then wait in Admit while tokens are refused, with
// the gate letting only one record in; once a token is obtainable the
// probe is admitted and its success ends the hold for every waiter.
func TestHoldAndResume(t *testing.T) {
	tk := &tokens{}
	var mu sync.Mutex
	var changes []bool
	var refusals atomic.Int32
	h, err := New(Options{Tokens: tk, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		OnRefused: func() { refusals.Add(1) },
		OnChange:  func(held bool) { mu.Lock(); changes = append(changes, held); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	done, err := h.Admit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tk.refuse.Store(true)
	done(refused)
	if !h.Held() || !errors.Is(h.Health(), ErrHeld) {
		t.Fatalf("after a refusal: held %v, health %v", h.Held(), h.Health())
	}

	admitted := make(chan func(error), 3)
	for range 3 {
		go func() {
			d, err := h.Admit(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			admitted <- d
		}()
	}
	// Probes are refused for a while: nobody is admitted, and the gate
	// holds dispatch since attempts are waiting.
	for refusals.Load() < 4 {
		select {
		case <-admitted:
			t.Fatal("an attempt was admitted while tokens were refused")
		case <-ctx.Done():
			t.Fatal("probes were not made")
		case <-time.After(time.Millisecond): // polling the probe count
		}
	}
	gateCtx, gateCancel := context.WithTimeout(ctx, 20*time.Millisecond)
	if err := h.Ready(gateCtx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Ready while held with waiters = %v, want it to block", err)
	}
	gateCancel()

	tk.refuse.Store(false)
	probe := <-admitted
	probe(nil) // the probe's call succeeded
	for range 2 {
		(<-admitted)(nil)
	}
	if h.Held() || h.Health() != nil {
		t.Errorf("after a successful probe: held %v, health %v", h.Held(), h.Health())
	}
	if err := h.Ready(ctx); err != nil {
		t.Errorf("Ready after the hold = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != 2 || !changes[0] || changes[1] {
		t.Errorf("OnChange calls %v, want [true false]", changes)
	}
}

// TestHoldCanceled: an attempt waiting in the hold returns ctx's error.
func TestHoldCanceled(t *testing.T) {
	tk := &tokens{}
	tk.refuse.Store(true)
	h, err := New(Options{Tokens: tk, Backoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	done, _ := h.Admit(context.Background())
	done(refused)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.Admit(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Admit on a canceled context = %v", err)
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New without Tokens succeeded")
	}
}

// Status says since when attempts are held and the refusal that holds
// them; nothing once the hold ended.
func TestStatus(t *testing.T) {
	tk := &tokens{}
	h, err := New(Options{Tokens: tk, Backoff: time.Millisecond, MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if held, since, cause := h.Status(); held || !since.IsZero() || cause != nil {
		t.Fatalf("a new hold: %v %v %v", held, since, cause)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := time.Now()
	done, err := h.Admit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done(refused)
	held, since, cause := h.Status()
	if !held || since.Before(before) || !errors.Is(cause, refused) {
		t.Fatalf("after a refusal: %v %v %v", held, since, cause)
	}
	probe, err := h.Admit(ctx) // tokens are obtainable: the probe is admitted
	if err != nil {
		t.Fatal(err)
	}
	probe(nil)
	if held, _, cause := h.Status(); held || cause != nil {
		t.Fatalf("after the probe succeeded: %v %v", held, cause)
	}
}

type reasoned struct{ error }

func (reasoned) HoldReason() string { return "the partner refuses the sign the bridge makes" }

// TestWhy: a hold's cause that carries a Reason names it, wrapped or not;
// any other cause is refused credentials.
func TestWhy(t *testing.T) {
	sign := reasoned{errors.New("sign iss is not shop-1")}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, "the partner refuses the credentials"},
		{"refused credentials", refused, "the partner refuses the credentials"},
		{"a reason", sign, "the partner refuses the sign the bridge makes"},
		{"a reason inside an AuthError", &loyalty.AuthError{HTTPStatus: http.StatusBadRequest, Err: sign}, "the partner refuses the sign the bridge makes"},
	} {
		if got := Why(tc.err); got != tc.want {
			t.Errorf("%s: Why = %q, want %q", tc.name, got, tc.want)
		}
	}
}
