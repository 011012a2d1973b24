package loyalty

import (
	"testing"
	"time"
)

// A connection the partner does not accept is given up on after 5 s, and
// idle ones are probed every 30 s. Read off the dialer: timing a dial to a
// black-holed address would take those 5 s of real time and a network
// that drops packets.
func TestDialerBounds(t *testing.T) {
	if d := dialer(); d.Timeout != 5*time.Second || d.KeepAlive != 30*time.Second {
		t.Fatalf("dial timeout %v, keep-alive %v; want 5s, 30s", d.Timeout, d.KeepAlive)
	}
}
