package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
)

// Handler processes one input record and returns the records to produce for
// it (each with its Topic set). Returning no records is allowed: the input is
// then done at once. The pipeline owns the returned records.
//
// ctx is canceled when the record's partition is lost, or when a revoke or
// shutdown drain has timed out (in ExactlyOnce mode: when its round is
// aborted); an error returned after that is not a failure, the record is
// just abandoned (not committed). Any other error, or
// a panic, is a bug path and goes to Fallback. A handler must return soon
// after ctx is canceled: shutdown waits for it at most DrainTimeout more.
//
// Handlers run concurrently (up to MaxInFlight), but never concurrently with
// another record of the same key in Key mode, or of the same partition in
// Partition mode. The record must not be modified or retained.
type Handler func(ctx context.Context, rec *kgo.Record, meta Meta) ([]*kgo.Record, error)

// Meta is what the pipeline knows about a record beyond its contents.
type Meta struct {
	// Fresh is true for a record that a previous owner of its partition
	// may have handled without committing, so an effect it causes may
	// already have happened: in AtLeastOnce mode the records between the
	// committed offset and the dispatch horizon the previous owner left
	// (see the package doc); in ExactlyOnce mode the first MaxBuffered
	// records after an assignment (a previous owner's uncommitted round
	// is at most that) and every record taken
	// again after its round was aborted.
	Fresh bool
	// Assignment numbers the assignment of the record's partition that
	// the record was taken under: it differs between two assignments of a
	// partition to this process (revoked and assigned again), so state
	// kept per partition (the transaction ledger's) knows when others may
	// have written in between. Zero outside a pipeline (a replay).
	Assignment uint64
}

// Fallback turns a record whose Handler failed, or whose outputs could not
// be produced (cause matches ErrProduce), into outputs such as an error
// event. It is called at most once per record. If it returns an error, or
// its outputs cannot be produced either, the pipeline stops.
type Fallback func(rec *kgo.Record, cause error) ([]*kgo.Record, error)

// Gate is consulted before every dispatch; Ready blocks while records must
// be held (for the bridge, while the partner API's circuit is open) and
// returns nil when dispatch may go on, or ctx's error (any other error stops
// Run with that error). While it blocks,
// buffered records wait, polling stops once the buffer is full, and group
// membership continues. *circuit.Breaker implements it.
type Gate interface {
	Ready(ctx context.Context) error
}

// ErrProduce marks a Fallback cause: the handler succeeded but an output
// record failed to be produced after the client's own retries.
var ErrProduce = errors.New("pipeline: output not produced")

// ErrTransactionUnconfirmed marks the error Run stops with when an
// exactly-once round's commit got no definite answer (the connection to
// the transaction coordinator was lost during EndTxn, or its retries ran
// out): the transaction may be committed or not. Carrying on would start
// from the offsets this member last saw committed, and send a committed
// round's outputs a second time; a restarted member reads the committed
// offsets from the broker, once the restart's InitProducerID has settled
// the transaction either way. So the process stops, and its supervisor
// starts it again.
var ErrTransactionUnconfirmed = errors.New("pipeline: the transaction's commit is unconfirmed")

// RecordError is the error Run returns when a record can be neither
// processed nor turned into fallback outputs. Its source coordinates are the
// first offset that was not committed.
type RecordError struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("pipeline: record %s/%d@%d: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// Options configure a Pipeline. The zero value of every optional field means
// its documented default.
type Options struct {
	// Brokers are the seed brokers. Required.
	Brokers []string
	// Group is the consumer group. Required.
	Group string
	// Topics are the input topics. Required.
	Topics []string
	// ClientOpts are appended after the pipeline's own client options, so
	// they can add TLS, SASL, hooks (kprom) or a logger, and override
	// tuning such as heartbeats or fetch sizes. Do not override the group's
	// commit and rebalance behaviour (autocommit, callbacks,
	// BlockRebalanceOnPoll): the pipeline's guarantees rest on them.
	ClientOpts []kgo.Opt

	// Mode is the ordering within a partition; default ordering.Key.
	Mode ordering.Mode
	// Delivery is the output guarantee; default AtLeastOnce.
	Delivery Delivery
	// TransactionalID names this member's transactional producer in
	// ExactlyOnce mode, where it is required (ignored otherwise). Give
	// every live member its own, and keep it across restarts of the same
	// member (a pod name): a member starting with the ID of a dead one
	// fences it and aborts its open transaction at once, where a new ID
	// leaves read_committed readers of the outputs waiting up to
	// TransactionTimeout for it. Two live members with one ID fence each
	// other: the older one's Run stops with an error.
	TransactionalID string
	// TransactionTimeout bounds a transaction in ExactlyOnce mode; default
	// 10s. A transaction spans only the end of a round (its outputs'
	// produce and the commit), not the handler calls, so it can be short;
	// it is also how long a member that dies mid-commit, and is not
	// restarted with its TransactionalID, holds back read_committed readers.
	TransactionTimeout time.Duration
	// MaxInFlight bounds handler calls running at once across all
	// partitions, not counting handlers waiting in Wait; default 256.
	// Records awaiting acknowledgement of their outputs are bounded by
	// MaxBuffered instead.
	MaxInFlight int
	// MaxInFlightPerPartition bounds handler calls of one partition;
	// default MaxInFlight, no bound of its own. A lower bound shares the
	// slots among partitions, but caps a partition that is alone in having
	// records (a catch-up tail, one hot partition) at this many.
	MaxInFlightPerPartition int
	// MaxBuffered bounds records taken from Kafka and not yet below their
	// partition's commit point, across all partitions; it is what the poll
	// loop asks for at most. Default 4 × MaxInFlight; at least MaxInFlight.
	MaxBuffered int
	// RoundRecords bounds, in ExactlyOnce mode, the records one round
	// takes: one poll, answered in one transaction once every record of
	// it is done. Default min(MaxBuffered, DefaultRoundsPerInFlight ×
	// MaxInFlight); at most MaxBuffered. A round of MaxBuffered (65,536
	// records in the bridge's default) answered nothing until all of
	// them were done: at 256 in flight and 20 ms a call, a fresh start's
	// first results came after the first 24,000 records. A smaller round
	// answers sooner, and ends more often with its slots emptying behind
	// its slowest record and a transaction to commit.
	RoundRecords int
	// RoundTime is how long, in ExactlyOnce mode, a round should take:
	// the first takes at most 2 × MaxInFlight records, each after it at
	// most as many as the last committed one was answering in RoundTime
	// (at least min(MaxInFlight, RoundRecords), at most RoundRecords). Results are
	// published when their round commits, and a member that stops or
	// loses partitions waits for its round (DrainTimeout) or aborts it, so
	// a round that a slow partner stretches to many seconds holds every
	// result that long and outlasts a clean stop's drain. Default
	// DefaultRoundTime.
	RoundTime time.Duration
	// MaxBufferedBytes bounds the same records by size (their keys,
	// values and headers, plus a fixed allowance per record for the
	// structures around them); default 64 MiB. A partition is paused at
	// half of it. This, not a record count, is what bounds memory when
	// records wait long (a Retry-After) and the window behind them must be
	// deep; a single poll may overshoot it by one fetch.
	MaxBufferedBytes int
	// MaxBufferedPerPartition pauses fetching a partition once it has this
	// many buffered records (resumed at half), so that a partition whose
	// commit point is stuck behind a slow record cannot fill the whole
	// buffer. Default max(MaxBuffered/2, MaxInFlightPerPartition); at least
	// MaxInFlightPerPartition. A single poll may overshoot it, never
	// MaxBuffered.
	MaxBufferedPerPartition int
	// HorizonStep is how far (in records) the dispatch horizon is moved
	// ahead of the highest offset taken, in AtLeastOnce mode; default
	// MaxBufferedPerPartition/2, at most DefaultMaxHorizonStep. A move costs one offset commit, made
	// when less than half a step is left, so a larger step means fewer
	// commits, and more records guarded (looked up before they are sent)
	// by the next owner after a member dies without a clean stop.
	HorizonStep int

	// CallTimeout is the time limit of one call the Handler makes to the
	// system it changes (for the bridge, one partner API attempt): a call
	// started that long ago has taken effect or never will (the assumption
	// the two bounds below rest on). 0: handlers make no such calls, and
	// neither bound applies.
	CallTimeout time.Duration
	// ApplyWindow is how long after a call was sent the system it changes
	// may still apply it (for the bridge, --partner-apply-window): a call
	// is sent within CallTimeout of its start and applied within
	// ApplyWindow of its sending, so one started at t has taken effect by
	// t + CallTimeout + ApplyWindow or never will. The lease and the
	// takeover wait use that sum; the two bounds add, since the window is
	// counted from the sending, which may come as late as CallTimeout
	// after the start. 0: applied by the time the call returns.
	ApplyWindow time.Duration
	// TakeoverWait is how long the records a previous owner may have sent
	// wait after the assignment when it did not release the partition
	// cleanly (a crash, an expulsion, a drain that timed out), so that its
	// last calls have landed before the guard looks them up; default
	// CallTimeout plus ApplyWindow plus DefaultTakeoverMargin, 0 without a
	// CallTimeout. One below CallTimeout plus ApplyWindow lets a guard
	// look before a previous owner's last call may have landed: the
	// service's configuration refuses it (internal/config); tests of the
	// lease alone set it so on purpose.
	// ExactlyOnce mode keeps no horizon to tell a clean release: its
	// records wait TakeoverWait after every assignment, and after every
	// round aborted while handlers ran (rounds.go).
	TakeoverWait time.Duration

	// Linger is how long the producer waits to batch outputs; default 2ms.
	// Workers never wait for it (acknowledgements arrive by promise); it
	// only keeps a record in flight, holding its slot, a little longer.
	// Negative means no linger.
	Linger time.Duration
	// CommitInterval is how often marked commit points are committed;
	// default 1s, minimum 100ms. Shorter means fewer reprocessed records
	// after a crash. ExactlyOnce mode commits at the end of every round
	// instead.
	CommitInterval time.Duration
	// DrainTimeout bounds the wait for in-flight records on revoke and on
	// shutdown; default 10s. The group's rebalance timeout is set to
	// DrainTimeout (or CallTimeout, if longer) plus 10s, so that a member
	// draining revoked partitions is not expelled from the group, and the
	// lease (package lease) lets writes start for 10s after the group was last
	// seen stable.
	DrainTimeout time.Duration
	// ShutdownTimeout bounds a graceful stop, from the cancellation of
	// Run's context to Run's return: the drain, the final commit, the flush
	// of outputs and leaving the group. Default DrainTimeout plus 20s; it
	// must exceed DrainTimeout. Leaving a group can wait on a rebalance
	// that other members are slow to finish (up to the rebalance timeout);
	// past the bound Run returns anyway and the group notices the member
	// gone after its session timeout. Records not committed by then are
	// processed again by their next owner.
	ShutdownTimeout time.Duration

	// Handler processes records. Required.
	Handler Handler
	// Fallback turns failed records into outputs; nil means a handler
	// error stops the pipeline.
	Fallback Fallback
	// Gate holds dispatch while it blocks; nil means never.
	Gate Gate
	// Observer receives events for metrics; nil means none.
	Observer Observer
	// Salvage, in ExactlyOnce mode, is given the outputs of the records
	// whose handlers returned in a round that aborts: their effects
	// happened, and the transaction that would have carried their
	// outputs does not commit. It may write outside the transaction
	// those that must outlive it (the transaction ledger's settled
	// entries), and returns once they are written: it runs before the
	// records can run again, here or at a partition's next owner (inside
	// a revocation, before the partitions are released, within what is
	// left of DrainTimeout; otherwise within half of it). The records are
	// copies; an error is logged. Nil: nothing is salvaged.
	Salvage func(ctx context.Context, outs []*kgo.Record) error
	// Logger receives one line per state change; per-record lines only at
	// debug level, never with keys or values. Nil means no logging.
	Logger *zap.Logger
}

// Defaults of Options, exported so that the command-line settings show
// the same values the pipeline would choose.
const (
	DefaultMaxInFlight        = 256
	DefaultCommitInterval     = time.Second
	DefaultDrainTimeout       = 10 * time.Second
	DefaultTransactionTimeout = 10 * time.Second
	DefaultLinger             = 2 * time.Millisecond
	DefaultMaxBufferedBytes   = 64 << 20
	// DefaultRoundsPerInFlight × MaxInFlight is RoundRecords' default
	// (docs/performance.md, "Exactly-once rounds", has the sweep).
	DefaultRoundsPerInFlight = 16
	// DefaultRoundTime is RoundTime's default: at the default
	// RoundRecords, 256 in flight and 20 ms a call, a round runs about
	// this long anyway (docs/performance.md, "Exactly-once rounds").
	DefaultRoundTime = time.Second
	// DefaultMaxHorizonStep caps the default HorizonStep: a deep buffer
	// must not make a crash's successor guard that many records more.
	DefaultMaxHorizonStep = 1024
	// DefaultTakeoverMargin is what TakeoverWait adds to CallTimeout by
	// default: the time between a previous owner's last check that it
	// may call and its request leaving (scheduling, a GC pause), and
	// between the group's assignment here and the previous owner's
	// session ending, which the two members measure on their own clocks.
	DefaultTakeoverMargin = time.Second
	// DefaultShutdownMargin is what ShutdownTimeout adds to DrainTimeout by
	// default: time for the final produce, commit and leaving the group.
	DefaultShutdownMargin = 20 * time.Second
)

// withDefaults validates o and returns it with defaults filled in, reporting
// every problem at once.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("pipeline: "+format, args...)) }
	if len(o.Brokers) == 0 {
		bad("no brokers")
	}
	if o.Group == "" {
		bad("no consumer group")
	}
	if len(o.Topics) == 0 {
		bad("no topics")
	}
	for _, t := range o.Topics {
		if t == "" {
			bad("empty topic name")
		}
	}
	if o.Handler == nil {
		bad("no handler")
	}
	if _, err := o.Mode.MarshalText(); err != nil {
		errs = append(errs, err)
	}
	neg := func(name string, v int) {
		if v < 0 {
			bad("%s must not be negative, got %d", name, v)
		}
	}
	neg("MaxInFlight", o.MaxInFlight)
	neg("MaxInFlightPerPartition", o.MaxInFlightPerPartition)
	neg("MaxBuffered", o.MaxBuffered)
	neg("MaxBufferedPerPartition", o.MaxBufferedPerPartition)
	neg("MaxBufferedBytes", o.MaxBufferedBytes)
	neg("HorizonStep", o.HorizonStep)
	if o.CommitInterval < 0 || (o.CommitInterval > 0 && o.CommitInterval < 100*time.Millisecond) {
		bad("CommitInterval must be at least 100ms (franz-go's minimum), got %v", o.CommitInterval)
	}
	if o.DrainTimeout < 0 {
		bad("DrainTimeout must not be negative, got %v", o.DrainTimeout)
	}
	if o.ShutdownTimeout < 0 {
		bad("ShutdownTimeout must not be negative, got %v", o.ShutdownTimeout)
	}
	if o.CallTimeout < 0 || o.TakeoverWait < 0 || o.ApplyWindow < 0 {
		bad("CallTimeout, ApplyWindow and TakeoverWait must not be negative, got %v, %v and %v", o.CallTimeout, o.ApplyWindow, o.TakeoverWait)
	}
	if _, err := o.Delivery.MarshalText(); err != nil {
		errs = append(errs, err)
	}
	if o.Delivery == ExactlyOnce && o.TransactionalID == "" {
		bad("exactly-once delivery needs a TransactionalID")
	}
	if o.TransactionTimeout < 0 || (o.TransactionTimeout > 0 && o.TransactionTimeout < time.Second) {
		bad("TransactionTimeout must be at least 1s, got %v", o.TransactionTimeout)
	}

	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.MaxInFlightPerPartition == 0 {
		o.MaxInFlightPerPartition = o.MaxInFlight
	}
	if o.MaxInFlightPerPartition > o.MaxInFlight {
		bad("MaxInFlightPerPartition %d exceeds MaxInFlight %d", o.MaxInFlightPerPartition, o.MaxInFlight)
	}
	if o.MaxBuffered == 0 {
		o.MaxBuffered = 4 * o.MaxInFlight
	}
	if o.MaxBuffered < o.MaxInFlight {
		bad("MaxBuffered %d is below MaxInFlight %d", o.MaxBuffered, o.MaxInFlight)
	}
	neg("RoundRecords", o.RoundRecords)
	if o.RoundRecords == 0 {
		o.RoundRecords = min(o.MaxBuffered, DefaultRoundsPerInFlight*o.MaxInFlight)
	}
	if o.RoundRecords > o.MaxBuffered {
		bad("RoundRecords %d exceeds MaxBuffered %d", o.RoundRecords, o.MaxBuffered)
	}
	if o.RoundTime < 0 {
		bad("RoundTime %s is negative", o.RoundTime)
	}
	if o.RoundTime == 0 {
		o.RoundTime = DefaultRoundTime
	}
	if o.MaxBufferedBytes == 0 {
		o.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if o.MaxBufferedPerPartition == 0 {
		o.MaxBufferedPerPartition = max(o.MaxBuffered/2, o.MaxInFlightPerPartition)
	}
	if o.MaxBufferedPerPartition < o.MaxInFlightPerPartition {
		bad("MaxBufferedPerPartition %d is below MaxInFlightPerPartition %d", o.MaxBufferedPerPartition, o.MaxInFlightPerPartition)
	}
	if o.HorizonStep == 0 {
		o.HorizonStep = max(min(o.MaxBufferedPerPartition/2, DefaultMaxHorizonStep), 1)
	}
	if o.TransactionTimeout == 0 {
		o.TransactionTimeout = DefaultTransactionTimeout
	}
	switch {
	case o.Linger == 0:
		o.Linger = DefaultLinger
	case o.Linger < 0:
		o.Linger = 0
	}
	if o.CommitInterval == 0 {
		o.CommitInterval = DefaultCommitInterval
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.TakeoverWait == 0 && o.CallTimeout > 0 {
		o.TakeoverWait = o.landed() + DefaultTakeoverMargin
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = o.DrainTimeout + DefaultShutdownMargin
	}
	if o.ShutdownTimeout <= o.DrainTimeout {
		bad("ShutdownTimeout %v must exceed DrainTimeout %v: the drain is part of the shutdown", o.ShutdownTimeout, o.DrainTimeout)
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Observer == nil {
		o.Observer = NopObserver{}
	}
	return o, errors.Join(errs...)
}

// landed is how long after its start a handler's call has taken effect or
// never will: CallTimeout to be sent, ApplyWindow to be applied.
func (o Options) landed() time.Duration { return o.CallTimeout + o.ApplyWindow }
