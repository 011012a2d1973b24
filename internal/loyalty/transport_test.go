package loyalty_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
)

func writePEM(t *testing.T, path, typ string, der []byte) string {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A private CA and a client certificate (mutual TLS) from files.
func TestTLSOptions(t *testing.T) {
	dir := t.TempDir()
	// Client certificate, self-signed, trusted by the server.
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "partner"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, _ := x509.ParseCertificate(der)
	certFile := writePEM(t, filepath.Join(dir, "client.pem"), "CERTIFICATE", der)
	kder, _ := x509.MarshalECPrivateKey(key)
	keyFile := writePEM(t, filepath.Join(dir, "client.key"), "EC PRIVATE KEY", kder)

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			w.WriteHeader(403)
			return
		}
		ok(w, `{"loyaltyId":"LB1"}`)
	}))
	pool := x509.NewCertPool()
	pool.AddCert(clientCert)
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()
	caFile := writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", srv.Certificate().Raw)

	hc, err := loyalty.NewHTTPClient(loyalty.TransportOptions{TLS: loyalty.TLSOptions{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}})
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	c, _ := loyalty.New(loyalty.Options{BaseURL: srv.URL, HTTPClient: hc, Tokens: &tokens{}})
	if _, _, err := c.CustomerInfo(context.Background(), "LB1"); err != nil {
		t.Fatal(err)
	}

	// Without the CA the server is not trusted.
	plain, _ := loyalty.New(loyalty.Options{BaseURL: srv.URL, Tokens: &tokens{}, Retry: loyalty.RetryPolicy{MaxAttempts: 1}})
	defer plain.Close()
	if _, _, err := plain.CustomerInfo(context.Background(), "LB1"); err == nil {
		t.Fatal("untrusted server accepted")
	}

	for name, o := range map[string]loyalty.TLSOptions{
		"missing CA":     {CAFile: filepath.Join(dir, "nope.pem")},
		"not a CA":       {CAFile: keyFile},
		"cert w/o key":   {CertFile: certFile},
		"mismatched key": {CertFile: certFile, KeyFile: caFile},
	} {
		if _, err := loyalty.NewHTTPClient(loyalty.TransportOptions{TLS: o}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A CA file is trusted in addition to the system roots, never instead of
// them: configuring a private CA leaves a partner (or a gateway in front
// of it) with a public certificate reachable.
func TestTLSCAFileKeepsSystemRoots(t *testing.T) {
	sys, err := x509.SystemCertPool()
	if err != nil || sys.Equal(x509.NewCertPool()) {
		t.Skip("no system roots on this platform")
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "private CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	caFile := writePEM(t, filepath.Join(t.TempDir(), "ca.pem"), "CERTIFICATE", der)
	var tr *http.Transport
	hc, err := loyalty.NewHTTPClient(loyalty.TransportOptions{TLS: loyalty.TLSOptions{CAFile: caFile},
		Wrap: func(rt http.RoundTripper) http.RoundTripper { tr, _ = rt.(*http.Transport); return rt }})
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	if tr == nil || tr.TLSClientConfig == nil {
		t.Fatalf("transport %#v: no TLS configuration", tr)
	}
	want := sys.Clone()
	want.AddCert(ca)
	if !tr.TLSClientConfig.RootCAs.Equal(want) {
		t.Fatal("the trusted roots are not the system's and the CA file's")
	}
}

// The transport's bounds: MaxConns connections to a host, as many kept
// idle (twice that in all), 64 when unset or negative — never unbounded;
// idle connections closed after 90 s, a TLS handshake given 5 s, a body
// held back for 100-continue at most 1 s.
func TestTransportBounds(t *testing.T) {
	for _, tc := range []struct{ maxConns, want int }{{0, 64}, {-3, 64}, {1, 1}, {10, 10}} {
		var tr *http.Transport
		hc, err := loyalty.NewHTTPClient(loyalty.TransportOptions{MaxConns: tc.maxConns,
			Wrap: func(rt http.RoundTripper) http.RoundTripper { tr, _ = rt.(*http.Transport); return rt }})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case tr == nil:
			t.Fatalf("MaxConns %d: Wrap was not given the *http.Transport", tc.maxConns)
		case tr.MaxConnsPerHost != tc.want || tr.MaxIdleConnsPerHost != tc.want || tr.MaxIdleConns != 2*tc.want:
			t.Errorf("MaxConns %d: per host %d, idle per host %d, idle %d; want %d, %d, %d", tc.maxConns,
				tr.MaxConnsPerHost, tr.MaxIdleConnsPerHost, tr.MaxIdleConns, tc.want, tc.want, 2*tc.want)
		case tr.IdleConnTimeout != 90*time.Second || tr.TLSHandshakeTimeout != 5*time.Second || tr.ExpectContinueTimeout != time.Second:
			t.Errorf("idle %v, TLS handshake %v, 100-continue %v", tr.IdleConnTimeout, tr.TLSHandshakeTimeout, tr.ExpectContinueTimeout)
		}
		hc.CloseIdleConnections()
	}
}
