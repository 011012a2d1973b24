package pipeline

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// The lease. A member that loses Kafka does not lose the partner: cut off
// from the coordinator (a network partition, a pause, a kill that leaves
// the process running for its drain), it keeps the partitions it was
// given as far as it knows, while the group expels it once its session
// times out and hands them to another member. That member guards the
// records the dispatch horizon covers, by a lookup before each write; a
// write the expelled member sends after that lookup is applied a second
// time by a partner without duplicate detection. The horizon says which
// records are uncertain, not when their old owner stops writing them.
//
// So a member starts a partner write only while the group cannot yet have
// given its partitions away for the whole time the write may take. The
// coordinator of the classic group protocol removes a member in two ways:
// when its session times out, SessionTimeout after the last heartbeat it
// received, and when a rebalance's join phase ends without it, at most
// RebalanceTimeout after the rebalance began (the group's rebalance
// timeout is the largest its members ask for, and this member asks for
// RebalanceTimeout). So a write may start while
//
//	now + CallTimeout <= min(sent + SessionTimeout, stable + RebalanceTimeout)
//
// where sent is when the member sent the last heartbeat answered as a
// member of the group (the coordinator received it then or later), and
// stable when it sent the last one answered without a rebalance, of the
// generation whose assignment the member holds: the group was stable with
// the member in it when that heartbeat arrived, so a rebalance that could
// remove it began later, and ends no sooner than stable + RebalanceTimeout.
// A heartbeat answered REBALANCE_IN_PROGRESS renews sent only: the member
// is counted in until its session ends, but the rebalance may have begun
// just after the last stable answer and will remove it when the join phase
// ends without its JoinGroup (one cut off mid-rebalance). A heartbeat of a
// generation whose assignment the member has not received yet (between
// its JoinGroup's answer and its SyncGroup's, which Kafka answers without
// an error) renews sent only as well: the coordinator removes a member
// that does not sync within the rebalance timeout. The bound holds without
// a rebalance seen too: a member cut off before its first
// REBALANCE_IN_PROGRESS is removed when the rebalance its successor's
// JoinGroup starts times out, long before its session would.
//
// A SyncGroup answered with an assignment renews stable too, to a moment
// before it was sent (when the JoinGroup before it was answered): the
// coordinator answers it only once the group is stable at that
// generation, with the member in it. Without it, a member whose
// first heartbeat after joining is already answered REBALANCE_IN_PROGRESS
// (replicas started one after another: each JoinGroup starts a rebalance)
// had no lease at all; its first records waited for one, its revoke drain
// waited for them, and the rebalance waited for the drain: a DrainTimeout
// lost at every start-up, and every record it had dispatched guarded by
// its successors (loyalty-bench, three replicas with one core busy: 1.6
// partner calls per record). The SyncGroup does not renew sent: kfake
// restarts the session at a heartbeat or a JoinGroup, not at a SyncGroup.
//
// A rebalance does not stop writes as long as it ends within
// RebalanceTimeout - CallTimeout of the last stable answer (10s by
// default): with the cooperative-sticky balancer members keep their
// partitions and rejoin at the first REBALANCE_IN_PROGRESS, and once the
// new generation's assignment is received (OnPartitionsAssigned, after
// the revoke of partitions moved away) its SyncGroup and heartbeats renew
// stable again. A longer rebalance (a member slow to rejoin, a long revoke
// drain) holds writes until then. Run raises RebalanceTimeout to CallTimeout plus
// rebalanceMargin when the drain's own margin leaves less.
//
// The prober (probe) sends its own heartbeats, every HeartbeatInterval
// and at once when a write finds the lease short: franz-go's heartbeats
// do not tell their answers, and a heartbeat whose answer says the member
// is out (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, a fenced instance) must
// not count. A JoinGroup does not count either: kfake keeps a member whose
// JoinGroup it parks only as long as its session, and Kafka answers the
// prober's heartbeats meanwhile with REBALANCE_IN_PROGRESS. A write that
// finds the lease short waits (Leased), giving its slot back; it goes on
// once a heartbeat renews the lease, and ends with its context when the
// partition is revoked after a drain timeout or lost.
//
// With the group's session expired only after the member's last write
// has landed, its successor's lookups see every write. The successor also
// waits TakeoverWait after an unclean takeover (horizon.go), which covers
// calls a member cut off itself (a drain timeout), and is a second margin
// for this one.
//
// The assumption both rest on: the partner applies a request within
// CallTimeout of the member sending it, or never. The attempt timeout
// bounds when the member stops waiting, not when the partner applies: a
// request queued in a proxy or the partner for longer than that may be
// applied after the successor's lookup, and nothing on this side can see
// it. Against such a partner, raise --api-timeout (CallTimeout follows).

// lease is the member's last proof of membership, guarded by mu.
type lease struct {
	mu      sync.Mutex
	sent    time.Time     // when the last heartbeat answered as a member was sent; zero: none
	stable  time.Time     // when the last one answered without a rebalance, of the assigned generation, was sent; zero: none
	member  string        // the member ID and generation of the member's last assignment
	gen     int32         // (OnPartitionsAssigned); -1: none
	renewed chan struct{} // closed and replaced at each renewal
	lapsed  bool          // a write found the lease short and has not seen it renewed
	// joined is when the member last read a JoinGroup answer (syncHook):
	// before the SyncGroup that follows it was sent. Taken by the
	// assignment that SyncGroup brought; zero: none since.
	joined time.Time

	// The group session and rebalance timeouts and the partner call
	// timeout (Options.CallTimeout), set before the first dispatch.
	session, rebalance, call time.Duration

	probeNow chan struct{} // capacity 1: a write waits for a renewal
}

func newLease() *lease {
	return &lease{gen: -1, renewed: make(chan struct{}), probeNow: make(chan struct{}, 1)}
}

func (l *lease) setTimeouts(session, rebalance, call time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.session, l.rebalance, l.call = session, rebalance, call
}

// until returns when the lease lets no more writes start, and a channel
// closed when a renewal moves that later.
func (l *lease) until() (time.Time, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.untilLocked(), l.renewed
}

func (l *lease) untilLocked() time.Time {
	if l.sent.IsZero() || l.stable.IsZero() {
		return time.Time{}
	}
	end := l.sent.Add(l.session)
	if r := l.stable.Add(l.rebalance); r.Before(end) {
		end = r
	}
	return end.Add(-l.call)
}

// assigned records that member received its assignment of generation gen:
// the group's rebalance to it is over, and it was stable with the member
// in it when the SyncGroup that brought the assignment arrived.
func (l *lease) assigned(member string, gen int32) {
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

// syncHook notes when the client reads each JoinGroup answer
// (kgo.HookBrokerE2E). franz-go calls it before the group logic sees the
// answer, and sends the SyncGroup only after that, so the time is a
// strict lower bound of when the coordinator received the SyncGroup (a
// time worked back from the SyncGroup's own durations is not: a pause
// between the read and the hook shifts it later). franz-go joins and
// syncs one at a time, so the last JoinGroup read before an assignment
// (OnPartitionsAssigned) is the one of its generation; a JoinGroup
// answered with an error is followed by another before any sync.
type syncHook struct{ l *lease }

func (h syncHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key != int16(kmsg.JoinGroup) || e.Err() != nil {
		return
	}
	now := time.Now()
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	h.l.joined = now
}

// renew counts a heartbeat that member sent at sent with generation gen,
// answered as a member; rebalancing: answered REBALANCE_IN_PROGRESS.
func (l *lease) renew(sent time.Time, member string, gen int32, rebalancing bool) {
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
func (l *lease) wakeLocked(before time.Time) {
	if l.untilLocked().After(before) {
		close(l.renewed)
		l.renewed = make(chan struct{})
	}
}

// revoke forgets the last proof: the group expelled the member.
func (l *lease) revoke() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent, l.stable = time.Time{}, time.Time{}
}

// Leased returns nil once a partner write started now ends (its
// Options.CallTimeout) before the group can remove the member (its
// session expiring or a rebalance timing out without it), and
// the write's record is still this member's; it waits for a heartbeat
// otherwise, with the record's slot given back as in Wait. It returns
// ctx's error when the record is abandoned (its partition revoked after a
// drain timeout or lost, or the shutdown's drain timed out). Called
// outside a Handler, or with no CallTimeout set, it only checks ctx.
func Leased(ctx context.Context) error {
	h, _ := ctx.Value(handlerKey{}).(*handlerRef)
	if h == nil || h.p.o.CallTimeout <= 0 {
		return ctx.Err()
	}
	return h.p.leased(ctx, h.j)
}

// LeaseHeld reports, without waiting, whether Leased would return nil now.
func LeaseHeld(ctx context.Context) bool {
	h, _ := ctx.Value(handlerKey{}).(*handlerRef)
	if ctx.Err() != nil {
		return false
	}
	if h == nil || h.p.o.CallTimeout <= 0 {
		return true
	}
	until, _ := h.p.lease.until()
	return time.Now().Before(until)
}

// LeaseGate is the lease as a gate of partner writes (the loyalty
// client's WriteGate): Wait is Leased, Allowed is LeaseHeld.
type LeaseGate struct{}

// Wait is Leased.
func (LeaseGate) Wait(ctx context.Context) error { return Leased(ctx) }

// Allowed is LeaseHeld.
func (LeaseGate) Allowed(ctx context.Context) bool { return LeaseHeld(ctx) }

func (p *Pipeline) leased(ctx context.Context, j *job) error {
	yielded := false
	defer func() {
		if yielded {
			p.reclaimSlot(j)
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		until, renewed := p.lease.until()
		if time.Now().Before(until) {
			p.leaseOK()
			return nil
		}
		p.leaseShort(until)
		if !yielded {
			p.yield(j)
			yielded = true
		}
		wake(p.lease.probeNow)
		select {
		case <-renewed:
		case <-ctx.Done():
		}
	}
}

// leaseShort logs the first write that finds the lease short.
func (p *Pipeline) leaseShort(until time.Time) {
	p.lease.mu.Lock()
	first := !p.lease.lapsed
	p.lease.lapsed = true
	p.lease.mu.Unlock()
	if first {
		p.log.Warn("group membership not confirmed recently enough for a partner call to end before the group could remove the member; partner writes wait for a heartbeat",
			zap.Duration("session_timeout", p.session), zap.Duration("rebalance_timeout", p.rebalance), zap.Duration("call_timeout", p.o.CallTimeout),
			zap.Time("writes_allowed_until", until))
	}
}

func (p *Pipeline) leaseOK() {
	p.lease.mu.Lock()
	was := p.lease.lapsed
	p.lease.lapsed = false
	p.lease.mu.Unlock()
	if was {
		p.log.Info("group membership confirmed; partner writes go on")
	}
}

// probe sends heartbeats of its own until ctx ends: every heartbeat
// interval, and at once (at most every minProbeGap) when a write waits.
func (p *Pipeline) probe(ctx context.Context, cl *kgo.Client) {
	interval, _ := cl.OptValue(kgo.HeartbeatInterval).(time.Duration)
	if interval <= 0 {
		interval = 3 * time.Second // franz-go's default, should the option not say
	}
	instance, _ := cl.OptValue(kgo.InstanceID).(string)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last time.Time
	for {
		select {
		case <-tick.C:
		case <-p.lease.probeNow:
			if wait := time.Until(last.Add(minProbeGap)); wait > 0 {
				if sleep(ctx, wait) != nil {
					return
				}
			}
		case <-ctx.Done():
			return
		}
		last = time.Now()
		member, generation := cl.GroupMetadata()
		if member == "" || generation < 0 {
			continue // not in the group yet: nothing to prove
		}
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.MemberID, req.Generation = p.o.Group, member, generation
		if instance != "" {
			req.InstanceID = &instance
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, p.session)
		resp, err := req.RequestWith(rctx, cl)
		cancel()
		if err != nil {
			continue
		}
		switch err := kerr.ErrorForCode(resp.ErrorCode); err {
		case nil, kerr.RebalanceInProgress: // counted in: the session restarted
			p.lease.renew(sent, member, generation, err != nil)
		case kerr.UnknownMemberID, kerr.IllegalGeneration, kerr.FencedInstanceID:
			// Out of the group, or of its generation: no write until a
			// heartbeat of the next generation is answered, rather than
			// until the last proof runs out. franz-go learns it too and
			// calls onLost, but only once its own revoke (a drain) is over.
			p.lease.revoke()
		default:
			if ce := p.log.Check(zap.DebugLevel, "membership probe refused"); ce != nil {
				ce.Write(zap.Error(err))
			}
		}
	}
}

// minProbeGap spaces the probes writes ask for while Kafka is unreachable.
const minProbeGap = 100 * time.Millisecond
