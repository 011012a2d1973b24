package testkit

import (
	"testing"
	"time"
)

// PollInterval is how often Eventually asks again.
const PollInterval = 5 * time.Millisecond

// Eventually asks cond every PollInterval until it returns "", and fails tb
// with the last thing cond said when timeout passes first. cond says what
// is still missing ("2 of 5 records read"), so that a failure explains
// itself. It is polling with a deadline, not synchronisation: cond must
// read state safely from the test's goroutine.
func Eventually(tb testing.TB, timeout time.Duration, cond func() string) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		missing := cond()
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not within %v: %s", timeout, missing)
		}
		<-tick.C
	}
}

// EventuallyTrue is Eventually for a condition that holds or not: what
// names it in the failure.
func EventuallyTrue(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	Eventually(tb, timeout, func() string {
		if cond() {
			return ""
		}
		return what
	})
}
