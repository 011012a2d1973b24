package realkafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Requests records the requests that clients built with its Opt send,
// decoded: what a test learns from kfake's ControlKey, on any cluster. It
// sees the requests of those clients only, not the rest of the cluster's.
// Plaintext connections only (the recorder is the client's dialer, so it
// cannot be combined with kgo.DialTLSConfig or another kgo.Dialer). The
// zero value is ready to use and safe for concurrent use.
type Requests struct {
	mu   sync.Mutex
	seen []kmsg.Request
	err  error // the first request that could not be decoded
}

// Opt is the client option that has a client's connections recorded.
func (r *Requests) Opt() kgo.Opt {
	return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return &recordingConn{Conn: c, r: r}, nil
	})
}

// Seen returns the requests recorded so far, in the order they were written
// on each connection, and an error if one could not be decoded (then the
// recording is incomplete and a test must not trust it).
func (r *Requests) Seen() ([]kmsg.Request, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]kmsg.Request(nil), r.seen...), r.err
}

func (r *Requests) add(req kmsg.Request, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if r.err == nil {
			r.err = err
		}
		return
	}
	r.seen = append(r.seen, req)
}

// recordingConn decodes the request frames written on it. A client writes
// whole frames, but nothing promises one frame per Write, so bytes wait in
// buf until their frame is complete.
type recordingConn struct {
	net.Conn
	r   *Requests
	buf []byte
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	for len(c.buf) >= 4 {
		size := int(binary.BigEndian.Uint32(c.buf))
		if len(c.buf) < 4+size {
			break
		}
		c.r.add(decodeRequest(bytes.Clone(c.buf[4 : 4+size]))) // the request may keep slices of it
		c.buf = c.buf[4+size:]
	}
	return c.Conn.Write(p)
}

// decodeRequest decodes a request frame (after its size): header v1 or v2
// (key, version, correlation id, client id, tags when flexible), then the
// body.
func decodeRequest(frame []byte) (kmsg.Request, error) {
	b := kbin.Reader{Src: frame}
	key, version := b.Int16(), b.Int16()
	b.Int32()
	b.NullableString()
	req := kmsg.RequestForKey(key)
	if req == nil {
		return nil, fmt.Errorf("realkafka: request of unknown key %d", key)
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&b)
	}
	if err := b.Complete(); err != nil {
		return nil, fmt.Errorf("realkafka: request key %d header: %w", key, err)
	}
	if err := req.ReadFrom(b.Src); err != nil {
		return nil, fmt.Errorf("realkafka: request key %d v%d: %w", key, version, err)
	}
	return req, nil
}
