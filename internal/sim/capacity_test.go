package sim_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// gate keeps requests to one endpoint inside the Server (sim.SetHandling):
// each tells arrived, then waits for one value on release. Closing
// release lets every request through.
type gate struct {
	endpoint string
	arrived  chan struct{}
	release  chan struct{}
}

func newGate(endpoint string) *gate {
	return &gate{endpoint: endpoint, arrived: make(chan struct{}, 64), release: make(chan struct{})}
}

func (g *gate) hook(endpoint string) {
	if endpoint == g.endpoint {
		g.arrived <- struct{}{}
		<-g.release
	}
}

// await waits for n requests to be held, failing after a deadline.
func (g *gate) await(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-g.arrived:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d requests held after 5s", i, n)
		}
	}
}

type answer struct {
	status int
	err    error
}

// accrueAsync sends accruals tx… on their own goroutines; their answers
// come on the channel returned.
func (e *env) accrueAsync(txs ...string) <-chan answer {
	out := make(chan answer, len(txs))
	for _, tx := range txs {
		go func() {
			status, _, _, err := e.rawAccrual(context.Background(), tx)
			out <- answer{status, err}
		}()
	}
	return out
}

func wantAnswers(t *testing.T, answers <-chan answer, n, status int) {
	t.Helper()
	for range n {
		select {
		case a := <-answers:
			if a.err != nil || a.status != status {
				t.Fatalf("held request: %d %v, want %d", a.status, a.err, status)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("held request not answered 5s after its release")
		}
	}
}

// Capacity N: with N business requests in flight the next is answered at
// once, unhandled, with the over-capacity status, the error envelope and
// the faults' Retry-After; the token endpoints are not limited; once the
// held requests are answered there is room for N again.
func TestCapacity(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int // Options.OverCapacityStatus
		retryAfter time.Duration
		want       int
		header     []string
	}{
		{"default", 0, 0, 503, []string{"1"}},
		{"429", 429, 2500 * time.Millisecond, 429, []string{"3"}},
		{"503 without Retry-After", 503, sim.NoRetryAfter, 503, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate(sim.EndpointAccrual)
			e := newEnvHooked(t, func(o *sim.Options) {
				o.Capacity = 2
				o.OverCapacityStatus = tc.status
				o.Faults.RetryAfter = tc.retryAfter
			}, g.hook)
			t.Cleanup(func() { close(g.release) }) // before the env's cleanup: nothing stays held
			e.bearer()

			held := e.accrueAsync("T-1", "T-2")
			g.await(t, 2)
			over := []resp{e.get(sim.PathCustomerInfo + sim.MemberID(1)), e.post(sim.PathAccrual, accrual(1, "T-3", 1000, 0))}
			for _, r := range over {
				wantError(t, r, tc.want, sim.CodeOverCapacity)
				if got := r.header.Values("Retry-After"); fmt.Sprint(got) != fmt.Sprint(tc.header) {
					t.Fatalf("Retry-After %q, want %q", got, tc.header)
				}
			}
			if e.sim.Effects("T-3") != 0 {
				t.Fatal("a request over capacity was handled")
			}
			e.login() // token endpoints are not limited
			if e.sim.OverCapacity(sim.EndpointCustomerInfo) != 1 || e.sim.OverCapacity(sim.EndpointAccrual) != 1 ||
				e.sim.Calls(sim.EndpointCustomerInfo, tc.want) != 1 || e.sim.Calls(sim.EndpointAccrual, tc.want) != 1 {
				t.Fatalf("counters %+v", e.sim.Counters())
			}
			r := e.admin(http.MethodGet, "counters", "admin-secret", "")
			if oc, _ := r.body["overCapacity"].(map[string]any); oc[sim.EndpointAccrual] != 1.0 || oc[sim.EndpointCustomerInfo] != 1.0 {
				t.Fatalf("admin counters %s", r.raw)
			}

			g.release <- struct{}{}
			g.release <- struct{}{}
			wantAnswers(t, held, 2, 200)
			// Both places are free again, and still only two.
			held = e.accrueAsync("T-3", "T-4")
			g.await(t, 2)
			wantError(t, e.post(sim.PathAccrual, accrual(1, "T-5", 1000, 0)), tc.want, sim.CodeOverCapacity)
			g.release <- struct{}{}
			g.release <- struct{}{}
			wantAnswers(t, held, 2, 200)
			successData(t, e.get(sim.PathCustomerInfo+sim.MemberID(1)), "object")
			if e.sim.Effects("T-3") != 1 || e.sim.Effects("T-5") != 0 || e.sim.OverCapacity(sim.EndpointAccrual) != 2 {
				t.Fatalf("ledger %v, counters %+v", e.sim.Ledger(), e.sim.Counters())
			}
		})
	}
}

// A hung request holds its place until it ends.
func TestCapacityHeldByHang(t *testing.T) {
	arrived := make(chan struct{}, 8)
	e := newEnvHooked(t, func(o *sim.Options) {
		o.Capacity = 1
		o.Faults = sim.Faults{HangRate: 1, Endpoints: []string{sim.EndpointAccrual}}
	}, func(endpoint string) {
		if endpoint == sim.EndpointAccrual {
			arrived <- struct{}{}
		}
	})
	e.bearer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, _, err := e.rawAccrual(ctx, "T-1")
		done <- err
	}()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("accrual not in flight after 5s")
	}
	wantError(t, e.get(sim.PathCustomerInfo+sim.MemberID(1)), 503, sim.CodeOverCapacity)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("hung request answered")
	}
	// The place is given back before the call is counted.
	waitFor(t, func() bool { return e.sim.Calls(sim.EndpointAccrual, 0) == 1 })
	successData(t, e.get(sim.PathCustomerInfo+sim.MemberID(1)), "object")
}

// Without Capacity nothing is limited.
func TestCapacityUnlimitedByDefault(t *testing.T) {
	g := newGate(sim.EndpointAccrual)
	e := newEnvHooked(t, nil, g.hook)
	t.Cleanup(func() { close(g.release) })
	e.bearer()
	const n = 20
	txs := make([]string, n)
	for i := range txs {
		txs[i] = fmt.Sprint("T-", i)
	}
	held := e.accrueAsync(txs...)
	g.await(t, n)
	successData(t, e.get(sim.PathCustomerInfo+sim.MemberID(1)), "object")
	for range n {
		g.release <- struct{}{}
	}
	wantAnswers(t, held, n, 200)
	if c := e.sim.Counters(); len(c.OverCapacity) != 0 {
		t.Fatalf("%+v", c)
	}
}
