package testkit

import (
	"io"
	"net/http"
	"sync/atomic"
)

// CountingTransport is an http.RoundTripper that counts the bytes of
// answer bodies read through it: a test of a client's bound on what it
// reads of an answer.
type CountingTransport struct {
	RT   http.RoundTripper
	read atomic.Int64
}

// RoundTrip sends r through RT and counts what is read of its answer.
func (c *CountingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.RT.RoundTrip(r)
	if err == nil {
		resp.Body = countingBody{resp.Body, &c.read}
	}
	return resp, err
}

// Read returns the bytes read of every answer so far.
func (c *CountingTransport) Read() int64 { return c.read.Load() }

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
