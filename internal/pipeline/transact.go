package pipeline

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// exactlyOnce is Delivery ExactlyOnce: rounds of one poll each, whose
// outputs and input offsets one transaction of a franz-go
// GroupTransactSession writes (rounds.go). Its state, but sess, is guarded
// by Pipeline.mu.
type exactlyOnce struct {
	p         *Pipeline
	sess      *kgo.GroupTransactSession
	round     []*job // the current round's jobs, in poll order
	roundID   uint64 // bumped whenever a round ends
	roundLeft int    // jobs of the round not yet settled
	doomed    bool   // the round must abort: a rebalance, an abandoned record
	// drainFirst: the round was doomed by a revocation, and its handlers
	// finish their calls before any is cut (abortRound, revoke).
	drainFirst bool
	roundWake  chan struct{}
	outFailed  map[tp]map[int64]outFailure // outputs that failed in an aborted round (priorFailure)
	// producerRefusals: rounds in a row whose outputs the broker refused
	// for the producer's state (producerStateErr); used by the round
	// loop only.
	producerRefusals int
	// txnDone is, per partition owned since, the offset below which this
	// member's own committed transactions cover every record.
	txnDone map[tp]int64
	// The claim and the release (release.go). inheriting: partitions
	// assigned whose committed offset is not read yet; claimAt: those
	// read, paused until this member's claim commits, with their committed
	// offset (-1: none); pollCancel ends the round loop's poll, so that
	// a claim that became possible is not held behind it.
	inheriting map[tp]bool
	claimAt    map[tp]int64
	claimedAt  map[tp]int64 // the offset each claim committed
	pollCancel context.CancelFunc
	turns      turns // fair.go
}

// roundState is a partition's part in the current round.
type roundState struct {
	fresh   int           // records still to be marked Fresh
	taken   int           // records taken in the current round
	stopped chan struct{} // while revoking: closed when handling reaches 0
	cutAt   time.Time     // when handlers of the partition were last canceled while running
}

// roundJob is a record's part in its round.
type roundJob struct {
	round   uint64        // the round the job was taken in
	settled bool          // counted out of roundLeft
	outs    []*kgo.Record // ready: outputs awaiting the round's transaction
	ready   bool
	// salvaged: outs were given to Options.Salvage (the round aborts).
	salvaged bool
}

func newExactlyOnce(p *Pipeline) *exactlyOnce {
	return &exactlyOnce{
		p:         p,
		roundWake: make(chan struct{}, 1),
		outFailed: make(map[tp]map[int64]outFailure),
		txnDone:   make(map[tp]int64),

		inheriting: make(map[tp]bool),
		claimAt:    make(map[tp]int64),
		claimedAt:  make(map[tp]int64),
		turns:      turns{lag: make(map[tp]int64), paused: make(map[tp]bool)},
	}
}

func eosState(part *partition) *roundState { return part.state.(*roundState) }

func roundOf(j *job) *roundJob { return j.state.(*roundJob) }

// clientOpts: the session disables autocommit itself; its commit is End's.
func (e *exactlyOnce) clientOpts() []kgo.Opt {
	p := e.p
	return []kgo.Opt{
		kgo.TransactionalID(p.o.TransactionalID),
		kgo.TransactionTimeout(p.o.TransactionTimeout),
		// A record that cannot be delivered within a transaction's life
		// fails (the round aborts) instead of holding the round forever.
		kgo.RecordDeliveryTimeout(p.o.TransactionTimeout),
		// Upstream transactions that aborted are not inputs.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// A previous owner's release marker lifts the takeover wait.
		kgo.OnOffsetsFetched(e.onFetched),
	}
}

// run: rounds of poll, handle every record, then produce the outputs and
// commit the offsets in one transaction.
func (e *exactlyOnce) run(ctx context.Context) error {
	p := e.p
	runCtx, stop, workCtx, stopWork := p.begin(ctx)
	defer stop(nil)
	defer stopWork()
	sess, err := kgo.NewGroupTransactSession(p.clientOpts()...)
	if err != nil {
		return fmt.Errorf("pipeline: kafka client: %w", err)
	}
	e.sess = sess
	stopProbe, err := p.connect(workCtx, sess.Client(), sess.Close)
	if err != nil {
		return err
	}
	defer stopProbe()
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
		zap.Int("max_in_flight_per_partition", p.o.MaxInFlightPerPartition), zap.Int("max_buffered", p.o.MaxBuffered),
		zap.Int("round_records", p.o.RoundRecords))

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
	e.rounds(runCtx) // returns once runCtx is done and the last round ended
	e.release()      // before leaving the group: the next owners need not wait
	st := <-stopping
	st.cutoff.Stop()
	deadline := st.at.Add(p.o.ShutdownTimeout)

	stopDispatch()
	_ = front.Wait()
	stopWork()
	p.waitWorkers(&workers, deadline)
	p.closeClient(deadline, sess.Close) // leaves the group
	return p.stopped()
}

// rounds polls and ends rounds until ctx ends. A round is what one
// pollRound takes, at most RoundRecords, a share of each lagging partition;
// the next round's polls wait for its transaction, because the session
// commits every offset polled.
func (e *exactlyOnce) rounds(ctx context.Context) {
	p := e.p
	var backoff time.Duration
	limit := firstRoundLimit(p.o)
	for ctx.Err() == nil {
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		p.mu.Lock()
		doomed := e.doomed && len(e.round) == 0
		p.mu.Unlock()
		if doomed {
			// A revocation between rounds: the session aborts the next
			// transaction whatever it holds, so end it now rather than
			// poll records only to throw them away.
			e.abortRound()
			continue
		}
		pollCtx, cancel := e.claim(ctx)
		fs := e.pollRound(pollCtx, limit)
		cancel()
		backoff = p.pollBackoff(fs, backoff)
		e.sess.AllowRebalance()
		p.mu.Lock()
		n := len(e.round)
		p.mu.Unlock()
		if n == 0 && fs.NumRecords() == 0 {
			continue
		}
		// A poll whose records were all skipped (below what this
		// member's transactions committed, after the consumer was reset
		// back: a data-loss reset after a leader change did so in the
		// chaos suite) still commits their offsets, in a round of none:
		// an earlier round may have committed the reset position, below
		// records already answered, and with no record left to run, no
		// other round would move it back up.
		start := time.Now()
		wake(p.wakeDispatch)
		if e.endRound(ctx) && n > 0 {
			limit = roundLimit(p.o, n, time.Since(start))
		}
	}
}

// firstRoundLimit is how many records a member's first round may poll,
// before any round has shown its rate: two rounds of slots. A round of
// RoundRecords, 4,096 by default, took 5.6 s as a restarted member's
// first on a loaded machine, while the partitions it had just taken over
// went without results; roundLimit grows the next one to RoundRecords
// within a round or two when the rate allows.
func firstRoundLimit(o Options) int {
	return min(o.RoundRecords, 2*o.MaxInFlight)
}

// roundLimit is how many records the round after one of n records that
// took took (from its poll to its commit) may poll: as many as that rate
// answers in RoundTime, at least min(MaxInFlight, RoundRecords) and at
// most RoundRecords. The rate is the member's own, whatever bounds it
// (the partner's latency and push-back, the adaptive call limit, the
// machine), so a round stays near RoundTime as it changes; an aborted
// round, whose time says nothing about the rate, leaves it as it was.
func roundLimit(o Options, n int, took time.Duration) int {
	least := min(o.MaxInFlight, o.RoundRecords)
	if took <= 0 {
		return o.RoundRecords
	}
	want := float64(n) * float64(o.RoundTime) / float64(took)
	return int(max(float64(least), min(float64(o.RoundRecords), want)))
}

func (e *exactlyOnce) openLocked(part *partition) {
	// A previous owner can have done at most one uncommitted round: of
	// its RoundRecords, which this member cannot know, and which its
	// MaxBuffered bounds if it ran with this member's settings (a version
	// before RoundRecords took whole polls of MaxBuffered).
	part.state = &roundState{fresh: e.p.o.MaxBuffered}
}

// assignedLocked holds a newly assigned partition's records TakeoverWait
// (rounds.go says why), unless its committed offset, read next, carries
// the previous owner's release marker (release.go, onFetched).
func (e *exactlyOnce) assignedLocked(part *partition) {
	p := e.p
	if p.o.TakeoverWait <= 0 {
		return
	}
	p.guardUntilLocked(part, time.Now().Add(p.o.TakeoverWait))
	e.inheriting[part.tp] = true
}

// admitLocked puts a record in the current round, unless this member's
// own committed transactions cover it.
func (e *exactlyOnce) admitLocked(part *partition, j *job) bool {
	r := j.rec
	if done := e.txnDone[part.tp]; r.Offset < done {
		// After an aborted round the session rewinds to the offsets
		// the client believes committed; the chaos suite caught it
		// rewinding a partition to 0 below offsets this member's own
		// transactions had committed, and the records ran twice.
		if part.last < 0 {
			e.p.log.Warn("rewound below what this member's transactions committed; those records are skipped",
				zap.String("topic", r.Topic), zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset),
				zap.Int64("committed", done))
		}
		return false
	}
	if _, unclaimed := e.claimAt[part.tp]; unclaimed || e.inheriting[part.tp] {
		// Never expected (onFetched pauses the partition before it is
		// fetched), and never run: the session would commit the
		// record's offset with the round, and this member's claim is
		// not durable yet. The round aborts before anything starts.
		if !e.doomed {
			e.p.log.Warn("record of a partition not claimed yet; the round is aborted before it starts",
				zap.String("topic", r.Topic), zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset))
		}
		e.doomed = true
	}
	st := eosState(part)
	if st.fresh > 0 {
		j.fresh = true
		st.fresh--
	}
	part.sched.Push(r.Offset, r.Key, j)
	j.state = &roundJob{round: e.roundID}
	e.round = append(e.round, j)
	e.roundLeft++
	st.taken++
	return true
}

// mayStartLocked: nothing starts once the round must abort, nor in a
// partition being revoked (the round rolls back, it is not drained).
func (e *exactlyOnce) mayStartLocked(part *partition) bool {
	return !e.doomed && !part.revoking
}

// priorFailure returns and forgets j's failure from an aborted round.
func (e *exactlyOnce) priorFailure(j *job) (outFailure, bool) {
	p := e.p
	p.mu.Lock()
	defer p.mu.Unlock()
	m := e.outFailed[j.p.tp]
	f, ok := m[j.rec.Offset]
	if ok {
		delete(m, j.rec.Offset)
		if len(m) == 0 {
			delete(e.outFailed, j.p.tp)
		}
	}
	return f, ok
}

// produce keeps a record's outputs for its round's transaction. A record
// whose round is over, or whose partition was dropped, is abandoned.
func (e *exactlyOnce) produce(j *job, outs []*kgo.Record) {
	p := e.p
	p.mu.Lock()
	r := roundOf(j)
	live := p.parts[j.p.tp] == j.p && j.p.ctx.Err() == nil && r.round == e.roundID
	if live {
		r.outs, r.ready = outs, true
		e.countOutLocked(j, false)
	}
	p.releaseLocked(j)
	p.mu.Unlock()
	wake(p.wakeDispatch)
	if !live {
		p.finish(j, Abandoned)
	}
}

// releasedLocked wakes what waits for handlers to return: a revoke (the
// partition's) and an abort (all).
func (e *exactlyOnce) releasedLocked(j *job) {
	if st := eosState(j.p); j.p.count.handling == 0 && st.stopped != nil {
		close(st.stopped)
		st.stopped = nil
	}
	if e.p.count.handling == 0 {
		wake(e.roundWake)
	}
}

func (e *exactlyOnce) settleLocked(j *job, outcome Outcome) {
	e.countOutLocked(j, outcome == Abandoned)
}

func (e *exactlyOnce) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	e.revoke(ctx, cl, revoked, false)
}

func (e *exactlyOnce) lost(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	e.revoke(ctx, cl, lost, true)
}

// revoke dooms the round (the session aborts its transaction anyway) and
// waits for the revoked partitions' handlers, so that their next owner
// does not run a record this member is still running, then drops them.
// On a revocation the handlers finish their calls (nothing new starts)
// for half of DrainTimeout before they are cut, and the partitions none of
// whose calls was cut off are released (releaseRevoked): their next owner
// need not wait. On a loss another member may own them already: every
// handler is cut at once, and nothing is committed.
func (e *exactlyOnce) revoke(ctx context.Context, cl *kgo.Client, revoked map[string][]int32, lost bool) {
	p := e.p
	if len(revoked) == 0 {
		return
	}
	start := time.Now()
	p.mu.Lock()
	e.doomed = true
	e.drainFirst = e.drainFirst || !lost
	parts := p.partitionsLocked(revoked)
	var stopped []chan struct{}
	for _, part := range parts {
		part.revoking = true
		if part.count.handling > 0 {
			st := eosState(part)
			st.stopped = make(chan struct{})
			stopped = append(stopped, st.stopped)
		}
	}
	if lost {
		for _, part := range p.parts {
			e.cutLocked(part)
		}
	}
	p.mu.Unlock()
	wake(e.roundWake)
	for topic, ns := range revoked {
		p.obs.Assigned(topic, ns, false, lost)
	}

	wait := p.o.DrainTimeout
	if !lost {
		wait /= 2
		if waitClosed(stopped, wait) {
			p.mu.Lock()
			for _, part := range parts {
				e.cutLocked(part)
			}
			p.mu.Unlock()
		}
	}
	timedOut := waitClosed(stopped, wait)
	// Before the release: the next owner may run the records as soon as
	// the callback returns, which must be within the rebalance timeout
	// (DrainTimeout plus a margin) of its start.
	e.salvage(parts, start.Add(p.o.DrainTimeout))
	if !lost && !timedOut {
		e.releaseRevoked(ctx, cl, parts)
	}

	p.mu.Lock()
	resume := e.dropLocked(parts)
	p.mu.Unlock()
	if resume != nil {
		cl.ResumeFetchPartitions(resume)
	}
	for topic, ns := range revoked {
		p.obs.Released(topic, ns)
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

// dropLocked forgets what the mode knew of parts, then the core drops them.
func (e *exactlyOnce) dropLocked(parts []*partition) map[string][]int32 {
	for _, part := range parts {
		if e.p.parts[part.tp] == part {
			delete(e.outFailed, part.tp)
			delete(e.txnDone, part.tp)
			delete(e.inheriting, part.tp)
			delete(e.claimedAt, part.tp)
			e.forgetTurnsLocked(part)
			if _, ok := e.claimAt[part.tp]; ok {
				// Paused until claimed: a pause outlives the assignment.
				delete(e.claimAt, part.tp)
				part.paused = true
			}
		}
	}
	return e.p.dropLocked(parts)
}

// salvage gives Options.Salvage, until deadline, the outputs of the
// round's records whose handlers returned, in parts (nil: every
// partition), once each: the round aborts, so its transaction will not
// carry them, yet their effects happened. Without it a record whose
// outputs include a ledger entry settling its partner call runs again
// with only its intent in the ledger, and waits for that call to settle
// (at a partition's next owner about 17 s with the defaults) before it
// looks it up.
func (e *exactlyOnce) salvage(parts []*partition, deadline time.Time) {
	p := e.p
	if p.o.Salvage == nil {
		return
	}
	var outs []*kgo.Record
	records := 0
	p.mu.Lock()
	for _, j := range e.round {
		r := roundOf(j)
		if !r.ready || r.salvaged || (parts != nil && !slices.Contains(parts, j.p)) {
			continue
		}
		r.salvaged = true
		records++
		for _, o := range r.outs {
			// A copy: commitRound may have given the original to the
			// session's client already.
			outs = append(outs, &kgo.Record{Topic: o.Topic, Partition: o.Partition, Key: o.Key, Value: o.Value,
				Headers: slices.Clone(o.Headers), Timestamp: o.Timestamp})
		}
	}
	p.mu.Unlock()
	if len(outs) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(p.workCtx, deadline)
	defer cancel()
	if err := p.o.Salvage(ctx, outs); err != nil {
		p.log.Warn("outputs of an aborted round not salvaged; its records, run again, may wait for their partner calls to settle",
			zap.Int("records", records), zap.Error(err))
	}
}
