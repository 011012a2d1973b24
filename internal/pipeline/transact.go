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

// outFailure remembers a record whose outputs failed in an aborted round: the
// next time it is taken it goes to Fallback (or, if those were Fallback's
// outputs, stops the pipeline), as a produce failure does at least once.
type outFailure struct {
	err      error
	fellBack bool
}

// transactOpts are the client options of ExactlyOnce mode. The session
// disables autocommit itself; its commit is End's.
func (p *Pipeline) transactOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.TransactionalID(p.o.TransactionalID),
		kgo.TransactionTimeout(p.o.TransactionTimeout),
		// A record that cannot be delivered within a transaction's life
		// fails (the round aborts) instead of holding the round forever.
		kgo.RecordDeliveryTimeout(p.o.TransactionTimeout),
		// Upstream transactions that aborted are not inputs.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			p.onRevokedTxn(ctx, cl, m, false)
		}),
		kgo.OnPartitionsLost(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			p.lease.Revoked()
			p.onRevokedTxn(ctx, cl, m, true)
		}),
	}
}

// runTransactional is Run in ExactlyOnce mode: rounds of poll, handle every
// record, then produce the outputs and commit the offsets in one
// transaction.
func (p *Pipeline) runTransactional(ctx context.Context) error {
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	p.mu.Lock()
	p.stop, p.workCtx = stop, workCtx
	p.mu.Unlock()
	sess, err := kgo.NewGroupTransactSession(p.clientOpts()...)
	if err != nil {
		return fmt.Errorf("pipeline: kafka client: %w", err)
	}
	p.mu.Lock()
	p.sess, p.cl = sess, sess.Client()
	p.mu.Unlock()
	if err := p.checkLease(p.cl); err != nil {
		sess.Close()
		return err
	}
	defer p.startProbe(workCtx, p.cl)()
	// Initialize the producer ID now, not at the first commit: it fences
	// a dead predecessor with the same TransactionalID and aborts its open
	// transaction, whose pending offsets would otherwise keep this member's
	// offset fetch waiting until TransactionTimeout.
	if _, _, err := p.cl.ProducerID(runCtx); err != nil {
		sess.Close()
		if runCtx.Err() != nil && ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("pipeline: transactional producer (transactional id %q): %w", p.o.TransactionalID, err)
	}

	p.log.Info("pipeline starting", zap.String("group", p.o.Group), zap.Strings("topics", p.o.Topics),
		zap.Stringer("delivery", p.o.Delivery), zap.String("transactional_id", p.o.TransactionalID),
		zap.Stringer("mode", p.o.Mode), zap.Int("max_in_flight", p.o.MaxInFlight),
		zap.Int("max_in_flight_per_partition", p.o.MaxInFlightPerPartition), zap.Int("max_buffered", p.o.MaxBuffered))

	// Dispatch outlives runCtx: on shutdown the current round may still
	// finish and commit within DrainTimeout.
	dispatchCtx, stopDispatch := context.WithCancel(workCtx)
	var front, workers errgroup.Group
	p.workers = &workers
	front.Go(func() error { p.dispatch(dispatchCtx); return nil })
	p.startFallbackWorkers(&workers)

	// A round's produce and its End wait on Kafka, with workCtx. On
	// shutdown they get until the deadline; then workCtx ends them, or a
	// member whose brokers are gone would wait forever.
	type stopAt struct {
		at     time.Time
		cutoff *time.Timer
	}
	stopping := make(chan stopAt, 1)
	context.AfterFunc(runCtx, func() {
		stopping <- stopAt{time.Now(), time.AfterFunc(p.o.ShutdownTimeout, stopWork)}
	})
	p.rounds(runCtx) // returns once runCtx is done and the last round ended
	st := <-stopping
	st.cutoff.Stop()
	deadline := st.at.Add(p.o.ShutdownTimeout)

	stopDispatch()
	_ = front.Wait()
	stopWork()
	p.waitWorkers(&workers, deadline)
	p.closeClient(deadline, sess.Close) // leaves the group
	p.mu.Lock()
	failure := p.failure
	p.mu.Unlock()
	p.log.Info("pipeline stopped", zap.Error(failure))
	return failure
}

// rounds polls and ends rounds until ctx ends. A round is one poll's
// records; the next poll waits for the round's transaction, because the
// session commits every offset polled.
func (p *Pipeline) rounds(ctx context.Context) {
	var backoff time.Duration
	for ctx.Err() == nil {
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		fs := p.sess.PollRecords(ctx, p.o.MaxBuffered)
		backoff = p.pollBackoff(fs, backoff)
		p.enqueue(fs)
		p.sess.AllowRebalance()
		p.mu.Lock()
		n := len(p.round)
		p.mu.Unlock()
		if n == 0 {
			continue
		}
		wake(p.wakeDispatch)
		p.endRound(ctx)
	}
}

// endRound waits for the round's records and commits or aborts it.
func (p *Pipeline) endRound(ctx context.Context) {
	if p.awaitRound(ctx) {
		p.commitRound()
		return
	}
	p.abortRound()
}

// The takeover wait in exactly-once mode. A round aborted while its
// handlers ran (a rebalance, an abandoned record, a drain timeout, a
// crash) cut calls off that may still be on their way to the partner, and
// its records are taken again, Fresh: by this member, or by the
// partition's next owner. A guard lookup made before such a call lands
// finds nothing, and a partner without duplicate detection applies the
// write twice. So, as in at-least-once mode (horizon.go), records wait
// TakeoverWait (CallTimeout plus DefaultTakeoverMargin) before they run:
//
//   - those this member takes again after cutting its handlers off, from
//     the cut (cutLocked, resetRound);
//   - those of a partition newly assigned to it, from the assignment
//     (takeOverLocked), always: at-least-once mode knows from the
//     dispatch horizon's metadata when a previous owner released a
//     partition cleanly, but no commit of this mode can say it, since a
//     member commits only after its round's calls, and a member killed in
//     its first round of a partition leaves the previous owner's commit,
//     clean or not.
//
// The cost: after every rebalance that moves a partition, and every round
// aborted mid-call, its records wait TakeoverWait, and since a round is
// one poll across the member's partitions, so does the member's round. Against a partner that
// rejects a repeated transactionId the wait protects nothing; against one
// that applies it, it is the difference between one effect and two.

// takeOverLocked holds a newly assigned partition's records TakeoverWait.
func (p *Pipeline) takeOverLocked(part *partition) {
	if p.o.TakeoverWait <= 0 {
		return
	}
	p.guardUntilLocked(part, time.Now().Add(p.o.TakeoverWait))
}

// cutLocked cancels part's handlers, noting when if any was running.
func (p *Pipeline) cutLocked(part *partition) {
	if part.count.handling > 0 {
		part.cutAt = time.Now()
	}
	part.cancel()
}

// awaitRound waits until every record of the round has its outputs ready
// (true), or the round is doomed or the pipeline failing (false). Once ctx
// ends, the round has DrainTimeout more to finish.
func (p *Pipeline) awaitRound(ctx context.Context) bool {
	done := ctx.Done()
	var deadline <-chan time.Time
	for {
		p.mu.Lock()
		left, doomed, failed := p.roundLeft, p.doomed, p.failure != nil
		p.mu.Unlock()
		switch {
		case failed || doomed:
			return false
		case left == 0:
			return true
		}
		select {
		case <-p.roundWake:
		case <-done:
			done = nil
			t := time.NewTimer(p.o.DrainTimeout)
			defer t.Stop()
			deadline = t.C
		case <-deadline:
			p.log.Warn("drain timed out; the round's transaction is aborted and its records will be processed again by the next owner",
				zap.Duration("drain_timeout", p.o.DrainTimeout), zap.Int("unfinished", left))
			return false
		}
	}
}

// hold keeps a record's outputs for its round's transaction. A record whose
// round is over, or whose partition was dropped, is abandoned.
func (p *Pipeline) hold(j *job, outs []*kgo.Record) {
	p.mu.Lock()
	live := p.parts[j.p.tp] == j.p && j.p.ctx.Err() == nil && j.round == p.roundID
	if live {
		j.outs, j.ready = outs, true
		p.settleLocked(j, false)
	}
	p.releaseLocked(j)
	p.mu.Unlock()
	wake(p.wakeDispatch)
	if !live {
		p.finish(j, Abandoned)
	}
}

// settleLocked counts j out of its round, once; an abandoned record dooms
// the round, since committing it would skip it.
func (p *Pipeline) settleLocked(j *job, abandoned bool) {
	if j.round != p.roundID || j.settled {
		return
	}
	j.settled = true
	p.roundLeft--
	if abandoned {
		p.doomed = true
	}
	wake(p.roundWake)
}

// commitRound produces the round's outputs in one transaction with its
// offsets. Outputs that fail abort the round; their records fall back when
// taken again.
func (p *Pipeline) commitRound() {
	p.mu.Lock()
	jobs := append([]*job(nil), p.round...)
	p.mu.Unlock()
	start := time.Now()
	if err := p.sess.Begin(); err != nil {
		p.stopWith(fmt.Errorf("pipeline: begin transaction: %w", err))
		p.abortRound()
		return
	}
	var acks sync.WaitGroup
	outputs := 0
	for _, j := range jobs {
		j.errMu.Lock()
		j.err = nil
		j.errMu.Unlock()
		for _, out := range j.outs {
			acks.Add(1)
			outputs++
			p.sess.Produce(p.workCtx, out, func(_ *kgo.Record, err error) {
				if err != nil {
					j.errMu.Lock()
					if j.err == nil {
						j.err = fmt.Errorf("%w: %w", ErrProduce, err)
					}
					j.errMu.Unlock()
				}
				acks.Done()
			})
		}
	}
	acked := make(chan struct{})
	go func() { acks.Wait(); close(acked) }() // ends when the client fails or closes the records
	select {
	case <-acked: // bounded by RecordDeliveryTimeout while Kafka answers
	case <-p.workCtx.Done():
		p.log.Warn("shutdown deadline passed with the round's outputs unacknowledged; the transaction is aborted",
			zap.Int("records", len(jobs)))
		p.abortRound()
		return
	}
	failed := 0
	for _, j := range jobs {
		if err := j.produceErr(); err != nil {
			p.mu.Lock()
			m := p.outFailed[j.p.tp]
			if m == nil {
				m = make(map[int64]outFailure)
				p.outFailed[j.p.tp] = m
			}
			m[j.rec.Offset] = outFailure{err: err, fellBack: j.fellBack}
			p.mu.Unlock()
			if failed == 0 {
				p.log.Warn("outputs failed; the round's transaction is aborted and the record falls back when taken again",
					zap.String("topic", j.rec.Topic), zap.Int32("partition", j.rec.Partition), zap.Int64("offset", j.rec.Offset), zap.Error(err))
			}
			failed++
		}
	}
	if failed > 0 {
		p.abortRound()
		return
	}
	committed, err := p.sess.End(p.workCtx, kgo.TryCommit)
	if err != nil {
		p.stopWith(fmt.Errorf("pipeline: transaction (transactional id %q): %w", p.o.TransactionalID, err))
		p.resetRound()
		return
	}
	if !committed {
		p.log.Info("transaction aborted: the group rebalanced during the round; its records will be processed again",
			zap.Int("records", len(jobs)))
		p.resetRound()
		return
	}
	if ce := p.log.Check(zap.DebugLevel, "transaction committed"); ce != nil {
		ce.Write(zap.Int("records", len(jobs)), zap.Int("outputs", outputs), zap.Duration("took", time.Since(start)))
	}
	p.mu.Lock()
	for _, j := range jobs {
		if p.parts[j.p.tp] == j.p && j.rec.Offset >= p.txnDone[j.p.tp] {
			p.txnDone[j.p.tp] = j.rec.Offset + 1
		}
	}
	p.closeRoundLocked()
	p.mu.Unlock()
	for _, j := range jobs {
		p.done(j)
	}
}

// abortRound stops the round's handlers, waits for them (at most
// DrainTimeout), aborts the transaction, which rewinds the consumer to the
// committed offsets, and resets the partitions.
func (p *Pipeline) abortRound() {
	p.mu.Lock()
	p.doomed = true
	for _, part := range p.parts {
		p.cutLocked(part)
	}
	p.mu.Unlock()
	timer := time.NewTimer(p.o.DrainTimeout)
	defer timer.Stop()
wait:
	for {
		p.mu.Lock()
		handling := p.count.handling
		p.mu.Unlock()
		if handling == 0 {
			break
		}
		select {
		case <-p.roundWake:
		case <-timer.C:
			p.log.Error("handlers ignored cancellation; their records may run again concurrently", zap.Int("handling", handling))
			break wait
		}
	}
	if _, err := p.sess.End(p.workCtx, kgo.TryAbort); err != nil {
		p.stopWith(fmt.Errorf("pipeline: abort transaction (transactional id %q): %w", p.o.TransactionalID, err))
	}
	p.resetRound()
}

// resetRound forgets an aborted round: every partition starts again from its
// committed offset (the session rewound the consumer), and what the round
// took is Fresh again, since its effects may have happened.
func (p *Pipeline) resetRound() {
	p.mu.Lock()
	var ready []*job
	var cut []string
	for _, j := range p.round {
		if j.ready {
			ready = append(ready, j)
		}
	}
	for key, part := range p.parts {
		part.cancel()
		p.buffered -= part.track.Len()
		p.bytes -= part.track.Bytes()
		fresh := part.fresh + part.taken
		next := p.newPartitionLocked(key)
		next.fresh = fresh
		if p.o.TakeoverWait > 0 {
			// The assignment's wait goes on, and a cut adds its own.
			until := part.guardAfter
			if !part.cutAt.IsZero() {
				until = later(until, part.cutAt.Add(p.o.TakeoverWait))
				cut = append(cut, key.String())
			}
			p.guardUntilLocked(next, until)
		}
	}
	if len(cut) > 0 {
		p.log.Info("round aborted while handlers ran; the records of their partitions wait for their last partner calls to land before they run again",
			zap.Strings("partitions", cut), zap.Duration("takeover_wait", p.o.TakeoverWait))
	}
	p.closeRoundLocked()
	p.obs.InFlight(p.count.inFlight, p.buffered)
	p.mu.Unlock()
	for _, j := range ready {
		p.finish(j, Abandoned)
	}
}

// closeRoundLocked ends the current round: late settlements of its records
// no longer count.
func (p *Pipeline) closeRoundLocked() {
	p.roundID++
	p.round = nil
	p.roundLeft = 0
	p.doomed = false
	for _, part := range p.parts {
		part.taken = 0
	}
}

// takeOutFailure returns and forgets j's failure from an aborted round.
func (p *Pipeline) takeOutFailure(j *job) (outFailure, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.outFailed[j.p.tp]
	f, ok := m[j.rec.Offset]
	if ok {
		delete(m, j.rec.Offset)
		if len(m) == 0 {
			delete(p.outFailed, j.p.tp)
		}
	}
	return f, ok
}

func (p *Pipeline) stopWith(err error) {
	p.mu.Lock()
	p.stopLocked(err)
	p.mu.Unlock()
}

// onRevokedTxn dooms the round (the session aborts its transaction anyway),
// cancels every handler, waits for the revoked partitions' handlers (at most
// DrainTimeout) so that their next owner does not run a record this member
// is still running, and drops them. It never commits: only End does.
func (p *Pipeline) onRevokedTxn(_ context.Context, cl *kgo.Client, revoked map[string][]int32, lost bool) {
	if len(revoked) == 0 {
		return
	}
	start := time.Now()
	p.mu.Lock()
	p.doomed = true
	var parts []*partition
	var stopped []chan struct{}
	for topic, ns := range revoked {
		for _, n := range ns {
			part := p.parts[tp{topic, n}]
			if part == nil {
				continue
			}
			part.revoking = true
			parts = append(parts, part)
			if part.count.handling > 0 {
				part.stopped = make(chan struct{})
				stopped = append(stopped, part.stopped)
			}
		}
	}
	for _, part := range p.parts {
		p.cutLocked(part)
	}
	p.mu.Unlock()
	wake(p.roundWake)
	for topic, ns := range revoked {
		p.obs.Assigned(topic, ns, false, lost)
	}

	timer := time.NewTimer(p.o.DrainTimeout)
	timedOut := false
wait:
	for _, c := range stopped {
		select {
		case <-c:
		case <-timer.C:
			timedOut = true
			break wait
		}
	}
	timer.Stop()

	p.mu.Lock()
	resume := p.dropLocked(parts)
	p.mu.Unlock()
	if resume != nil {
		cl.ResumeFetchPartitions(resume)
	}
	msg := "partitions revoked; the round's transaction aborts"
	if lost {
		msg = "partitions lost; the round's transaction aborts"
	}
	for topic, ns := range revoked {
		p.log.Info(msg, zap.String("topic", topic), zap.Int32s("partitions", ns),
			zap.Duration("stop", time.Since(start)), zap.Bool("stop_timed_out", timedOut))
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
