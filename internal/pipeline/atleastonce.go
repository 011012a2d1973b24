package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// atLeastOnce is Delivery AtLeastOnce: outputs are produced as soon as a
// handler returns, offsets are committed by the pipeline itself with the
// dispatch horizon in their metadata (horizon.go), and a record is
// dispatched only below a horizon that is durable.
type atLeastOnce struct {
	p          *Pipeline
	wakeCommit chan struct{} // capacity 1: a horizon must move
	commitMu   sync.Mutex    // one commit at a time, so none lands after a later one
}

// horizonState is a partition's dispatch horizon, guarded by Pipeline.mu.
type horizonState struct {
	known       bool   // the assignment's committed offset was read
	committed   int64  // the offset to commit while nothing is done; -1 before it is known
	guardBelow  int64  // records below it are Fresh: the previous owner's horizon
	horizon     int64  // durable: records below it may be dispatched
	want        int64  // the horizon asked of the committer
	held        []*job // taken at or past the horizon, in offset order
	fresh       int    // records still to be marked Fresh (a commit without a horizon)
	sentAt      int64  // last offset committed, -1 before
	sentHorizon int64  // last horizon committed, -1 before
	// sentReleased: the last commit marked the partition released.
	sentReleased bool
}

func newAtLeastOnce(p *Pipeline) *atLeastOnce {
	return &atLeastOnce{p: p, wakeCommit: make(chan struct{}, 1)}
}

func hz(part *partition) *horizonState { return part.state.(*horizonState) }

func (a *atLeastOnce) clientOpts() []kgo.Opt {
	// The pipeline commits itself (commitLoop): every commit carries the
	// dispatch horizon in its metadata, which autocommit cannot.
	return []kgo.Opt{kgo.DisableAutoCommit(), kgo.OnOffsetsFetched(a.onFetched)}
}

func (a *atLeastOnce) run(ctx context.Context) error {
	p := a.p
	runCtx, stop, workCtx, stopWork := p.begin(ctx)
	defer stop(nil)
	defer stopWork()
	cl, err := kgo.NewClient(p.clientOpts()...)
	if err != nil {
		return fmt.Errorf("pipeline: kafka client: %w", err)
	}
	stopProbe, err := p.connect(workCtx, cl, cl.Close)
	if err != nil {
		return err
	}
	defer stopProbe()

	p.log.Info("pipeline starting", zap.String("group", p.o.Group), zap.Strings("topics", p.o.Topics),
		zap.Stringer("mode", p.o.Mode), zap.Int("max_in_flight", p.o.MaxInFlight),
		zap.Int("max_in_flight_per_partition", p.o.MaxInFlightPerPartition), zap.Int("max_buffered", p.o.MaxBuffered))

	var front, workers, committer errgroup.Group
	p.workers = &workers
	front.Go(func() error { p.pollLoop(runCtx); return nil })
	front.Go(func() error { p.dispatch(runCtx); return nil })
	commitCtx, stopCommits := context.WithCancel(workCtx)
	committer.Go(func() error { a.commitLoop(commitCtx, cl); return nil })
	p.startFallbackWorkers(&workers)

	<-runCtx.Done()
	deadline := time.Now().Add(p.o.ShutdownTimeout)
	_ = front.Wait()
	p.drain(workCtx, deadline)
	stopWork()
	p.waitWorkers(&workers, deadline)
	stopCommits()
	_ = committer.Wait()

	// Commit what is contiguous, flush what was produced, leave.
	parts := p.leaving()
	finalCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), within(deadline, p.o.DrainTimeout))
	if err := a.commit(finalCtx, cl, parts); err != nil {
		// Leaving the group waits for a rebalance in progress and then
		// revokes every partition; revoked commits the marks again.
		p.log.Warn("final commit failed; retried as the member leaves the group", zap.Error(err))
	}
	cancel()
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), within(deadline, p.o.DrainTimeout))
	if err := cl.Flush(flushCtx); err != nil {
		p.log.Warn("flush before close failed", zap.Error(err))
	}
	cancel()
	p.closeClient(deadline, cl.Close) // leaves the group; revoked runs with closing set
	return p.stopped()
}

func (a *atLeastOnce) openLocked(part *partition) {
	part.state = &horizonState{committed: -1, sentAt: -1, sentHorizon: -1}
}

// assignedLocked does nothing: the horizon and the takeover wait are
// learned from the committed offset (onFetched).
func (a *atLeastOnce) assignedLocked(*partition) {}

// admitLocked decides, for a record just taken, whether it may be scheduled
// now (below the horizon, and nothing before it is held) or must wait for
// the horizon to move, and asks for a move when the horizon is near.
func (a *atLeastOnce) admitLocked(part *partition, j *job) bool {
	h := hz(part)
	if !h.known { // adopted without an assignment callback: the old guess
		h.known = true
		h.fresh = a.p.o.MaxBufferedPerPartition
	}
	switch {
	case j.rec.Offset < h.guardBelow:
		j.fresh = true
	case h.fresh > 0:
		j.fresh = true
		h.fresh--
	}
	if h.committed < 0 {
		h.committed = j.rec.Offset // where this member started: nothing done yet
	}
	if len(h.held) == 0 && j.rec.Offset < h.horizon {
		part.sched.Push(j.rec.Offset, j.rec.Key, j)
	} else {
		h.held = append(h.held, j)
	}
	if step := int64(a.p.o.HorizonStep); h.horizon-(j.rec.Offset+1) < step/2 {
		if want := j.rec.Offset + 1 + step; want > h.want {
			h.want = want
			wake(a.wakeCommit)
		}
	}
	return true
}

// mayStartLocked: the horizon holds records back before they are
// scheduled (admitLocked), so whatever is scheduled may start.
func (a *atLeastOnce) mayStartLocked(*partition) bool { return true }

// priorFailure: a record whose outputs fail goes to Fallback at once (the
// promise hands it to a fallback worker), so none brings a failure along.
func (a *atLeastOnce) priorFailure(*job) (outFailure, bool) { return outFailure{}, false }

// produce releases the lane and produces the outputs asynchronously: the
// last promise (job.onAck) finishes the record, or hands it to Fallback.
func (a *atLeastOnce) produce(j *job, outs []*kgo.Record) {
	p := a.p
	p.releaseLane(j)
	if len(outs) == 0 {
		p.done(j)
		return
	}
	j.errMu.Lock()
	j.err = nil
	j.errMu.Unlock()
	j.pending.Store(int32(len(outs)))
	for _, out := range outs {
		p.cl.Produce(p.workCtx, out, j.promise)
	}
}

func (a *atLeastOnce) releasedLocked(*job) {}

// settleLocked does nothing: a record done is settled by the core's
// commit point, which commitLoop commits.
func (a *atLeastOnce) settleLocked(*job, Outcome) {}

// revoked stops dispatching the revoked partitions, waits for their
// in-flight records (at most DrainTimeout), marks and commits, and only then
// lets franz-go hand the partitions to another member.
func (a *atLeastOnce) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	p := a.p
	if len(revoked) == 0 {
		return
	}
	start := time.Now()
	p.mu.Lock()
	parts := p.partitionsLocked(revoked)
	var idle []chan struct{}
	for _, part := range parts {
		part.revoking = true
		if (part.count.inFlight > 0 || p.holeLocked(part)) && !p.closing {
			part.idle = make(chan struct{})
			idle = append(idle, part.idle)
		}
	}
	p.mu.Unlock()
	for topic, ns := range revoked {
		p.obs.Assigned(topic, ns, false, false)
	}

	timedOut := waitClosed(idle, p.o.DrainTimeout)

	p.mu.Lock()
	for _, part := range parts {
		p.commitPointLocked(part)
	}
	resume := p.dropLocked(parts)
	p.mu.Unlock()
	if resume != nil {
		cl.ResumeFetchPartitions(resume) // a pause must not outlive the assignment
	}
	for topic, ns := range revoked {
		p.obs.Released(topic, ns)
	}

	commitCtx, cancel := context.WithTimeout(ctx, p.o.DrainTimeout)
	err := a.commit(commitCtx, cl, parts)
	cancel()
	for topic, ns := range revoked {
		if err != nil {
			// What was marked stays uncommitted: the next owner redoes it.
			p.log.Warn("partitions revoked; their commit failed, so their next owner processes again from the last commit",
				zap.String("topic", topic), zap.Int32s("partitions", ns), zap.Bool("leaving", p.isClosing()), zap.Error(err))
			continue
		}
		p.log.Info("partitions revoked", zap.String("topic", topic), zap.Int32s("partitions", ns),
			zap.Duration("drain", time.Since(start)), zap.Bool("drain_timed_out", timedOut))
	}
	wake(p.wakePoll)
}

// lost drops the partitions without committing: another member may own
// them already.
func (a *atLeastOnce) lost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	p := a.p
	if len(lost) == 0 {
		return
	}
	p.mu.Lock()
	resume := p.dropLocked(p.partitionsLocked(lost))
	p.mu.Unlock()
	if resume != nil {
		cl.ResumeFetchPartitions(resume)
	}
	for topic, ns := range lost {
		p.log.Warn("partitions lost; uncommitted records will be processed again by their next owner",
			zap.String("topic", topic), zap.Int32s("partitions", ns))
		p.obs.Assigned(topic, ns, false, true)
		p.obs.Released(topic, ns)
	}
	wake(p.wakePoll)
}
