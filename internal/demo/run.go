package demo

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/progress"
)

// RunOptions shape a Run.
type RunOptions struct {
	Brokers []string     // the cluster the bridge reads (required)
	Codec   *codec.Codec // encodes the plan and decodes replies (required)
	Topics  codec.Topics // zero fields: the defaults
	N       int          // records in phase one, as Options.N
	Members func(i int) string
	Count   int // members, as Options.Count
	// Out gets the progress, the table of outcomes and the verdict.
	Out io.Writer
	// Timeout, when > 0, ends the wait for replies after that long;
	// otherwise Run waits until every event is answered or ctx ends.
	Timeout time.Duration
}

// Run produces a plan of o.N events to the input topics, follows the reply
// topics (from their ends when Run starts: replies of this run only) and
// shows progress; once every event of phase one is answered it produces the
// refunds and waits for those. It ends with the table of outcomes and
// returns an error when not every event got its output (timeout, ctx
// ended) or a record could not be encoded or produced. The caller owns the
// bridge that answers.
func Run(ctx context.Context, o RunOptions) error {
	topics := o.Topics.WithDefaults()
	replyTopics := make([]string, 0, 6)
	inputOf := map[string]string{}
	for _, in := range topics.Inputs() {
		replyTopics = append(replyTopics, topics.ResultTopic(in), topics.ErrorTopic(in))
		inputOf[topics.ResultTopic(in)], inputOf[topics.ErrorTopic(in)] = in, in
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.Brokers...), kgo.ConsumeTopics(replyTopics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	// The first poll fixes the start offsets before anything is produced.
	pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	first := cl.PollFetches(pctx)
	cancel()

	tally := NewTally()
	var watchWG sync.WaitGroup
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer func() { stopWatch(); watchWG.Wait() }()
	watchWG.Add(1)
	go func() {
		defer watchWG.Done()
		fetches := first
		for watchCtx.Err() == nil {
			fetches.EachRecord(func(r *kgo.Record) { tallyReply(watchCtx, o.Codec, tally, inputOf[r.Topic], r) })
			fetches = cl.PollFetches(watchCtx)
		}
	}()

	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	plan, refunds := Plan(Options{N: o.N, Members: o.Members, Count: o.Count, Topics: topics, Run: run,
		Seed: uint64(time.Now().UnixNano()), Now: time.Now()})
	start := time.Now()
	prog := progress.New(o.Out, "events answered", start)
	if err := produceItems(ctx, cl, o.Codec, tally, plan); err != nil {
		return err
	}
	deadline := time.Now().Add(o.Timeout)
	all := func() bool { d, p := tally.Progress(); return d >= p }
	waitAll := func() bool {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for !all() {
			prog.Show(tally.Progress())
			select {
			case <-ctx.Done():
				return false
			case <-t.C:
			}
			if o.Timeout > 0 && time.Now().After(deadline) {
				return false
			}
		}
		return true
	}
	complete := waitAll()
	if complete {
		// Phase two: refunds of purchases that have been applied by now.
		complete = produceItems(ctx, cl, o.Codec, tally, refunds()) == nil && waitAll()
	}
	done, planned := tally.Progress()
	prog.Finish(done, planned)
	fmt.Fprintf(o.Out, "\n%s\n", tally.Table())
	if !complete {
		return fmt.Errorf("demo: %d of %d events got their output", done, planned)
	}
	fmt.Fprintf(o.Out, "every event got its output in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// produceItems sends items and expects their answers: an event's by its
// transactionId, a raw record's by its position once Kafka has it.
func produceItems(ctx context.Context, cl *kgo.Client, cd *codec.Codec, tally *Tally, items []Item) error {
	var (
		mu      sync.Mutex
		failure error
	)
	for _, it := range items {
		value := it.Raw
		if it.Event != nil {
			v, err := cd.Encode(it.Topic, it.Event)
			if err != nil {
				return fmt.Errorf("demo: encode %s: %w", it.ID, err)
			}
			value = v
			if it.Note != "" {
				tally.Note(it.ID, it.Note)
			}
			tally.Expect(it.ID)
		}
		raw := it.Event == nil
		cl.Produce(ctx, &kgo.Record{Topic: it.Topic, Key: []byte(it.Key), Value: value}, func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failure = err
				mu.Unlock()
				return
			}
			if raw {
				tally.Expect(events.SourceID(r.Topic, r.Partition, r.Offset))
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("demo: produce: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if failure != nil {
		return fmt.Errorf("demo: produce: %w", failure)
	}
	return nil
}

// tallyReply counts one reply record of input topic in; what does not
// decode is not a reply of this demo.
func tallyReply(ctx context.Context, cd *codec.Codec, tally *Tally, in string, r *kgo.Record) {
	v, err := cd.Decode(ctx, r.Topic, r.Value)
	if err != nil {
		return
	}
	switch x := v.(type) {
	case *events.LoyaltyResult:
		tally.Result(in, x)
	case *events.LoyaltyError:
		tally.Error(in, x)
	}
}
