package telemetry

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// HealthOptions configures NewHealth. The zero value is useful.
type HealthOptions struct {
	// Logger hears a check's failure, with its detail, when the check
	// starts failing, and its recovery (default no-op). It hears nothing
	// while a check keeps its state, so a probe every second does not
	// flood the log.
	Logger *zap.Logger
}

// Health holds named readiness checks. /healthz answers 200 while the
// process serves HTTP at all; /readyz answers 200 only when every check
// passes (joined the group, token obtained, registry reachable …).
//
// /readyz shows each check's name and state, never its error: a check's
// error may carry a peer's text (an identity provider's error field, a
// registry's message), and the port is reachable by whatever reaches the
// pod. The detail goes to the log, once per change of state.
type Health struct {
	log *zap.Logger

	mu      sync.Mutex
	checks  map[string]func(context.Context) error
	failing map[string]bool // the state each check was last seen in, for logging changes
}

// NewHealth returns a Health with no checks (ready).
func NewHealth(opts HealthOptions) *Health {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Health{log: log, checks: map[string]func(context.Context) error{}, failing: map[string]bool{}}
}

// Check registers or replaces a readiness check. A check must be quick;
// Ready gives all of them together one second. A check that asks a peer
// should be wrapped in Shared, so that probes do not become requests.
func (h *Health) Check(name string, fn func(context.Context) error) {
	h.mu.Lock()
	h.checks[name] = fn
	h.mu.Unlock()
}

// CheckState is one check's result, as /readyz shows it.
type CheckState struct {
	Name string
	OK   bool
}

// maxDetail bounds the failure detail logged for a check: the error may
// quote a peer.
const maxDetail = 512

// Ready runs every check and returns their states, sorted by name. A
// check that changes state is logged (see HealthOptions.Logger).
func (h *Health) Ready(ctx context.Context) []CheckState {
	h.mu.Lock()
	checks := make(map[string]func(context.Context) error, len(h.checks))
	for k, v := range h.checks {
		checks[k] = v
	}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	states := make([]CheckState, 0, len(checks))
	for name, fn := range checks {
		err := fn(ctx)
		states = append(states, CheckState{Name: name, OK: err == nil})
		h.observe(name, err)
	}
	sort.Slice(states, func(i, j int) bool { return states[i].Name < states[j].Name })
	return states
}

// observe logs a check's change of state. A check is passing until it is
// seen failing.
func (h *Health) observe(name string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	was := h.failing[name]
	switch {
	case err != nil && !was:
		h.failing[name] = true
		h.log.Warn("readiness check failing", zap.String("check", name), zap.String("detail", detail(err)))
	case err == nil && was:
		delete(h.failing, name)
		h.log.Info("readiness check passing", zap.String("check", name))
	}
}

// detail is err's text, cut to maxDetail bytes on a character boundary.
func detail(err error) string {
	s := err.Error()
	if len(s) <= maxDetail {
		return s
	}
	cut := maxDetail
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Handler serves /metrics, /healthz and /readyz. /readyz answers one line
// per check, "name: ok" or "name: failing", sorted by name, with 200 when
// all pass and 503 otherwise.
func Handler(m *Metrics, h *Health) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		ready := true
		for _, s := range h.Ready(r.Context()) {
			state := "ok"
			if !s.OK {
				state, ready = "failing", false
			}
			b.WriteString(s.Name + ": " + state + "\n")
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte(b.String()))
	})
	return mux
}
