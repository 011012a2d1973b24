package pipeline

import (
	"context"
	"time"
)

// Wait waits d, or until ctx ends (returning its error), like a timer. Called
// from a Handler with the context it was given, it also gives the record's
// in-flight slot back for the wait and takes one again after it, ahead of
// records not yet started: a record waiting out a back-off or a Retry-After
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
	h.p.reclaimSlot(ctx, h.j)
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
	j.p.active--
	p.active--
	p.slotFreedLocked()
	p.mu.Unlock()
	wake(p.wakeDispatch)
}

// reclaimSlot takes a slot for j again, before any record not yet started.
// When ctx has ended it takes one at once, over the limit if need be: the
// handler is about to return and give it back.
func (p *Pipeline) reclaimSlot(ctx context.Context, j *job) {
	p.mu.Lock()
	p.reclaim++
	for ctx.Err() == nil && (p.active >= p.o.MaxInFlight || j.p.active >= p.o.MaxInFlightPerPartition) {
		free := p.slotFree
		p.mu.Unlock()
		select {
		case <-free:
		case <-ctx.Done():
		}
		p.mu.Lock()
	}
	p.reclaim--
	j.p.active++
	p.active++
	p.mu.Unlock()
	wake(p.wakeDispatch) // new records were held back while this one waited
}

// slotFreedLocked tells handlers waiting in reclaimSlot that a slot is free.
func (p *Pipeline) slotFreedLocked() {
	if p.reclaim > 0 {
		close(p.slotFree)
		p.slotFree = make(chan struct{})
	}
}
