package benchkit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// replies is what a collector saw on the reply topics.
type replies struct {
	results    int // distinct records answered on the result topic
	errors     int // distinct records answered on the error topic
	exhausted  int // of which TRANSIENT_EXHAUSTED: retries spent on transient failures
	duplicates int // replies for a record already answered
	foreign    int // replies whose key is not a bench transactionId
	handlerMs  []int64
	firstError string
}

// collector consumes a stack's reply topics from the start and matches
// replies to the backlog by key (the transactionId).
type collector struct {
	s        *stack
	n        int
	cl       *kgo.Client
	done     *completions
	out      replies
	progress atomic.Int64
}

func newCollector(s *stack, n int) (*collector, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...),
		kgo.ConsumeTopics(s.resultTopic(), s.errorTopic()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// What a reader of the replies sees: under exactly-once, a round's
		// replies once it commits, and never an aborted round's (read
		// uncommitted, they counted as answers and their redo as
		// duplicates). The reply's time is still its producer's stamp.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("reply collector: %w", err)
	}
	return &collector{s: s, n: n, cl: cl}, nil
}

func (c *collector) close() { c.cl.Close() }

// Done is how many distinct records have been answered so far; safe to
// call from any goroutine.
func (c *collector) Done() int { return int(c.progress.Load()) }

// errStalled is returned when replies stop coming before every record is
// answered.
var errStalled = errors.New("no reply for too long")

// run collects until every record is answered, ctx ends, no reply has
// come for stall, or exited is closed (the contestant's process ended) and
// nothing more arrives. launch is when the contestant started. Call it
// once; then result.
func (c *collector) run(ctx context.Context, launch time.Time, stall time.Duration, exited <-chan struct{}) error {
	c.done = newCompletions(launch.UnixNano(), c.n, nil)
	lastNew := time.Now()
	exitSeen := false
	for int(c.progress.Load()) < c.n {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches := c.cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		before := c.progress.Load()
		fetches.EachRecord(c.add)
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				return fmt.Errorf("reply collector: %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		if c.progress.Load() > before {
			lastNew = time.Now()
			continue
		}
		select {
		case <-exited:
			// One more empty poll after the exit: replies produced just
			// before it may still be on their way.
			if exitSeen {
				return errors.New("the contestant exited before answering every record")
			}
			exitSeen = true
		default:
		}
		if time.Since(lastNew) > stall {
			return fmt.Errorf("%w (%s)", errStalled, stall)
		}
	}
	return nil
}

func (c *collector) add(r *kgo.Record) {
	i := eventIndex(r.Key)
	switch {
	case i < 0 || i >= c.n:
		c.out.foreign++
		return
	case c.done.done[i] != 0:
		c.out.duplicates++
		return
	}
	c.done.done[i] = max(1, r.Timestamp.UnixNano())
	if r.Topic == c.s.errorTopic() {
		c.out.errors++
		e, desc := c.decodeError(r) // error events are few: each is read
		if e != nil && e.Category == events.CategoryTransientExhausted {
			c.out.exhausted++
		}
		if c.out.firstError == "" {
			c.out.firstError = desc
		}
	} else {
		c.out.results++
		// One result in handlerSample is decoded for its latencyMs: the
		// handler's time (API calls included), which tells how much of a
		// record's in-flight time is spent outside the handler.
		if c.out.results%handlerSample == 1 {
			if v, err := c.s.codec.Decode(context.Background(), r.Topic, r.Value); err == nil {
				if lr, ok := v.(*events.LoyaltyResult); ok {
					c.out.handlerMs = append(c.out.handlerMs, lr.LatencyMs)
				}
			}
		}
	}
	c.progress.Add(1)
}

// handlerSample: decode every handlerSample-th result (decoding costs the
// harness CPU).
const handlerSample = 8

// decodeError reads an error reply, and summarises it for the report (no
// personal data: the bench's events carry none); e is nil when it is not
// a readable error event.
func (c *collector) decodeError(r *kgo.Record) (e *events.LoyaltyError, desc string) {
	v, err := c.s.codec.Decode(context.Background(), r.Topic, r.Value)
	if err != nil {
		return nil, fmt.Sprintf("%s (undecodable: %v)", r.Key, err)
	}
	e, ok := v.(*events.LoyaltyError)
	if !ok {
		return nil, fmt.Sprintf("%s: %T on the error topic", r.Key, v)
	}
	code := ""
	if e.APIErrorCode != nil {
		code = " " + *e.APIErrorCode
	}
	return e, fmt.Sprintf("%s: %s%s: %s", e.TransactionID, e.Category, code, e.Detail)
}

// result sums up what run collected. avail is when each record was
// written (nil for a backlog written before the launch); its writer must
// have finished.
func (c *collector) result(avail []int64) (replies, Timing) {
	c.done.avail = avail
	return c.out, c.done.timing(avail != nil)
}

// partitionGap is the longest time an input partition went without a
// reply between its first reply and its last (with a backlog every
// partition has records waiting until its last is answered, so a gap is
// a stall there: a rebalance, a restart, a slow round): how long, which
// partition, and when it began (Unix ns).
type partitionGap struct {
	gap       time.Duration
	partition int32
	from      int64
}

// longestPartitionGap finds it: done[i] is event i's reply time (0:
// none), part[i] its input partition. With events written during the run
// (a rate) a gap may also be a partition with no input: the bench reports
// it for backlogs only.
func longestPartitionGap(done []int64, part []int32) partitionGap {
	by := map[int32][]int64{}
	for i, t := range done {
		if t != 0 && i < len(part) {
			by[part[i]] = append(by[part[i]], t)
		}
	}
	var g partitionGap
	for p, ts := range by {
		slices.Sort(ts)
		for j := 1; j < len(ts); j++ {
			if d := time.Duration(ts[j] - ts[j-1]); d > g.gap {
				g = partitionGap{gap: d, partition: p, from: ts[j-1]}
			}
		}
	}
	return g
}
