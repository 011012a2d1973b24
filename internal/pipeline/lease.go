package pipeline

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// A handler's partner write starts only while the member's lease (package
// lease, which states the rule and what it assumes) says the group cannot
// remove the member before the write ends. The pipeline feeds the lease the
// group's events (its SyncGroup times, assignments, losses), runs its
// prober, and makes a write that finds it short wait here with its slot
// given back, as in Wait.

// Leased returns nil once a partner write started now has taken effect
// (within Options.CallTimeout plus Options.ApplyWindow) before the group
// can remove the member (its
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
	return h.p.lease.Held()
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
		until, renewed := p.lease.Until()
		if time.Now().Before(until) {
			p.leaseOK()
			return nil
		}
		p.leaseShort(until)
		if !yielded {
			p.yield(j)
			yielded = true
		}
		p.lease.Want()
		select {
		case <-renewed:
		case <-ctx.Done():
		}
	}
}

// leaseShort logs the first write that finds the lease short.
func (p *Pipeline) leaseShort(until time.Time) {
	if !p.leaseLapsed.Swap(true) {
		p.log.Warn("group membership not confirmed recently enough for a partner call to end before the group could remove the member; partner writes wait for a heartbeat",
			zap.Duration("session_timeout", p.session), zap.Duration("rebalance_timeout", p.rebalance), zap.Duration("call_timeout", p.o.CallTimeout), zap.Duration("apply_window", p.o.ApplyWindow),
			zap.Time("writes_allowed_until", until))
	}
}

func (p *Pipeline) leaseOK() {
	if p.leaseLapsed.Swap(false) {
		p.log.Info("group membership confirmed; partner writes go on")
	}
}
