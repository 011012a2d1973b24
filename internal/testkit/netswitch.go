package testkit

import (
	"context"
	"errors"
	"net"
	"sync"
)

// ErrNetworkCut is what NetSwitch.Dial returns once the switch is cut.
var ErrNetworkCut = errors.New("testkit: network cut")

// NetSwitch is a dialer whose connections can all be cut at once, and that
// refuses new ones after: a process killed, as far as its peers can tell.
// Give Dial to the client under test (kgo.Dialer(sw.Dial)). The zero value
// dials plainly and is ready.
type NetSwitch struct {
	// Wrap, when set, wraps each new connection (a connection that fails
	// now and then); Cut closes the connection beneath it.
	Wrap func(net.Conn) net.Conn

	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

// Dial dials like net.Dialer, or fails with ErrNetworkCut after Cut.
func (s *NetSwitch) Dial(ctx context.Context, network, host string) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return nil, ErrNetworkCut
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	s.conns = append(s.conns, c)
	if s.Wrap != nil {
		return s.Wrap(c), nil
	}
	return c, nil
}

// Cut closes every connection Dial made and fails every later Dial.
func (s *NetSwitch) Cut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead = true
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns = nil
}
