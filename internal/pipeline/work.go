package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// dispatch hands runnable records to workers while the limits allow.
func (p *Pipeline) dispatch(ctx context.Context) {
	for {
		if p.o.Gate != nil {
			if err := p.o.Gate.Ready(ctx); err != nil {
				if ctx.Err() == nil { // a broken gate must not stall the pipeline silently
					p.mu.Lock()
					p.stopLocked(fmt.Errorf("pipeline: gate: %w", err))
					p.mu.Unlock()
				}
				return
			}
		}
		p.mu.Lock()
		j := p.nextLocked()
		p.mu.Unlock()
		if j == nil {
			select {
			case <-p.wakeDispatch:
				continue
			case <-ctx.Done():
				return
			}
		}
		if ce := p.log.Check(zap.DebugLevel, "dispatch"); ce != nil {
			ce.Write(zap.String("topic", j.rec.Topic), zap.Int32("partition", j.rec.Partition),
				zap.Int64("offset", j.rec.Offset), zap.Bool("fresh", j.fresh))
		}
		p.obs.RecordStarted(j.rec.Topic, j.rec.Partition, j.fresh)
		select {
		case p.jobs <- j: // an idle worker took it
		default:
			p.workers.Go(func() error { p.work(j); return nil })
		}
	}
}

// work runs j, then waits for the next record the dispatcher hands it,
// until the pipeline's work ends or enough other workers are idle.
//
// Why workers are kept rather than a goroutine started per record: a new
// goroutine starts with a small stack, and every record's handler grew it
// at its deepest call (the partner call, the ledger's intent), copying it
// each time: runtime.newstack and copystack took about 5% of the bridge's
// CPU in a loyalty-bench profile at 256 in flight. A worker kept keeps its
// grown stack (until the garbage collector shrinks an idle one).
//
// The pool is not a fixed size: a handler waiting out a retry (Wait)
// gives its slot back but keeps its worker, so the dispatcher starts a
// new worker whenever none is idle, as it started a goroutine per record
// before; nothing else changes for a record. Idle workers are at most
// about MaxInFlight (one that would exceed it returns), so memory stays
// bounded as the package doc says.
func (p *Pipeline) work(j *job) {
	for {
		p.process(j)
		if p.idle.Add(1) > int32(p.o.MaxInFlight) {
			p.idle.Add(-1)
			return
		}
		select {
		case j = <-p.jobs:
			p.idle.Add(-1)
		case <-p.workCtx.Done():
			p.idle.Add(-1)
			return
		}
	}
}

// nextLocked picks the next record to run, or nil.
func (p *Pipeline) nextLocked() *job {
	if p.count.active >= p.o.MaxInFlight || p.failure != nil {
		return nil
	}
	for _, part := range p.parts { // map order: no partition is always first
		if part.count.active >= p.o.MaxInFlightPerPartition || !p.mode.mayStartLocked(part) {
			continue
		}
		if (part.revoking || p.closing) && !p.holeLocked(part) {
			continue // a drain starts nothing new
		}
		if !part.guardAfter.IsZero() {
			if time.Now().Before(part.guardAfter) {
				continue // its wake is scheduled (guardUntilLocked)
			}
			part.guardAfter = time.Time{}
		}
		task, ok := part.sched.Next()
		if !ok {
			continue
		}
		j := task.Value
		j.task = task
		j.started = time.Now()
		part.maxSent = max(part.maxSent, task.Offset)
		part.count.dispatch()
		p.count.dispatch()
		p.obs.InFlight(p.count.inFlight, p.buffered)
		return j
	}
	return nil
}

// holeLocked reports whether part's next runnable record is below the
// highest offset dispatched: one that waited behind an earlier record of
// its key (a Retry-After, a slow call) while later records ran. A drain (a
// revoke's, the shutdown's) starts nothing new but still runs these, so
// the final commit passes the later records already done: left undone,
// each was a hole the commit point stopped at, and the next owner redid
// every record after it (guarded: a lookup and a second reply each; up
// to 379 duplicate replies in a three-replica loyalty-bench run). While
// the Gate holds dispatch (an outage), a drain waits for them up to
// DrainTimeout, as it waits for the records held in flight. They are
// covered by the dispatch horizon already. Exactly-once mode rolls its
// rounds back instead, and starts nothing of a revoked partition
// (mayStartLocked).
func (p *Pipeline) holeLocked(part *partition) bool {
	if p.failure != nil {
		return false // a failing pipeline dispatches nothing (nextLocked)
	}
	off, ok := part.sched.Peek()
	return ok && off < part.maxSent
}

// startFallbackWorkers starts the goroutines that turn records whose
// outputs failed into fallback outputs (rare: after franz-go's own retries).
func (p *Pipeline) startFallbackWorkers(workers *errgroup.Group) {
	for range min(p.o.MaxInFlight, 4) {
		workers.Go(func() error {
			for {
				select {
				case j := <-p.redo:
					p.fallBack(j, j.produceErr())
				case <-p.workCtx.Done():
					return nil
				}
			}
		})
	}
}

func (p *Pipeline) process(j *job) {
	if f, ok := p.mode.priorFailure(j); ok {
		if f.fellBack {
			p.fail(j, f.err)
		} else {
			p.fallBack(j, f.err)
		}
		return
	}
	outs, err := p.handle(j)
	if err != nil {
		if j.p.ctx.Err() != nil {
			p.finish(j, Abandoned)
			return
		}
		p.fallBack(j, err)
		return
	}
	p.mode.produce(j, outs)
}

// handle runs the handler, turning a panic into an error: a bug in one
// record's handling must become that record's error output, not a crash loop.
func (p *Pipeline) handle(j *job) (outs []*kgo.Record, err error) {
	defer func() {
		if r := recover(); r != nil {
			outs, err = nil, fmt.Errorf("handler panic: %v", r)
		}
	}()
	return p.o.Handler(handlerContext(p, j), j.rec, Meta{Fresh: j.fresh, Assignment: j.p.assignment})
}

func (p *Pipeline) callFallback(j *job, cause error) (outs []*kgo.Record, err error) {
	defer func() {
		if r := recover(); r != nil {
			outs, err = nil, fmt.Errorf("fallback panic: %v", r)
		}
	}()
	return p.o.Fallback(j.rec, cause)
}

func (p *Pipeline) fallBack(j *job, cause error) {
	if j.p.ctx.Err() != nil {
		p.finish(j, Abandoned)
		return
	}
	if p.o.Fallback == nil || j.fellBack {
		p.fail(j, cause)
		return
	}
	j.fellBack = true
	outs, err := p.callFallback(j, cause)
	if err != nil {
		p.fail(j, fmt.Errorf("%w; fallback: %w", cause, err))
		return
	}
	p.mode.produce(j, outs)
}

// releaseLane lets the next record of j's lane run once j's handler (and
// fallback) returned, without waiting for j's outputs to be acknowledged:
// effects stay in order, and outputs are produced in order.
func (p *Pipeline) releaseLane(j *job) {
	p.mu.Lock()
	p.releaseLocked(j)
	p.mu.Unlock()
	wake(p.wakeDispatch)
}

// releaseLocked frees j's lane and its handler slot, once.
func (p *Pipeline) releaseLocked(j *job) {
	if j.released {
		return
	}
	j.released = true
	j.p.sched.Done(j.task)
	j.p.count.release()
	p.count.release()
	p.mode.releasedLocked(j)
}

func (j *job) produceErr() error {
	j.errMu.Lock()
	defer j.errMu.Unlock()
	return j.err
}

// onAck returns the promise for j's outputs. It runs on franz-go's promise
// goroutine and must not block: a failed record goes back to a worker.
func (j *job) onAck(p *Pipeline) func(*kgo.Record, error) {
	return func(_ *kgo.Record, err error) {
		if err != nil {
			j.errMu.Lock()
			if j.err == nil {
				j.err = fmt.Errorf("%w: %w", ErrProduce, err)
			}
			j.errMu.Unlock()
		}
		if j.pending.Add(-1) > 0 {
			return
		}
		if perr := j.produceErr(); perr != nil {
			if p.workCtx.Err() != nil || j.p.ctx.Err() != nil {
				p.finish(j, Abandoned)
				return
			}
			p.redo <- j // never blocks: capacity MaxInFlight, one entry per record
			return
		}
		p.done(j)
	}
}

func (p *Pipeline) done(j *job) {
	if j.fellBack {
		p.finish(j, FellBack)
	} else {
		p.finish(j, Processed)
	}
}

func (p *Pipeline) fail(j *job, cause error) {
	p.mu.Lock()
	p.failLocked(j, cause)
	p.mu.Unlock()
	p.finish(j, Failed)
}

// failLocked records the first failure and stops Run.
func (p *Pipeline) failLocked(j *job, cause error) {
	p.stopLocked(&RecordError{Topic: j.rec.Topic, Partition: j.rec.Partition, Offset: j.rec.Offset, Err: cause})
}

// stopLocked makes err Run's result, unless another error came first, and
// stops Run.
func (p *Pipeline) stopLocked(err error) {
	if p.failure != nil {
		return
	}
	p.failure = err
	p.log.Error("pipeline stopping on error; nothing at or after the failed record is committed", zap.Error(err))
	p.stop(err)
}

func (p *Pipeline) stopWith(err error) {
	p.mu.Lock()
	p.stopLocked(err)
	p.mu.Unlock()
}

// finish takes j out of flight. Only a Processed or FellBack record counts as
// done for its partition's commit point.
func (p *Pipeline) finish(j *job, outcome Outcome) {
	part := j.p
	p.mu.Lock()
	p.count.finish()
	part.count.finish()
	if outcome == Abandoned {
		part.abandoned++
	}
	p.releaseLocked(j)
	p.mode.settleLocked(j, outcome)
	live := p.parts[part.tp] == part
	if live && (outcome == Processed || outcome == FellBack) {
		before, beforeBytes := part.track.Len(), part.track.Bytes()
		advanced, err := part.track.Done(j.rec.Offset)
		if err != nil { // a bookkeeping bug: never commit past it
			p.failLocked(j, err)
			outcome = Failed
		}
		p.buffered -= before - part.track.Len()
		p.bytes -= beforeBytes - part.track.Bytes()
		if advanced && !part.revoking {
			p.commitPointLocked(part)
		}
	}
	if part.revoking && part.count.inFlight == 0 && part.idle != nil && !p.holeLocked(part) {
		close(part.idle)
		part.idle = nil
	}
	p.closeDrainedLocked()
	if live && part.paused && p.drainedLocked(part) && p.pollCancel != nil {
		p.pollCancel() // the poll loop may be waiting on the other partitions
		p.pollCancel = nil
	}
	p.obs.InFlight(p.count.inFlight, p.buffered)
	p.mu.Unlock()

	p.obs.RecordDone(j.rec.Topic, j.rec.Partition, outcome, time.Since(j.started))
	if ce := p.log.Check(zap.DebugLevel, "record finished"); ce != nil {
		ce.Write(zap.String("topic", j.rec.Topic), zap.Int32("partition", j.rec.Partition),
			zap.Int64("offset", j.rec.Offset), zap.Stringer("outcome", outcome))
	}
	wake(p.wakeDispatch)
	wake(p.wakePoll)
}

// commitPointLocked reports that part's commit point moved; commitLoop
// commits it.
func (p *Pipeline) commitPointLocked(part *partition) {
	if next, _, ok := part.track.Commit(); ok {
		p.obs.CommitPoint(part.topic, part.partition, next)
	}
}
