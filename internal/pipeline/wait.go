package pipeline

import (
	"context"
	"time"
)

// Wait waits d, or until ctx ends (returning its error), like a timer. Called
// from a Handler with the context it was given, it also gives the record's
// in-flight slot back for the wait and takes it again after it, before any
// record not yet started can have it: a record waiting out a back-off or a Retry-After
// keeps its lane (later records of its key still wait behind it) and its
// place in the commit order, but not a slot that another record could use.
// Outside a Handler it is a plain wait.
func Wait(ctx context.Context, d time.Duration) error {
	h, _ := ctx.Value(handlerKey{}).(*handlerRef)
	if h == nil || d <= 0 {
		return sleep(ctx, d)
	}
	h.p.yield(h.j)
	err := sleep(ctx, d)
	h.p.reclaimSlot(h.j)
	return err
}

type handlerKey struct{}

// handlerRef ties a handler's context to its record.
type handlerRef struct {
	p *Pipeline
	j *job
}

func handlerContext(p *Pipeline, j *job) context.Context {
	return context.WithValue(j.p.ctx, handlerKey{}, &handlerRef{p, j})
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// yield gives j's slot back for a wait.
func (p *Pipeline) yield(j *job) {
	p.mu.Lock()
	j.p.count.yield()
	p.count.yield()
	p.mu.Unlock()
	wake(p.wakeDispatch)
}

// reclaimSlot gives j its slot back at once, even above MaxInFlight: new
// records wait until the count is under it again. Waiting for a slot
// instead could deadlock: the handlers holding every slot may themselves be
// waiting on this one (a circuit breaker's probe that this record holds, in
// a retry inside the probe). What talks to the partner keeps its own bound
// (the client's call limit), so the overshoot costs no partner capacity.
func (p *Pipeline) reclaimSlot(j *job) {
	p.mu.Lock()
	j.p.count.reclaim()
	p.count.reclaim()
	p.mu.Unlock()
}
