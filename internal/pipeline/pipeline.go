package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/loyalty-bridge/loyalty-bridge/internal/lease"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
)

// Pipeline is a configured engine; Run runs it once.
type Pipeline struct {
	o   Options
	log *zap.Logger
	obs Observer

	ran atomic.Bool
	cl  *kgo.Client

	workers *errgroup.Group // a goroutine per dispatched record; only the dispatcher adds
	redo    chan *job       // promise → fallback workers: records whose outputs failed

	wakeDispatch chan struct{} // capacity 1: something may be dispatchable
	wakePoll     chan struct{} // capacity 1: room in the buffer, or a resume

	workCtx context.Context // handlers and produces; outlives Run's ctx until drained

	mu         sync.Mutex
	parts      map[tp]*partition
	count      counters // every record's; includes records of dropped partitions
	buffered   int      // sum of the live partitions' tracker lengths
	bytes      int      // sum of the live partitions' tracker bytes (recordSize)
	pollCancel context.CancelFunc
	closing    bool
	drained    chan struct{} // closed when inFlight reaches 0 while closing
	isDrained  bool
	failure    error
	stop       context.CancelCauseFunc

	// At-least-once mode: offset commits with the dispatch horizon
	// (horizon.go).
	wakeCommit chan struct{} // capacity 1: a horizon must move
	commitMu   sync.Mutex    // one commit at a time, so none lands after a later one

	// The lease (package lease): partner writes start only while the group
	// cannot remove the member before they end. session and rebalance
	// (the group session and rebalance timeouts) are set before the first
	// dispatch.
	lease       *lease.Lease
	leaseLapsed atomic.Bool // a write found the lease short and has not seen it renewed
	session     time.Duration
	rebalance   time.Duration

	// Exactly-once mode (transact.go); all guarded by mu but sess.
	eos       bool
	sess      *kgo.GroupTransactSession
	round     []*job // the current round's jobs, in poll order
	roundID   uint64 // bumped whenever a round ends
	roundLeft int    // jobs of the round not yet settled
	doomed    bool   // the round must abort: a rebalance, an abandoned record
	roundWake chan struct{}
	outFailed map[tp]map[int64]outFailure // outputs that failed in an aborted round
	// txnDone is, per partition owned since, the offset below which this
	// member's own committed transactions cover every record.
	txnDone map[tp]int64
}

type tp struct {
	topic     string
	partition int32
}

func (k tp) String() string { return k.topic + "/" + strconv.Itoa(int(k.partition)) }

// partition is the state of one assigned partition, guarded by Pipeline.mu.
type partition struct {
	tp
	ctx       context.Context // canceled when the partition is dropped
	cancel    context.CancelFunc
	sched     *ordering.Scheduler[*job]
	track     ordering.Tracker
	last      int64 // highest offset taken, -1 before the first
	count     counters
	fresh     int // records still to be marked Fresh (exactly once; a legacy commit)
	paused    bool
	revoking  bool
	idle      chan struct{} // while revoking: closed when inFlight reaches 0
	abandoned int           // records given up while in flight (drain timeout, loss)
	taken     int           // exactly once: records taken in the current round
	stopped   chan struct{} // exactly once, while revoking: closed when handling reaches 0
	cutAt     time.Time     // exactly once: when handlers of the partition were last canceled while running

	// At-least-once mode: the dispatch horizon (horizon.go).
	known       bool   // the assignment's committed offset was read
	committed   int64  // the offset to commit while nothing is done; -1 before it is known
	guardBelow  int64  // records below it are Fresh: the previous owner's horizon
	horizon     int64  // durable: records below it may be dispatched
	want        int64  // the horizon asked of the committer
	held        []*job // taken at or past the horizon, in offset order
	maxSent     int64  // highest offset dispatched, -1 before the first
	sentAt      int64  // last offset committed, -1 before
	sentHorizon int64  // last horizon committed, -1 before
	// sentReleased: the last commit marked the partition released.
	sentReleased bool
	// guardAfter: the records below guardBelow wait until then, taken over
	// from an owner that did not release the partition (TakeoverWait).
	guardAfter time.Time
}

// job is one record from dispatch to done.
type job struct {
	p        *partition
	task     ordering.Task[*job]
	rec      *kgo.Record
	fresh    bool
	started  time.Time
	fellBack bool         // outputs came from Fallback
	released bool         // lane released; guarded by Pipeline.mu
	pending  atomic.Int32 // outputs not yet acknowledged
	errMu    sync.Mutex
	err      error // first produce error
	promise  func(*kgo.Record, error)

	// Exactly-once mode, guarded by Pipeline.mu.
	round   uint64        // the round the job was taken in
	settled bool          // counted out of roundLeft
	outs    []*kgo.Record // ready: outputs awaiting the round's transaction
	ready   bool
}

// New validates opts (every problem at once) and returns a Pipeline. It
// does not connect; Run does.
func New(opts Options) (*Pipeline, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Pipeline{
		o:   o,
		log: o.Logger.Named("pipeline"),
		obs: o.Observer,
		// One entry per record whose outputs failed; those are live
		// partitions' records, all within MaxBuffered.
		redo:         make(chan *job, o.MaxBuffered),
		wakeDispatch: make(chan struct{}, 1),
		wakePoll:     make(chan struct{}, 1),
		parts:        make(map[tp]*partition),
		drained:      make(chan struct{}),
		wakeCommit:   make(chan struct{}, 1),
		lease:        lease.New(),
		eos:          o.Delivery == ExactlyOnce,
		roundWake:    make(chan struct{}, 1),
		outFailed:    make(map[tp]map[int64]outFailure),
		txnDone:      make(map[tp]int64),
	}, nil
}

func (p *Pipeline) clientOpts() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(p.o.Brokers...),
		kgo.ConsumerGroup(p.o.Group),
		kgo.ConsumeTopics(p.o.Topics...),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(p.onAssigned),
		kgo.WithHooks(p.lease.Hook()), // the lease's SyncGroup times
		// Fetched records are most of the bridge's live heap (a heap
		// profile with a 100k backlog: 82%, record slices and decompressed
		// batches). 1 MiB per response and 256 KiB per partition still
		// carry thousands of records each; measured with loyalty-bench
		// (100k backlog, 20 ms API): peak RSS 110 MiB at 16 MiB, 82 MiB at
		// 2 MiB, 66 MiB at 1 MiB, throughput within the noise.
		kgo.FetchMaxBytes(1 << 20),
		kgo.FetchMaxPartitionBytes(256 << 10),
		// A resumed partition waits for the fetch already in flight for the
		// others; when those are idle that fetch lasts FetchMaxWait (5s by
		// default), so keep it short.
		kgo.FetchMaxWait(250 * time.Millisecond),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(p.o.Linger),
		// A member draining revoked partitions rejoins after the drain
		// and its commit; the group must wait that long, and no longer:
		// leaving the group on shutdown can wait out a JoinGroup for the
		// whole rebalance timeout (60s by default). The lease (package lease)
		// lets writes start only until CallTimeout before the rebalance
		// timeout since the group was last seen stable, so it leaves
		// rebalanceMargin past CallTimeout too.
		kgo.RebalanceTimeout(max(p.o.DrainTimeout, p.o.CallTimeout) + rebalanceMargin),
		// After NOT_LEADER_FOR_PARTITION franz-go refreshes metadata before
		// it retries, but no sooner than MetadataMinAge after the last
		// refresh (5s by default): outputs, and the commit points behind
		// them, stalled that long after every leader move.
		kgo.MetadataMinAge(500 * time.Millisecond),
	}
	if p.eos {
		opts = append(opts, p.transactOpts()...)
	} else {
		// The pipeline commits itself (commitLoop): every commit carries
		// the dispatch horizon in its metadata, which autocommit cannot.
		opts = append(opts,
			kgo.DisableAutoCommit(),
			kgo.OnOffsetsFetched(p.onFetched),
			kgo.OnPartitionsRevoked(p.onRevoked),
			kgo.OnPartitionsLost(p.onLost))
	}
	return append(opts, p.o.ClientOpts...)
}

// Run consumes until ctx is canceled or a record fails beyond its Fallback,
// then drains, commits, leaves the group and closes the client. It returns
// nil after a cancellation, the *RecordError that stopped it, or an error
// creating the client. Run may be called once.
func (p *Pipeline) Run(ctx context.Context) error {
	if p.ran.Swap(true) {
		return errors.New("pipeline: Run called twice")
	}
	if p.eos {
		return p.runTransactional(ctx)
	}
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	p.mu.Lock()
	p.stop, p.workCtx = stop, workCtx
	p.mu.Unlock()
	cl, err := kgo.NewClient(p.clientOpts()...)
	if err != nil {
		return fmt.Errorf("pipeline: kafka client: %w", err)
	}
	p.mu.Lock()
	p.cl = cl
	p.mu.Unlock()
	if err := p.checkLease(cl); err != nil {
		cl.Close()
		return err
	}
	defer p.startProbe(workCtx, cl)()

	p.log.Info("pipeline starting", zap.String("group", p.o.Group), zap.Strings("topics", p.o.Topics),
		zap.Stringer("mode", p.o.Mode), zap.Int("max_in_flight", p.o.MaxInFlight),
		zap.Int("max_in_flight_per_partition", p.o.MaxInFlightPerPartition), zap.Int("max_buffered", p.o.MaxBuffered))

	var front, workers, committer errgroup.Group
	p.workers = &workers
	front.Go(func() error { p.pollLoop(runCtx); return nil })
	front.Go(func() error { p.dispatch(runCtx); return nil })
	commitCtx, stopCommits := context.WithCancel(workCtx)
	committer.Go(func() error { p.commitLoop(commitCtx, cl); return nil })
	p.startFallbackWorkers(&workers)

	<-runCtx.Done()
	deadline := time.Now().Add(p.o.ShutdownTimeout)
	_ = front.Wait()

	// Drain: every dispatched record finishes, and so does every record
	// below the highest dispatched (holeLocked), or the deadline passes.
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
	stopWork()
	p.waitWorkers(&workers, deadline)
	stopCommits()
	_ = committer.Wait()

	// Commit what is contiguous, flush what was produced, leave.
	p.mu.Lock()
	parts := make([]*partition, 0, len(p.parts))
	for _, part := range p.parts {
		parts = append(parts, part)
		p.reportLeftLocked(part)
	}
	p.mu.Unlock()
	finalCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), within(deadline, p.o.DrainTimeout))
	if err := p.commit(finalCtx, cl, parts); err != nil {
		// Leaving the group waits for a rebalance in progress and then
		// revokes every partition; onRevoked commits the marks again.
		p.log.Warn("final commit failed; retried as the member leaves the group", zap.Error(err))
	}
	cancel()
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), within(deadline, p.o.DrainTimeout))
	if err := cl.Flush(flushCtx); err != nil {
		p.log.Warn("flush before close failed", zap.Error(err))
	}
	cancel()
	p.closeClient(deadline, cl.Close) // leaves the group; onRevoked runs with closing set
	p.mu.Lock()
	failure := p.failure
	p.mu.Unlock()
	p.log.Info("pipeline stopped", zap.Error(failure))
	return failure
}

// rebalanceMargin is what the rebalance timeout adds to the longer of
// DrainTimeout and CallTimeout.
const rebalanceMargin = 10 * time.Second

// checkLease refuses a CallTimeout the group session or rebalance timeout
// cannot outlast: no partner write could ever start (Leased would wait
// forever). The rebalance timeout is one the client options set.
func (p *Pipeline) checkLease(cl *kgo.Client) error {
	session, _ := cl.OptValue(kgo.SessionTimeout).(time.Duration)
	if p.o.CallTimeout > 0 && p.o.CallTimeout >= session {
		return fmt.Errorf("pipeline: the partner call timeout %v (--api-timeout) is not shorter than the group session timeout %v: "+
			"a member starts a write only while its session outlasts the call", p.o.CallTimeout, session)
	}
	rebalance, _ := cl.OptValue(kgo.RebalanceTimeout).(time.Duration)
	if p.o.CallTimeout > 0 && p.o.CallTimeout >= rebalance {
		return fmt.Errorf("pipeline: the partner call timeout %v (--api-timeout) is not shorter than the group rebalance timeout %v: "+
			"a member starts a write only while a rebalance could not have removed it before the call ends", p.o.CallTimeout, rebalance)
	}
	return nil
}

// startProbe starts the lease's prober with the client's
// session and rebalance timeouts, and returns the function that stops it
// and waits.
func (p *Pipeline) startProbe(ctx context.Context, cl *kgo.Client) (stop func()) {
	p.session, _ = cl.OptValue(kgo.SessionTimeout).(time.Duration)
	p.rebalance, _ = cl.OptValue(kgo.RebalanceTimeout).(time.Duration)
	p.lease.SetTimeouts(p.session, p.rebalance, p.o.CallTimeout)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { p.lease.Probe(ctx, cl, p.o.Group, p.log) })
	return func() { cancel(); wg.Wait() }
}

// within returns d, or what is left until deadline if that is shorter.
func within(deadline time.Time, d time.Duration) time.Duration {
	return max(min(d, time.Until(deadline)), 0)
}

// closeClient closes the client (leaving the group) and waits for it until
// deadline. Leaving waits for a rebalance in progress, whose JoinGroup
// franz-go does not cancel: it can last the rebalance timeout plus the
// request overhead when another member is slow to rejoin. The shutdown
// bound is what an orchestrator's grace period relies on, so past it Run
// returns and the close goes on in the background; the group drops this
// member after its session timeout.
func (p *Pipeline) closeClient(deadline time.Time, closeFn func()) {
	done := make(chan struct{})
	go func() {
		closeFn()
		close(done)
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		p.log.Error("leaving the group did not finish within the shutdown timeout; returning without waiting (the group drops this member after its session timeout)",
			zap.Duration("shutdown_timeout", p.o.ShutdownTimeout))
	}
}

// reportLeftLocked logs one line for a partition this member leaves with
// records taken but not committed, and why: they are processed again by the
// partition's next owner.
func (p *Pipeline) reportLeftLocked(part *partition) {
	first, ok := part.track.First()
	if !ok {
		return
	}
	var reason string
	switch {
	case part.count.inFlight > 0 || part.abandoned > 0:
		reason = "records still in flight when the drain timed out were abandoned"
	case p.failure != nil:
		reason = "the pipeline stopped on a failed record"
	default:
		reason = "records taken but not started before the stop (queued behind a key whose record outlasted the drain, held by the gate, or not yet dispatched)"
	}
	p.log.Warn("partition left with uncommitted records; its next owner processes them again",
		zap.String("topic", part.topic), zap.Int32("partition", part.partition), zap.Int64("from_offset", first),
		zap.Int("uncommitted", part.track.Len()), zap.Int("in_flight", part.count.inFlight), zap.String("reason", reason))
}

// waitWorkers waits for the workers after their context was canceled. A
// handler that ignores its context could hold Run forever; after
// DrainTimeout more (at most until deadline) Run goes on closing and leaves
// such a worker behind (its record is not committed).
func (p *Pipeline) waitWorkers(workers *errgroup.Group, deadline time.Time) {
	done := make(chan struct{})
	go func() {
		_ = workers.Wait()
		close(done)
	}()
	// A moment even past the deadline: workers return at once when their
	// handlers heed the cancellation.
	timer := time.NewTimer(max(within(deadline, p.o.DrainTimeout), 100*time.Millisecond))
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		p.log.Error("handlers ignored cancellation; closing without them", zap.Duration("waited", p.o.DrainTimeout))
	}
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

func (p *Pipeline) isClosing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closing
}

func (p *Pipeline) inFlightNow() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count.inFlight
}

func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// pollLoop takes records while the buffer has room. With
// BlockRebalanceOnPoll no rebalance callback runs between a poll and the
// AllowRebalance after its records are queued, so a queued record always
// belongs to a live partition.
func (p *Pipeline) pollLoop(ctx context.Context) {
	var backoff time.Duration // after polls that returned only errors
	for {
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		p.mu.Lock()
		var room int
		var resume map[string][]int32
		for {
			if ctx.Err() != nil {
				p.mu.Unlock()
				return
			}
			resume = p.resumableLocked()
			room = p.o.MaxBuffered - p.buffered
			if p.bytes >= p.o.MaxBufferedBytes {
				room = 0
			}
			if room > 0 || resume != nil {
				break
			}
			p.mu.Unlock()
			select {
			case <-p.wakePoll:
			case <-ctx.Done():
			}
			p.mu.Lock()
		}
		pollCtx, cancel := context.WithCancel(ctx)
		p.pollCancel = cancel
		p.mu.Unlock()

		if resume != nil {
			p.cl.ResumeFetchPartitions(resume)
			p.logPause(resume, false)
		}
		if room <= 0 {
			cancel()
			continue
		}
		fs := p.cl.PollRecords(pollCtx, room)
		cancel()
		backoff = p.pollBackoff(fs, backoff)
		pause := p.enqueue(fs)
		if pause != nil {
			p.cl.PauseFetchPartitions(pause)
			p.logPause(pause, true)
		}
		p.cl.AllowRebalance()
		wake(p.wakeDispatch)
	}
}

// pollBackoff logs a poll's fetch errors and returns how long to wait before
// the next poll. franz-go retries what is retriable; what it returns may come
// back at once on every poll, so back off instead of spinning and logging.
func (p *Pipeline) pollBackoff(fs kgo.Fetches, backoff time.Duration) time.Duration {
	failed := false
	fs.EachError(func(topic string, partition int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		failed = true
		p.log.Warn("fetch error", zap.String("topic", topic), zap.Int32("partition", partition), zap.Error(err))
	})
	switch {
	case !failed || fs.NumRecords() > 0:
		return 0
	case backoff == 0:
		return 100 * time.Millisecond
	default:
		return min(2*backoff, 5*time.Second)
	}
}

// resumableLocked returns the paused partitions whose buffer drained to half,
// marking them resumed.
func (p *Pipeline) resumableLocked() map[string][]int32 {
	var resume map[string][]int32
	for _, part := range p.parts {
		if part.paused && p.drainedLocked(part) {
			part.paused = false
			if resume == nil {
				resume = make(map[string][]int32)
			}
			resume[part.topic] = append(resume[part.topic], part.partition)
		}
	}
	return resume
}

// enqueue hands polled records to their partitions and returns the
// partitions to pause.
func (p *Pipeline) enqueue(fs kgo.Fetches) map[string][]int32 {
	var pause map[string][]int32
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pollCancel = nil
	n := 0
	fs.EachRecord(func(r *kgo.Record) {
		key := tp{r.Topic, r.Partition}
		part := p.parts[key]
		if part == nil { // not announced by onAssigned; adopt it
			part = p.newPartitionLocked(key)
		}
		if r.Offset <= part.last {
			p.log.Warn("record offset went backwards; skipped", zap.String("topic", r.Topic),
				zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset), zap.Int64("last", part.last))
			return
		}
		if done := p.txnDone[key]; p.eos && r.Offset < done {
			// After an aborted round the session rewinds to the offsets
			// the client believes committed; the chaos suite caught it
			// rewinding a partition to 0 below offsets this member's own
			// transactions had committed, and the records ran twice.
			if part.last < 0 {
				p.log.Warn("rewound below what this member's transactions committed; those records are skipped",
					zap.String("topic", r.Topic), zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset),
					zap.Int64("committed", done))
			}
			part.last = r.Offset
			return
		}
		part.last = r.Offset
		j := &job{p: part, rec: r}
		j.promise = j.onAck(p)
		size := recordSize(r)
		part.track.AddSized(r.Offset, r.LeaderEpoch, size)
		p.buffered++
		p.bytes += size
		n++
		if !p.eos {
			p.admitLocked(part, j)
		} else {
			if part.fresh > 0 {
				j.fresh = true
				part.fresh--
			}
			part.sched.Push(r.Offset, r.Key, j)
		}
		if p.eos { // a round is one poll: nothing to pause
			j.round = p.roundID
			p.round = append(p.round, j)
			p.roundLeft++
			part.taken++
			return
		}
		if !part.paused && (part.track.Len() >= p.o.MaxBufferedPerPartition || part.track.Bytes() >= p.o.MaxBufferedBytes/2) {
			part.paused = true
			if pause == nil {
				pause = make(map[string][]int32)
			}
			pause[part.topic] = append(pause[part.topic], part.partition)
		}
	})
	if n > 0 {
		p.obs.InFlight(p.count.inFlight, p.buffered)
	}
	return pause
}

// drainedLocked reports whether a paused partition's buffer drained
// enough to fetch it again: to half its record bound and a quarter of the
// byte bound (a partition may take half).
func (p *Pipeline) drainedLocked(part *partition) bool {
	return part.track.Len() <= p.o.MaxBufferedPerPartition/2 && part.track.Bytes() <= p.o.MaxBufferedBytes/4
}

// recordSize is what a buffered record is counted as against
// MaxBufferedBytes: its key, value and headers, and a fixed allowance for
// the record, job and bookkeeping structures around them.
func recordSize(r *kgo.Record) int {
	n := recordOverhead + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// recordOverhead approximates a buffered record's memory besides its bytes:
// the kgo.Record, the job, scheduler and tracker entries.
const recordOverhead = 512

// logPause logs at debug level: under a backlog, pausing and resuming is
// routine flow control that happens many times a second.
func (p *Pipeline) logPause(tps map[string][]int32, paused bool) {
	msg := "partitions resumed"
	if paused {
		msg = "partitions paused: buffer full"
	}
	for topic, parts := range tps {
		p.log.Debug(msg, zap.String("topic", topic), zap.Int32s("partitions", parts))
		for _, part := range parts {
			p.obs.Paused(topic, part, paused)
		}
	}
}

func (p *Pipeline) newPartitionLocked(key tp) *partition {
	ctx, cancel := context.WithCancel(p.workCtx)
	part := &partition{
		tp:          key,
		ctx:         ctx,
		cancel:      cancel,
		sched:       ordering.NewScheduler[*job](p.o.Mode),
		last:        -1,
		committed:   -1,
		maxSent:     -1,
		sentAt:      -1,
		sentHorizon: -1,
	}
	if p.eos {
		// A previous owner can have done at most one uncommitted round.
		part.fresh = p.o.MaxBuffered
	}
	p.parts[key] = part
	return part
}

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
		// A goroutine per record rather than a pool: a handler waiting
		// out a retry (Wait) gives its slot back but keeps its goroutine.
		p.workers.Go(func() error { p.process(j); return nil })
	}
}

// nextLocked picks the next record to run, or nil.
func (p *Pipeline) nextLocked() *job {
	if p.count.active >= p.o.MaxInFlight || p.failure != nil || p.doomed {
		return nil
	}
	for _, part := range p.parts { // map order: no partition is always first
		if part.count.active >= p.o.MaxInFlightPerPartition {
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
// rounds back instead.
func (p *Pipeline) holeLocked(part *partition) bool {
	if p.eos || p.failure != nil {
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
	if p.eos {
		if f, ok := p.takeOutFailure(j); ok {
			if f.fellBack {
				p.fail(j, f.err)
			} else {
				p.fallBack(j, f.err)
			}
			return
		}
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
	p.produce(j, outs)
}

// handle runs the handler, turning a panic into an error: a bug in one
// record's handling must become that record's error output, not a crash loop.
func (p *Pipeline) handle(j *job) (outs []*kgo.Record, err error) {
	defer func() {
		if r := recover(); r != nil {
			outs, err = nil, fmt.Errorf("handler panic: %v", r)
		}
	}()
	return p.o.Handler(handlerContext(p, j), j.rec, Meta{Fresh: j.fresh})
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
	p.produce(j, outs)
}

func (p *Pipeline) produce(j *job, outs []*kgo.Record) {
	if p.eos {
		p.hold(j, outs)
		return
	}
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
	if p.eos {
		if j.p.count.handling == 0 && j.p.stopped != nil {
			close(j.p.stopped)
			j.p.stopped = nil
		}
		if p.count.handling == 0 {
			wake(p.roundWake)
		}
	}
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
	if p.eos {
		p.settleLocked(j, outcome == Abandoned)
	}
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

func (p *Pipeline) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	// franz-go calls this after every SyncGroup answered (with nothing
	// new assigned too), before the generation can change again: the
	// group's rebalance to this generation is over (package lease).
	p.lease.Assigned(cl.GroupMetadata())
	p.mu.Lock()
	for topic, parts := range assigned {
		for _, n := range parts {
			if p.parts[tp{topic, n}] == nil {
				part := p.newPartitionLocked(tp{topic, n})
				if p.eos {
					p.takeOverLocked(part) // transact.go
				}
			}
		}
	}
	p.mu.Unlock()
	p.lease.Want() // a lease from this generation before the first write
	for topic, parts := range assigned {
		if p.eos && p.o.TakeoverWait > 0 {
			p.log.Info("partitions assigned; their records wait for a previous owner's last partner calls to land before they run",
				zap.String("topic", topic), zap.Int32s("partitions", parts), zap.Duration("takeover_wait", p.o.TakeoverWait))
		} else {
			p.log.Info("partitions assigned", zap.String("topic", topic), zap.Int32s("partitions", parts))
		}
		p.obs.Assigned(topic, parts, true, false)
	}
}

// onRevoked stops dispatching the revoked partitions, waits for their
// in-flight records (at most DrainTimeout), marks and commits, and only then
// lets franz-go hand the partitions to another member.
func (p *Pipeline) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	if len(revoked) == 0 {
		return
	}
	start := time.Now()
	p.mu.Lock()
	var parts []*partition
	var idle []chan struct{}
	for topic, ns := range revoked {
		for _, n := range ns {
			part := p.parts[tp{topic, n}]
			if part == nil {
				continue
			}
			part.revoking = true
			parts = append(parts, part)
			if (part.count.inFlight > 0 || p.holeLocked(part)) && !p.closing {
				part.idle = make(chan struct{})
				idle = append(idle, part.idle)
			}
		}
	}
	p.mu.Unlock()
	for topic, ns := range revoked {
		p.obs.Assigned(topic, ns, false, false)
	}

	timer := time.NewTimer(p.o.DrainTimeout)
	timedOut := false
wait:
	for _, c := range idle {
		select {
		case <-c:
		case <-timer.C:
			timedOut = true
			break wait
		}
	}
	timer.Stop()

	p.mu.Lock()
	for _, part := range parts {
		p.commitPointLocked(part)
	}
	resume := p.dropLocked(parts)
	p.mu.Unlock()
	if resume != nil {
		cl.ResumeFetchPartitions(resume) // a pause must not outlive the assignment
	}

	commitCtx, cancel := context.WithTimeout(ctx, p.o.DrainTimeout)
	err := p.commit(commitCtx, cl, parts)
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

// onLost drops the partitions without committing: another member may own
// them already.
func (p *Pipeline) onLost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	p.lease.Revoked() // expelled: no proof of membership until a new heartbeat
	if len(lost) == 0 {
		return
	}
	p.mu.Lock()
	var parts []*partition
	for topic, ns := range lost {
		for _, n := range ns {
			if part := p.parts[tp{topic, n}]; part != nil {
				parts = append(parts, part)
			}
		}
	}
	resume := p.dropLocked(parts)
	p.mu.Unlock()
	if resume != nil {
		cl.ResumeFetchPartitions(resume)
	}
	for topic, ns := range lost {
		p.log.Warn("partitions lost; uncommitted records will be processed again by their next owner",
			zap.String("topic", topic), zap.Int32s("partitions", ns))
		p.obs.Assigned(topic, ns, false, true)
	}
	wake(p.wakePoll)
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
		delete(p.outFailed, part.tp)
		delete(p.txnDone, part.tp)
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
