package loyalty

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/noredirect"
)

// TLSOptions adds a private CA and/or a client certificate to the
// connection to the partner API. The zero value uses the system roots and
// no client certificate.
type TLSOptions struct {
	CAFile     string // PEM bundle trusted in addition to the system roots
	CertFile   string // client certificate (PEM), with KeyFile
	KeyFile    string
	ServerName string // overrides the name checked against the certificate
}

func (o TLSOptions) config() (*tls.Config, error) {
	if o == (TLSOptions{}) {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName}
	var errs []error
	if o.CAFile != "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		pem, err := os.ReadFile(o.CAFile)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("TLS CA file: %w", err))
		case !pool.AppendCertsFromPEM(pem):
			errs = append(errs, errors.New("TLS CA file: no PEM certificate found"))
		}
		cfg.RootCAs = pool
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		errs = append(errs, errors.New("TLS client certificate needs both CertFile and KeyFile"))
	} else if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			// tls errors name the problem, never the key bytes.
			errs = append(errs, fmt.Errorf("TLS client certificate: %w", err))
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, errors.Join(errs...)
}

// TransportOptions configures NewHTTPClient.
type TransportOptions struct {
	// MaxConns bounds connections to one host and is also the idle pool per
	// host, so a steady MaxConns concurrent callers never dial again
	// (default 64).
	MaxConns int
	TLS      TLSOptions
	// Wrap, when set, wraps the transport (e.g. telemetry's
	// InstrumentTransport). Every request the client and the token grants
	// make names its endpoint in its context: apiendpoint.From.
	Wrap func(http.RoundTripper) http.RoundTripper
}

// DefaultMaxConns is TransportOptions.MaxConns's default.
const DefaultMaxConns = 64

// NewHTTPClient builds the one http.Client a process should share for the
// partner API and its identity provider. It follows no redirect (see
// package noredirect). It sets no overall Timeout: the
// loyalty client bounds each attempt with Options.Timeout through the
// request context, and token grants are bounded by the token cache.
func NewHTTPClient(o TransportOptions) (*http.Client, error) {
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	tlsCfg, err := o.TLS.config()
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer().DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          o.MaxConns * 2,
		MaxIdleConnsPerHost:   o.MaxConns,
		MaxConnsPerHost:       o.MaxConns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       tlsCfg,
	}
	var rt http.RoundTripper = tr
	if o.Wrap != nil {
		rt = o.Wrap(rt)
	}
	return noredirect.Client(&http.Client{Transport: rt}), nil
}

// dialer sets up the connections: a partner that does not accept one
// within 5 s is given up on (the attempt's Options.Timeout may be far
// longer, and a black-holed address would hold every attempt that long),
// and idle connections are probed every 30 s so that a dead one is found
// before a call is sent on it.
func dialer() *net.Dialer {
	return &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
}
