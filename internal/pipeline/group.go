package pipeline

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

func (p *Pipeline) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	// franz-go calls this after every SyncGroup answered (with nothing
	// new assigned too), before the generation can change again: the
	// group's rebalance to this generation is over (package lease).
	p.lease.Assigned(cl.GroupMetadata())
	var waits map[string]bool // topics with partitions whose records wait (strategy.assignedLocked)
	p.mu.Lock()
	for topic, parts := range assigned {
		for _, n := range parts {
			if p.parts[tp{topic, n}] == nil {
				part := p.newPartitionLocked(tp{topic, n})
				p.mode.assignedLocked(part)
				if !part.guardAfter.IsZero() {
					if waits == nil {
						waits = make(map[string]bool)
					}
					waits[topic] = true
				}
			}
		}
	}
	p.mu.Unlock()
	p.lease.Want() // a lease from this generation before the first write
	for topic, parts := range assigned {
		if waits[topic] {
			p.log.Info("partitions assigned; their records wait for a previous owner's last partner calls to land before they run",
				zap.String("topic", topic), zap.Int32s("partitions", parts), zap.Duration("takeover_wait", p.o.TakeoverWait))
		} else {
			p.log.Info("partitions assigned", zap.String("topic", topic), zap.Int32s("partitions", parts))
		}
		p.obs.Assigned(topic, parts, true, false)
	}
}

// onLost tells the lease, then the strategy: another member may own the
// partitions already.
func (p *Pipeline) onLost(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	p.lease.Revoked() // expelled: no proof of membership until a new heartbeat
	p.mode.lost(ctx, cl, lost)
}

// partitionsLocked returns the live partitions among m's.
func (p *Pipeline) partitionsLocked(m map[string][]int32) []*partition {
	var parts []*partition
	for topic, ns := range m {
		for _, n := range ns {
			if part := p.parts[tp{topic, n}]; part != nil {
				parts = append(parts, part)
			}
		}
	}
	return parts
}

// waitClosed waits until every channel of cs is closed, at most d; it
// reports whether d ran out first.
func waitClosed(cs []chan struct{}, d time.Duration) (timedOut bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for _, c := range cs {
		select {
		case <-c:
		case <-timer.C:
			return true
		}
	}
	return false
}

// drain, at shutdown, lets every dispatched record finish, and every
// record below the highest dispatched (holeLocked), within DrainTimeout
// and until deadline; what is left is processed again by the next owner.
func (p *Pipeline) drain(workCtx context.Context, deadline time.Time) {
	p.mu.Lock()
	p.closing = true
	p.closeDrainedLocked()
	p.mu.Unlock()
	holesCtx, stopHoles := context.WithCancel(workCtx)
	var holes sync.WaitGroup
	holes.Go(func() { p.dispatch(holesCtx) })
	timer := time.NewTimer(within(deadline, p.o.DrainTimeout))
	select {
	case <-p.drained:
	case <-timer.C:
		p.log.Warn("drain timed out; unfinished records will be processed again by the next owner",
			zap.Duration("drain_timeout", p.o.DrainTimeout), zap.Int("in_flight", p.inFlightNow()))
	}
	timer.Stop()
	stopHoles()
	holes.Wait()
}

// leaving returns the live partitions as the member leaves, logging those
// left with records taken but not committed.
func (p *Pipeline) leaving() []*partition {
	p.mu.Lock()
	defer p.mu.Unlock()
	parts := make([]*partition, 0, len(p.parts))
	for _, part := range p.parts {
		parts = append(parts, part)
		p.reportLeftLocked(part)
	}
	return parts
}

// dropLocked forgets parts, cancels their handlers and returns those that
// were paused.
func (p *Pipeline) dropLocked(parts []*partition) map[string][]int32 {
	var resume map[string][]int32
	for _, part := range parts {
		if p.parts[part.tp] != part {
			continue
		}
		delete(p.parts, part.tp)
		p.buffered -= part.track.Len()
		p.bytes -= part.track.Bytes()
		part.revoking = true
		part.cancel()
		if part.idle != nil {
			close(part.idle)
			part.idle = nil
		}
		if part.paused {
			if resume == nil {
				resume = make(map[string][]int32)
			}
			resume[part.topic] = append(resume[part.topic], part.partition)
		}
	}
	p.obs.InFlight(p.count.inFlight, p.buffered)
	return resume
}

func (p *Pipeline) closeDrainedLocked() {
	if p.closing && p.count.inFlight == 0 && !p.isDrained {
		for _, part := range p.parts {
			if p.holeLocked(part) {
				return // the drain's dispatcher starts it (holeLocked)
			}
		}
		p.isDrained = true
		close(p.drained)
	}
}

// guardUntilLocked holds part's records until at (at least), and wakes
// the dispatcher then.
func (p *Pipeline) guardUntilLocked(part *partition, at time.Time) {
	if !at.After(part.guardAfter) {
		return
	}
	part.guardAfter = at
	guard := time.AfterFunc(time.Until(at), func() { wake(p.wakeDispatch) })
	// Owned by the partition: stopped when it is dropped, or when Run
	// ends (its context derives from Run's).
	context.AfterFunc(part.ctx, func() { guard.Stop() })
}
