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
	o    Options
	log  *zap.Logger
	obs  Observer
	mode strategy // where the delivery modes differ (strategy.go)

	ran atomic.Bool
	cl  *kgo.Client

	workers *errgroup.Group // the record workers (work.go); only the dispatcher adds
	jobs    chan *job       // dispatcher → an idle record worker; unbuffered: a job sent is a job taken
	idle    atomic.Int32    // record workers waiting on jobs (at most about MaxInFlight)
	redo    chan *job       // promise → fallback workers: records whose outputs failed

	wakeDispatch chan struct{} // capacity 1: something may be dispatchable
	wakePoll     chan struct{} // capacity 1: room in the buffer, or a resume

	workCtx context.Context // handlers and produces; outlives Run's ctx until drained

	mu         sync.Mutex
	parts      map[tp]*partition
	assigned   uint64   // assignments made so far (partition.assignment)
	count      counters // every record's; includes records of dropped partitions
	buffered   int      // sum of the live partitions' tracker lengths
	bytes      int      // sum of the live partitions' tracker bytes (recordSize)
	pollCancel context.CancelFunc
	closing    bool
	drained    chan struct{} // closed when inFlight reaches 0 while closing
	isDrained  bool
	failure    error
	stop       context.CancelCauseFunc

	// The lease (package lease): partner writes start only while the group
	// cannot remove the member before they end. session and rebalance
	// (the group session and rebalance timeouts) are set before the first
	// dispatch.
	lease       *lease.Lease
	leaseLapsed atomic.Bool // a write found the lease short and has not seen it renewed
	session     time.Duration
	rebalance   time.Duration
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
	paused    bool
	revoking  bool
	idle      chan struct{} // while revoking: closed when inFlight reaches 0
	abandoned int           // records given up while in flight (drain timeout, loss)
	maxSent   int64         // highest offset dispatched, -1 before the first
	// guardAfter: no record of the partition is dispatched before then
	// (guardUntilLocked): a previous owner's or a cut handler's partner
	// calls may still land (TakeoverWait).
	guardAfter time.Time
	state      any // the delivery mode's own (strategy.openLocked)
	// assignment numbers this assignment of the partition in this
	// process (Meta.Assignment).
	assignment uint64
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
	state    any // the delivery mode's own, guarded by Pipeline.mu
}

// New validates opts (every problem at once) and returns a Pipeline. It
// does not connect; Run does.
func New(opts Options) (*Pipeline, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Pipeline{
		o:   o,
		log: o.Logger.Named("pipeline"),
		obs: o.Observer,
		// One entry per record whose outputs failed; those are live
		// partitions' records, all within MaxBuffered.
		jobs:         make(chan *job),
		redo:         make(chan *job, o.MaxBuffered),
		wakeDispatch: make(chan struct{}, 1),
		wakePoll:     make(chan struct{}, 1),
		parts:        make(map[tp]*partition),
		drained:      make(chan struct{}),
		lease:        lease.New(),
	}
	p.mode = o.Delivery.strategy(p)
	return p, nil
}

func (p *Pipeline) clientOpts() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(p.o.Brokers...),
		kgo.ConsumerGroup(p.o.Group),
		kgo.ConsumeTopics(p.o.Topics...),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(p.onAssigned),
		kgo.OnPartitionsRevoked(p.mode.revoked),
		kgo.OnPartitionsLost(p.onLost),
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
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(p.o.Linger),
		// A member draining revoked partitions rejoins after the drain
		// and its commit; the group must wait that long, and no longer:
		// leaving the group on shutdown can wait out a JoinGroup for the
		// whole rebalance timeout (60s by default). The lease (package lease)
		// lets writes start only until CallTimeout before the rebalance
		// timeout since the group was last seen stable, so it leaves
		// rebalanceMargin past CallTimeout too.
		kgo.RebalanceTimeout(max(p.o.DrainTimeout, p.o.landed()) + rebalanceMargin),
		// After NOT_LEADER_FOR_PARTITION franz-go refreshes metadata before
		// it retries, but no sooner than MetadataMinAge after the last
		// refresh (5s by default): outputs, and the commit points behind
		// them, stalled that long after every leader move.
		kgo.MetadataMinAge(500 * time.Millisecond),
	}
	opts = append(opts, p.mode.clientOpts()...)
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
	return p.mode.run(ctx)
}

// begin makes Run's contexts: runCtx ends with ctx or when a record fails
// (stop); workCtx, for handlers and produces, outlives ctx until
// stopWork, so that what was dispatched can drain.
func (p *Pipeline) begin(ctx context.Context) (runCtx context.Context, stop context.CancelCauseFunc, workCtx context.Context, stopWork context.CancelFunc) {
	runCtx, stop = context.WithCancelCause(ctx)
	workCtx, stopWork = context.WithCancel(context.WithoutCancel(ctx))
	p.mu.Lock()
	p.stop, p.workCtx = stop, workCtx
	p.mu.Unlock()
	return runCtx, stop, workCtx, stopWork
}

// connect adopts cl, refuses a CallTimeout the group's timeouts cannot
// outlast (closing what owns cl with closeFn), and starts the lease's
// prober; stopProbe stops it and waits.
func (p *Pipeline) connect(ctx context.Context, cl *kgo.Client, closeFn func()) (stopProbe func(), err error) {
	p.mu.Lock()
	p.cl = cl
	p.mu.Unlock()
	if err := p.checkLease(cl); err != nil {
		closeFn()
		return nil, err
	}
	return p.startProbe(ctx, cl), nil
}

// stopped returns Run's result, once Run is over.
func (p *Pipeline) stopped() error {
	p.mu.Lock()
	failure := p.failure
	p.mu.Unlock()
	p.log.Info("pipeline stopped", zap.Error(failure))
	return failure
}

// rebalanceMargin is what the rebalance timeout adds to the longer of
// DrainTimeout and CallTimeout plus ApplyWindow.
const rebalanceMargin = 10 * time.Second

// checkLease refuses a CallTimeout the group session or rebalance timeout
// cannot outlast: no partner write could ever start (Leased would wait
// forever). The rebalance timeout is one the client options set.
func (p *Pipeline) checkLease(cl *kgo.Client) error {
	session, _ := cl.OptValue(kgo.SessionTimeout).(time.Duration)
	if p.o.CallTimeout > 0 && p.o.landed() >= session {
		return fmt.Errorf("pipeline: the partner call timeout %v (--api-timeout) plus the apply window %v (--partner-apply-window) is not shorter than the group session timeout %v: "+
			"a member starts a write only while its session outlasts the call and its applying", p.o.CallTimeout, p.o.ApplyWindow, session)
	}
	rebalance, _ := cl.OptValue(kgo.RebalanceTimeout).(time.Duration)
	if p.o.CallTimeout > 0 && p.o.landed() >= rebalance {
		return fmt.Errorf("pipeline: the partner call timeout %v (--api-timeout) plus the apply window %v (--partner-apply-window) is not shorter than the group rebalance timeout %v: "+
			"a member starts a write only while a rebalance could not have removed it before the call is applied", p.o.CallTimeout, p.o.ApplyWindow, rebalance)
	}
	return nil
}

// startProbe starts the lease's prober with the client's
// session and rebalance timeouts, and returns the function that stops it
// and waits.
func (p *Pipeline) startProbe(ctx context.Context, cl *kgo.Client) (stop func()) {
	p.session, _ = cl.OptValue(kgo.SessionTimeout).(time.Duration)
	p.rebalance, _ = cl.OptValue(kgo.RebalanceTimeout).(time.Duration)
	p.lease.SetTimeouts(p.session, p.rebalance, p.o.landed())
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
