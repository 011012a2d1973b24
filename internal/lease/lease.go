package lease

import (
	"sync"
	"time"
)

// Lease is a member's last proof of membership. The zero value is not
// usable; call New. It is safe for concurrent use.
type Lease struct {
	mu      sync.Mutex
	sent    time.Time     // when the last heartbeat answered as a member was sent; zero: none
	stable  time.Time     // when the last one answered without a rebalance, of the assigned generation, was sent; zero: none
	member  string        // the member ID and generation of the member's last assignment
	gen     int32         // (Assigned); -1: none
	renewed chan struct{} // closed and replaced whenever Until moves later
	// joined is when the member last read a JoinGroup answer (Joined):
	// before the SyncGroup that follows it was sent. Taken by the
	// assignment that SyncGroup brought; zero: none since.
	joined time.Time

	// The group session and rebalance timeouts and the partner call
	// timeout (SetTimeouts).
	session, rebalance, call time.Duration

	probeNow chan struct{} // capacity 1: a write waits for a renewal (Want)
}

// New returns a lease that lets no write start until SetTimeouts, an
// assignment and an answered heartbeat.
func New() *Lease {
	return &Lease{gen: -1, renewed: make(chan struct{}), probeNow: make(chan struct{}, 1)}
}

// SetTimeouts sets the group's session and rebalance timeouts and the
// longest a partner call may take to land. Call it before the first
// write asks; the client's options are known only once it exists.
func (l *Lease) SetTimeouts(session, rebalance, call time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.session, l.rebalance, l.call = session, rebalance, call
}

// Until returns when the lease lets no more writes start (zero: it lets
// none), and a channel closed when a renewal moves that later.
func (l *Lease) Until() (time.Time, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.untilLocked(), l.renewed
}

// Held reports whether a write may start now.
func (l *Lease) Held() bool {
	until, _ := l.Until()
	return time.Now().Before(until)
}

func (l *Lease) untilLocked() time.Time {
	if l.sent.IsZero() || l.stable.IsZero() {
		return time.Time{}
	}
	end := l.sent.Add(l.session)
	if r := l.stable.Add(l.rebalance); r.Before(end) {
		end = r
	}
	return end.Add(-l.call)
}

// Joined records that the member read a JoinGroup answer now, before it
// sent the SyncGroup that follows.
func (l *Lease) Joined() {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.joined = now
}

// Assigned records that member received its assignment of generation gen:
// the group's rebalance to it is over, and it was stable with the member
// in it when the SyncGroup that brought the assignment arrived, after the
// last Joined.
func (l *Lease) Assigned(member string, gen int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	before := l.untilLocked()
	l.member, l.gen = member, gen
	if l.joined.After(l.stable) {
		l.stable = l.joined
	}
	l.joined = time.Time{}
	l.wakeLocked(before)
}

// Renewed counts a heartbeat that member sent at sent with generation gen,
// answered as a member; rebalancing: answered REBALANCE_IN_PROGRESS.
// Answers may come out of order: an older one never shortens the lease.
func (l *Lease) Renewed(sent time.Time, member string, gen int32, rebalancing bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	before := l.untilLocked()
	if !sent.Before(l.sent) {
		l.sent = sent
	}
	if !rebalancing && member == l.member && gen == l.gen && !sent.Before(l.stable) {
		l.stable = sent
	}
	l.wakeLocked(before)
}

// wakeLocked wakes the waiting writes (which ask for another probe) when
// the lease grew past before; only then: during a long rebalance, answers
// that renew the session alone would otherwise make them probe every
// minProbeGap.
func (l *Lease) wakeLocked(before time.Time) {
	if l.untilLocked().After(before) {
		close(l.renewed)
		l.renewed = make(chan struct{})
	}
}

// Revoked forgets the last proof: the group expelled the member, or said
// it is not of the current generation. No write starts until a heartbeat
// is answered again.
func (l *Lease) Revoked() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent, l.stable = time.Time{}, time.Time{}
}

// Want asks Probe for a heartbeat now: a write waits for a renewal.
func (l *Lease) Want() {
	select {
	case l.probeNow <- struct{}{}:
	default:
	}
}
