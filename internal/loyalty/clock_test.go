package loyalty_test

import (
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// newFakeClock is shared by a server stand-in and the client side.
func newFakeClock() *testkit.Clock { return testkit.NewClock(time.Now().Truncate(time.Second)) }
