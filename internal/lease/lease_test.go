package lease

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestArithmetic: writes start until CallTimeout before the earlier of the
// session's end (the last heartbeat answered as a member) and the
// rebalance timeout's end since the group was last seen stable (the last
// heartbeat answered without a rebalance, of the assigned generation).
func TestArithmetic(t *testing.T) {
	const session, rebalance, call = 45 * time.Second, 20 * time.Second, 10 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	l := New()
	l.SetTimeouts(session, rebalance, call)
	check := func(step string, want time.Time) {
		t.Helper()
		if got, _ := l.Until(); !got.Equal(want) {
			t.Errorf("%s: writes until %v, want %v", step, got.Sub(t0), want.Sub(t0))
		}
	}
	check("no heartbeat", time.Time{})
	l.Renewed(at(0), "m", 1, false)
	check("answered before the assignment", time.Time{}) // the SyncGroup may still be lost
	l.Assigned("m", 1)
	l.Renewed(at(1), "m", 1, false)
	check("stable", at(1+20-10))
	l.Renewed(at(4), "m", 1, true)
	check("rebalance seen", at(1+20-10)) // not past the last stable answer + RebalanceTimeout
	l.Renewed(at(7), "m", 1, true)
	check("rebalance goes on", at(1+20-10))
	l.Renewed(at(8), "m", 2, false)
	check("new generation, not assigned yet", at(1+20-10))
	l.Assigned("m", 2)
	l.Renewed(at(9), "m", 2, false)
	check("new generation assigned", at(9+20-10))
	l.Renewed(at(5), "m", 2, false)
	check("a late answer to an older heartbeat", at(9+20-10))
	l.Renewed(at(10), "other", 2, false)
	check("another member ID", at(9+20-10))

	short := New() // a session shorter than the rebalance timeout
	short.SetTimeouts(6*time.Second, rebalance, time.Second)
	short.Assigned("m", 1)
	short.Renewed(at(0), "m", 1, false)
	short.Renewed(at(3), "m", 1, true)
	if got, _ := short.Until(); !got.Equal(at(3 + 6 - 1)) {
		t.Errorf("short session: writes until %v, want %v", got.Sub(t0), 8*time.Second)
	}

	l.Revoked()
	check("revoked", time.Time{})
	l.Renewed(at(12), "m", 2, false)
	check("after a revoke", at(12+20-10))
}

// TestFromTheSyncGroup: a SyncGroup answered with an assignment proves the
// group stable at its generation from the moment the JoinGroup before it
// was read, however its heartbeats are answered; an older JoinGroup never
// lowers it, and each JoinGroup's time serves one assignment.
func TestFromTheSyncGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const session, rebalance, call = 45 * time.Second, 20 * time.Second, 10 * time.Second
		l := New()
		l.SetTimeouts(session, rebalance, call)
		joined := time.Now()
		l.Joined()
		time.Sleep(time.Second) // the SyncGroup's round trip
		l.Assigned("m", 1)
		if got, _ := l.Until(); !got.IsZero() {
			t.Errorf("synced, no heartbeat answered: writes until %v, want none (the session is not proven)", got)
		}
		l.Renewed(time.Now(), "m", 1, true)
		want := joined.Add(rebalance - call)
		if got, _ := l.Until(); !got.Equal(want) {
			t.Errorf("synced, then a rebalance: writes until join+%v, want join+%v", got.Sub(joined), want.Sub(joined))
		}
		l.Assigned("m", 2) // no JoinGroup read since: nothing to take
		if got, _ := l.Until(); !got.Equal(want) {
			t.Errorf("an assignment without its own JoinGroup: writes until join+%v, want join+%v", got.Sub(joined), want.Sub(joined))
		}
	})
}

// TestHeldUntilTheBound: with the clock moving, Held says yes until the
// bound and no from it on, with no further event.
func TestHeldUntilTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const session, rebalance, call = 6 * time.Second, 20 * time.Second, time.Second
		l := New()
		l.SetTimeouts(session, rebalance, call)
		if l.Held() {
			t.Fatal("held before any proof of membership")
		}
		l.Joined()
		l.Assigned("m", 1)
		l.Renewed(time.Now(), "m", 1, false)
		time.Sleep(session - call - time.Nanosecond)
		if !l.Held() {
			t.Fatal("not held just before session - call")
		}
		time.Sleep(time.Nanosecond)
		if l.Held() {
			t.Fatal("held at session - call: a write starting now could outlive the session")
		}
		l.Renewed(time.Now(), "m", 1, false)
		if !l.Held() {
			t.Fatal("not held after a renewal")
		}
		l.Revoked()
		if l.Held() {
			t.Fatal("held after the member was expelled")
		}
	})
}

// TestRenewedWakesWaiters: a write waiting on Until's channel is woken when
// the lease grows, and only then (a renewal of the session alone during a
// rebalance must not make waiting writes probe again and again).
func TestRenewedWakesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New()
		l.SetTimeouts(45*time.Second, 20*time.Second, 10*time.Second)
		l.Joined()
		l.Assigned("m", 1)
		l.Renewed(time.Now(), "m", 1, false)
		time.Sleep(time.Second)
		_, renewed := l.Until()
		woken := false
		go func() {
			<-renewed
			woken = true
		}()
		l.Renewed(time.Now(), "m", 1, true) // the session's end moves, not the rebalance's, which is earlier
		synctest.Wait()
		if woken {
			t.Fatal("woken by an answer that did not grow the lease")
		}
		l.Renewed(time.Now(), "m", 1, false)
		synctest.Wait()
		if !woken {
			t.Fatal("not woken by an answer that grew the lease")
		}
	})
}

// TestWantCoalesces: however many writes ask for a probe, one is pending.
func TestWantCoalesces(t *testing.T) {
	l := New()
	for range 3 {
		l.Want()
	}
	if n := len(l.probeNow); n != 1 {
		t.Fatalf("%d probes pending, want 1", n)
	}
}
