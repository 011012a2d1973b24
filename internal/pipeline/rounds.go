package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// endRound waits for the round's records and commits or aborts it; true
// when it committed.
func (e *exactlyOnce) endRound(ctx context.Context) (committed bool) {
	if e.awaitRound(ctx) {
		return e.commitRound()
	}
	e.abortRound()
	return false
}

// The takeover wait in exactly-once mode. A round aborted while its
// handlers ran (a loss, a revocation whose handlers outlived half of
// DrainTimeout, an abandoned record, a drain timeout, a crash) cut calls off that may still be on their way to the partner, and
// its records are taken again, Fresh: by this member, or by the
// partition's next owner. A guard lookup made before such a call lands
// finds nothing, and a partner without duplicate detection applies the
// write twice. So, as in at-least-once mode (horizon.go), records wait
// TakeoverWait (CallTimeout plus DefaultTakeoverMargin) before they run:
//
//   - those this member takes again after cutting its handlers off, from
//     the cut (cutLocked, resetRound);
//   - those of a partition newly assigned to it, from the assignment
//     (assignedLocked), unless its committed offset carries a previous
//     owner's release marker or there is none (release.go: the claim
//     before a member's first dispatch and the release at a revocation or
//     a clean stop make either mean that no previous owner's call can
//     still land).
//
// The cost: after every unclean takeover, and every round aborted
// mid-call, its records wait TakeoverWait, and since a round is one poll
// across the member's partitions, so does the member's round. Against a
// partner that rejects a repeated transactionId the wait protects
// nothing; against one that applies it, it is the difference between one
// effect and two.

// cutLocked cancels part's handlers, noting when if any was running.
func (e *exactlyOnce) cutLocked(part *partition) {
	if part.count.handling > 0 {
		eosState(part).cutAt = time.Now()
	}
	part.cancel()
}

// awaitRound waits until every record of the round has its outputs ready
// (true), or the round is doomed or the pipeline failing (false). Once ctx
// ends, the round has DrainTimeout more to finish.
func (e *exactlyOnce) awaitRound(ctx context.Context) bool {
	p := e.p
	done := ctx.Done()
	var deadline <-chan time.Time
	for {
		p.mu.Lock()
		left, doomed, failed := e.roundLeft, e.doomed, p.failure != nil
		p.mu.Unlock()
		switch {
		case failed || doomed:
			return false
		case left == 0:
			return true
		}
		select {
		case <-e.roundWake:
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

// countOutLocked counts j out of its round, once; an abandoned record dooms
// the round, since committing it would skip it.
func (e *exactlyOnce) countOutLocked(j *job, abandoned bool) {
	r := roundOf(j)
	if r.round != e.roundID || r.settled {
		return
	}
	r.settled = true
	e.roundLeft--
	if abandoned {
		e.doomed = true
	}
	wake(e.roundWake)
}

// commitRound produces the round's outputs in one transaction with its
// offsets, true when it committed. Outputs that fail abort the round;
// their records fall back when taken again, unless the broker refused the
// producer's state rather than the record (producerStateErr): then they
// run again as they were, for producerRefusalLimit rounds in a row at most.
func (e *exactlyOnce) commitRound() bool {
	p := e.p
	p.mu.Lock()
	jobs := append([]*job(nil), e.round...)
	p.mu.Unlock()
	start := time.Now()
	if err := e.sess.Begin(); err != nil {
		p.stopWith(fmt.Errorf("pipeline: begin transaction: %w", err))
		e.abortRound()
		return false
	}
	var acks sync.WaitGroup
	outputs := 0
	for _, j := range jobs {
		j.errMu.Lock()
		j.err = nil
		j.errMu.Unlock()
		for _, out := range roundOf(j).outs {
			acks.Add(1)
			outputs++
			e.sess.Produce(p.workCtx, out, func(_ *kgo.Record, err error) {
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
		e.abortRound()
		return false
	}
	failed, refused := 0, 0
	var refusal error
	for _, j := range jobs {
		if err := j.produceErr(); err != nil {
			if producerStateErr(err) {
				// The producer's fault, not the record's: the record
				// runs again, not to Fallback.
				if refusal == nil {
					refusal = err
				}
				refused++
				continue
			}
			p.mu.Lock()
			m := e.outFailed[j.p.tp]
			if m == nil {
				m = make(map[int64]outFailure)
				e.outFailed[j.p.tp] = m
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
	if refused > 0 {
		e.producerRefusals++
		if e.producerRefusals > producerRefusalLimit {
			p.stopWith(fmt.Errorf("pipeline: transactional producer (transactional id %q): outputs refused in %d rounds in a row: %w",
				p.o.TransactionalID, e.producerRefusals, refusal))
		} else {
			p.log.Warn("outputs refused for the transactional producer's state, not for their records; the round's transaction is aborted and its records run again",
				zap.Int("records", refused), zap.Int("rounds_in_a_row", e.producerRefusals), zap.Error(refusal))
		}
	}
	if failed+refused > 0 {
		e.abortRound()
		return false
	}
	committed, err := e.sess.End(p.workCtx, kgo.TryCommit)
	if err != nil {
		if unconfirmedEnd(err) {
			err = fmt.Errorf("%w: %w", ErrTransactionUnconfirmed, err)
		}
		p.stopWith(fmt.Errorf("pipeline: transaction (transactional id %q): %w", p.o.TransactionalID, err))
		e.salvage(nil, time.Now().Add(p.o.DrainTimeout/2))
		e.resetRound()
		return false
	}
	if !committed {
		p.log.Info("transaction aborted: the group rebalanced during the round; its records will be processed again",
			zap.Int("records", len(jobs)))
		e.salvage(nil, time.Now().Add(p.o.DrainTimeout/2))
		e.resetRound()
		return false
	}
	if ce := p.log.Check(zap.DebugLevel, "transaction committed"); ce != nil {
		ce.Write(zap.Int("records", len(jobs)), zap.Int("outputs", outputs), zap.Duration("took", time.Since(start)))
	}
	e.producerRefusals = 0
	p.mu.Lock()
	for _, j := range jobs {
		if p.parts[j.p.tp] == j.p && j.rec.Offset >= e.txnDone[j.p.tp] {
			e.txnDone[j.p.tp] = j.rec.Offset + 1
		}
	}
	e.closeRoundLocked()
	p.mu.Unlock()
	for _, j := range jobs {
		p.done(j)
	}
	return true
}

// unconfirmedEnd reports whether an error of a commit's End leaves the
// outcome unknown: anything but a definite answer of Kafka's (a
// non-retriable error code: fenced, an invalid mapping, an offset commit
// refused, after which franz-go aborts). franz-go treats the same errors
// as unconfirmed (a transport error, a retriable code that outlived its
// retries, UNKNOWN_SERVER_ERROR) and reloads the producer ID after them.
// A context's error is a stop asked for, before any EndTxn was sent.
func unconfirmedEnd(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	ke, ok := errors.AsType[*kerr.Error](err)
	return !ok || ke.Retriable || ke == kerr.UnknownServerError
}

// producerRefusalLimit is how many rounds in a row may have their outputs
// refused for the producer's state (producerStateErr) before Run stops:
// each such round's abort renews the producer's epoch, after which a
// healthy cluster takes the next round; one that refuses it again and
// again is not one a retry mends.
const producerRefusalLimit = 3

// producerStateErr reports whether a produce error is about the
// transactional producer's state on the broker rather than about the
// record: a sequence the partition's leader did not expect (its producer
// state lost with a truncated log, a leader elected uncleanly, a
// transaction aborted under the producer), an epoch the coordinator has
// moved past (a transaction timed out and was aborted), a producer ID it
// forgot, or a transaction it asks to abort (KIP-890). franz-go fails the
// producer ID on the first four and recovers it when the transaction
// aborts (an InitProducerID that bumps the epoch, KIP-360); the abort is
// all TRANSACTION_ABORTABLE asks for; a fenced producer, or one franz-go
// cannot recover, makes End fail, which stops Run. None says anything about
// the record, so none sends it to Fallback: its handler's effect may have
// happened, and an error output would say it did not.
func producerStateErr(err error) bool {
	return errors.Is(err, kerr.OutOfOrderSequenceNumber) ||
		errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.UnknownProducerID) ||
		errors.Is(err, kerr.InvalidProducerIDMapping) ||
		errors.Is(err, kerr.ProducerFenced) ||
		errors.Is(err, kerr.TransactionAbortable)
}

// abortRound stops the round's handlers, waits for them (at most
// DrainTimeout), aborts the transaction, which rewinds the consumer to the
// committed offsets, and resets the partitions. After a revocation the
// handlers first get half of DrainTimeout to finish their calls uncut.
func (e *exactlyOnce) abortRound() {
	p := e.p
	p.mu.Lock()
	e.doomed = true
	drain := e.drainFirst
	p.mu.Unlock()
	if drain {
		// A revocation (not a loss) doomed the round: its handlers may
		// finish their calls (nothing new starts), so that none is cut
		// off and no takeover wait follows (revoke).
		e.waitHandlers(p.o.DrainTimeout / 2)
	}
	p.mu.Lock()
	for _, part := range p.parts {
		e.cutLocked(part)
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
		case <-e.roundWake:
		case <-timer.C:
			p.log.Error("handlers ignored cancellation; their records may run again concurrently", zap.Int("handling", handling))
			break wait
		}
	}
	e.salvage(nil, time.Now().Add(p.o.DrainTimeout/2))
	if _, err := e.sess.End(p.workCtx, kgo.TryAbort); err != nil {
		p.stopWith(fmt.Errorf("pipeline: abort transaction (transactional id %q): %w", p.o.TransactionalID, err))
	}
	e.resetRound()
}

// waitHandlers waits until no handler runs, at most d; false when d ran
// out first.
func (e *exactlyOnce) waitHandlers(d time.Duration) bool {
	p := e.p
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		p.mu.Lock()
		handling := p.count.handling
		p.mu.Unlock()
		if handling == 0 {
			return true
		}
		select {
		case <-e.roundWake:
		case <-timer.C:
			return false
		}
	}
}

// resetRound forgets an aborted round: every partition starts again from its
// committed offset (the session rewound the consumer), and what the round
// took is Fresh again, since its effects may have happened.
func (e *exactlyOnce) resetRound() {
	p := e.p
	p.mu.Lock()
	var ready []*job
	var cut []string
	for _, j := range e.round {
		if roundOf(j).ready {
			ready = append(ready, j)
		}
	}
	for key, part := range p.parts {
		part.cancel()
		p.buffered -= part.track.Len()
		p.bytes -= part.track.Bytes()
		st := eosState(part)
		fresh := st.fresh + st.taken
		next := p.newPartitionLocked(key)
		eosState(next).fresh = fresh
		if p.o.TakeoverWait > 0 {
			// The assignment's wait goes on, and a cut adds its own.
			until := part.guardAfter
			if !st.cutAt.IsZero() {
				until = later(until, st.cutAt.Add(p.o.TakeoverWait))
				cut = append(cut, key.String())
			}
			p.guardUntilLocked(next, until)
		}
	}
	if len(cut) > 0 {
		p.log.Info("round aborted while handlers ran; the records of their partitions wait for their last partner calls to land before they run again",
			zap.Strings("partitions", cut), zap.Duration("takeover_wait", p.o.TakeoverWait))
	}
	e.closeRoundLocked()
	p.obs.InFlight(p.count.inFlight, p.buffered)
	p.mu.Unlock()
	for _, j := range ready {
		p.finish(j, Abandoned)
	}
}

// closeRoundLocked ends the current round: late settlements of its records
// no longer count.
func (e *exactlyOnce) closeRoundLocked() {
	p := e.p
	e.roundID++
	e.round = nil
	e.roundLeft = 0
	e.doomed = false
	e.drainFirst = false
	for _, part := range p.parts {
		eosState(part).taken = 0
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
