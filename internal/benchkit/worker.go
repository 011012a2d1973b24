package benchkit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// Worker kinds: the contestants the bench runs by re-executing itself.
const (
	KindCeiling  = "ceiling"
	KindBaseline = "baseline"
)

// WorkerSpec is what the bench sends a worker process on its standard
// input (JSON), so that no setting or credential is on a command line.
type WorkerSpec struct {
	Kind     string   `json:"kind"`
	Scenario Scenario `json:"scenario"`
	// Events is how many events of the scenario the worker handles.
	Events int `json:"events"`
	// Base is the transactionDate of the ceiling's events.
	Base time.Time `json:"base"`
	// Launch is when the bench started the worker (Unix ns): the ceiling's
	// latencies count from it, as the bridge's do.
	Launch int64 `json:"launch"`

	SimURL       string `json:"simURL"`
	ClientID     string `json:"clientID"`
	ClientSecret string `json:"clientSecret"`
	Username     string `json:"username"`
	Password     string `json:"password"`

	// Baseline only.
	Brokers     []string `json:"brokers,omitempty"`
	RegistryURL string   `json:"registryURL,omitempty"`
	Group       string   `json:"group,omitempty"`
	// Topics are the stack's topic names (zero: codec's defaults).
	Topics codec.Topics `json:"topics"`

	// Profiled bridge only: the `loyalty-bridge run` arguments and the
	// CPU profile to write.
	BridgeArgs []string `json:"bridgeArgs,omitempty"`
	Profile    string   `json:"profile,omitempty"`
}

// WorkerResult is what a worker prints on its standard output (JSON).
type WorkerResult struct {
	Done       int    `json:"done"`
	Errors     int    `json:"errors"`
	FirstError string `json:"firstError,omitempty"`
	// Timing is set by the ceiling, which has no reply topic to observe;
	// CallP50Ms is its median call time.
	Timing    *Timing `json:"timing,omitempty"`
	CallP50Ms float64 `json:"callP50Ms,omitempty"`
}

// RunWorker is the body of `loyalty-bench worker`: it reads a WorkerSpec
// from in, does the work and writes a WorkerResult to out. The ceiling
// returns when done; the baseline runs until ctx ends (SIGTERM).
func RunWorker(ctx context.Context, in io.Reader, out io.Writer) error {
	var spec WorkerSpec
	if err := json.NewDecoder(in).Decode(&spec); err != nil {
		return fmt.Errorf("worker spec on stdin: %w", err)
	}
	var (
		res WorkerResult
		err error
	)
	switch spec.Kind {
	case KindCeiling:
		res, err = runCeiling(ctx, spec)
	case KindBaseline:
		res, err = runBaseline(ctx, spec)
	case KindBridge:
		res, err = runProfiledBridge(ctx, spec)
	default:
		return fmt.Errorf("worker kind %q: want %s, %s or %s", spec.Kind, KindCeiling, KindBaseline, KindBridge)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(res)
}

// apiClient assembles the partner API client the way the bridge does: one
// shared http.Client, a password grant behind a token cache.
func apiClient(spec WorkerSpec, conns int) (*loyalty.Client, *http.Client, error) {
	hc, err := loyalty.NewHTTPClient(loyalty.TransportOptions{MaxConns: conns})
	if err != nil {
		return nil, nil, err
	}
	grant, err := tokensource.NewPassword(tokensource.PasswordOptions{AuthURL: spec.SimURL, ClientID: spec.ClientID,
		ClientSecret: spec.ClientSecret, Username: spec.Username, Password: spec.Password, HTTPClient: hc})
	if err != nil {
		return nil, nil, err
	}
	cache := tokensource.NewCache(grant, tokensource.CacheOptions{})
	c, err := loyalty.New(loyalty.Options{BaseURL: spec.SimURL, Tokens: cache, HTTPClient: hc})
	if err != nil {
		return nil, nil, err
	}
	return c, hc, nil
}

// runCeiling calls accrual for every event from MaxInFlight goroutines and
// times each answer. With a rate, event i is due at launch + i/rate and is
// not called before (open loop, like the input topic of the others).
func runCeiling(ctx context.Context, spec WorkerSpec) (WorkerResult, error) {
	sc := spec.Scenario
	client, hc, err := apiClient(spec, sc.MaxInFlight)
	if err != nil {
		return WorkerResult{}, err
	}
	defer hc.CloseIdleConnections()
	var avail []int64
	if sc.Rate > 0 {
		avail = make([]int64, spec.Events)
		for i := range avail {
			avail[i] = spec.Launch + int64(float64(i)/float64(sc.Rate)*1e9)
		}
	}
	done := newCompletions(spec.Launch, spec.Events, avail)
	took := make([]int64, spec.Events) // ms
	var (
		next     atomic.Int64
		failed   atomic.Int64
		mu       sync.Mutex
		firstErr string
		wg       sync.WaitGroup
	)
	for range min(sc.MaxInFlight, spec.Events) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= spec.Events || ctx.Err() != nil {
					return
				}
				if avail != nil && sleepUntil(ctx, avail[i]) != nil {
					return
				}
				start := time.Now()
				_, _, err := client.Accrue(ctx, AccrualRequest(sc.Event(i, spec.Base)))
				took[i] = time.Since(start).Milliseconds()
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == "" {
						firstErr = err.Error()
					}
					mu.Unlock()
					continue
				}
				done.done[i] = time.Now().UnixNano()
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return WorkerResult{}, err
	}
	t := done.timing(avail != nil)
	return WorkerResult{Done: t.Done, Errors: int(failed.Load()), FirstError: firstErr, Timing: &t, CallP50Ms: medianMs(took)}, nil
}

// sleepUntil waits until the Unix-nanosecond time t or ctx's end.
func sleepUntil(ctx context.Context, t int64) error {
	d := time.Until(time.Unix(0, t))
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
