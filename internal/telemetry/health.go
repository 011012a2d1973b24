package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Health holds named readiness checks. /healthz answers 200 while the
// process serves HTTP at all; /readyz answers 200 only when every check
// passes (joined the group, token obtained, registry reachable …).
type Health struct {
	mu     sync.Mutex
	checks map[string]func(context.Context) error
}

// NewHealth returns a Health with no checks (ready).
func NewHealth() *Health { return &Health{checks: map[string]func(context.Context) error{}} }

// Check registers or replaces a readiness check. A check must be quick;
// Ready gives all of them together one second.
func (h *Health) Check(name string, fn func(context.Context) error) {
	h.mu.Lock()
	h.checks[name] = fn
	h.mu.Unlock()
}

// Ready runs every check and returns their failures by name.
func (h *Health) Ready(ctx context.Context) map[string]string {
	h.mu.Lock()
	checks := make(map[string]func(context.Context) error, len(h.checks))
	for k, v := range h.checks {
		checks[k] = v
	}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	failed := map[string]string{}
	for name, fn := range checks {
		if err := fn(ctx); err != nil {
			failed[name] = err.Error()
		}
	}
	return failed
}

// Handler serves /metrics, /healthz and /readyz.
func Handler(m *Metrics, h *Health) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		failed := h.Ready(r.Context())
		names := make([]string, 0, len(failed))
		for n := range failed {
			names = append(names, n)
		}
		sort.Strings(names)
		w.Header().Set("Content-Type", "application/json")
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ready": len(failed) == 0, "failing": failed})
	})
	return mux
}

// Serve runs the telemetry endpoints on addr until ctx ends, then shuts the
// server down gracefully. An empty addr serves nothing and waits for ctx.
func Serve(ctx context.Context, addr string, handler http.Handler) error {
	if addr == "" {
		<-ctx.Done()
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ServeListener(ctx, ln, handler)
}

// ServeListener is Serve on an open listener (tests use port 0).
func ServeListener(ctx context.Context, ln net.Listener, handler http.Handler) error {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return err
}
