package telemetry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
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
