package testkit

import (
	"testing"
	"time"
)

// PollInterval is how often Eventually asks, unless told otherwise (Every).
const PollInterval = 5 * time.Millisecond

// PollOpt changes how Eventually polls.
type PollOpt func(*poll)

type poll struct{ every time.Duration }

// Every makes Eventually ask every d instead of every PollInterval: for a
// condition that costs something to ask (a request to a real broker).
func Every(d time.Duration) PollOpt { return func(p *poll) { p.every = d } }

// Eventually asks cond until it holds, and fails tb with the last why cond
// gave when timeout passes first. why says what is still missing ("2 of 5
// records read"), so that a failure explains itself; it is not read once
// cond holds, so `return n == want, fmt.Sprintf(…)` is fine. It is polling
// with a deadline, not synchronisation: cond must read state safely from
// the test's goroutine.
func Eventually(tb testing.TB, timeout time.Duration, cond func() (ok bool, why string), opts ...PollOpt) {
	tb.Helper()
	p := poll{every: PollInterval}
	for _, o := range opts {
		o(&p)
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not within %v: %s", timeout, why)
		}
		<-tick.C
	}
}

// EventuallyTrue is Eventually for a condition that holds or not: what
// names it in the failure.
func EventuallyTrue(tb testing.TB, timeout time.Duration, what string, cond func() bool, opts ...PollOpt) {
	tb.Helper()
	Eventually(tb, timeout, func() (bool, string) { return cond(), what }, opts...)
}
