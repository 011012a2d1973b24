package telemetry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Addresses of the telemetry server. DefaultAddr listens on every
// interface: Prometheus scrapes the pod, and the kubelet probes it, from
// outside, so a container needs that. Whoever else reaches the port reads
// every metric and the readiness of each check (no error detail, see
// Health); a NetworkPolicy, or LoopbackAddr outside a container, keeps them
// out. LoopbackAddr is what `dev` uses: a laptop's port is not for the
// café's network.
const (
	DefaultAddr  = ":9464"
	LoopbackAddr = "127.0.0.1:9464"
)

// Limits of the telemetry server. Its clients are Prometheus and the
// kubelet, whose requests are a line and a few headers and whose scrapes
// finish in seconds; anything slower or larger is not one of them, and
// must not hold a connection or memory of a process that handles money.
const (
	serverReadHeaderTimeout = 5 * time.Second
	serverReadTimeout       = 10 * time.Second
	serverWriteTimeout      = 30 * time.Second // a scrape of every series on a busy node
	serverIdleTimeout       = 60 * time.Second
	serverMaxHeaderBytes    = 16 << 10
)

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

// newServer is the telemetry server, with its limits.
func newServer(handler http.Handler) *http.Server {
	return &http.Server{Handler: handler, ReadHeaderTimeout: serverReadHeaderTimeout, ReadTimeout: serverReadTimeout,
		WriteTimeout: serverWriteTimeout, IdleTimeout: serverIdleTimeout, MaxHeaderBytes: serverMaxHeaderBytes}
}

// ServeListener is Serve on an open listener (tests use port 0).
func ServeListener(ctx context.Context, ln net.Listener, handler http.Handler) error {
	srv := newServer(handler)
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
