package benchkit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/devstack"
)

// stack is one contestant's world: Kafka, registry and simulator in this
// process, the bridge's schemas registered, and (once written) the input
// records with their timestamps.
type stack struct {
	*devstack.Stack
	topics codec.Topics
	codec  *codec.Codec
	// inputTS[i] is the record timestamp (Unix ns) of event i; only for
	// contestants that read Kafka.
	inputTS []int64
}

// startStack starts a stack for sc with the simulator's latency in force
// and every topic of the default topic set created with sc.Partitions.
func startStack(ctx context.Context, sc Scenario) (_ *stack, err error) {
	topics := codec.DefaultTopics()
	ds, err := devstack.Start(ctx, devstack.Options{
		KafkaAddr: "127.0.0.1:0", RegistryAddr: "127.0.0.1:0", SimAddr: "127.0.0.1:0",
		Partitions: sc.Partitions, Topics: topics.All(),
		Sim: sc.simOptions(),
	})
	if err != nil {
		return nil, fmt.Errorf("dev stack: %w", err)
	}
	s := &stack{Stack: ds, topics: topics}
	defer func() {
		if err != nil {
			ds.Close()
		}
	}()
	reg, err := sr.NewClient(sr.URLs(ds.RegistryURL))
	if err != nil {
		return nil, fmt.Errorf("registry client: %w", err)
	}
	if s.codec, err = codec.New(ctx, codec.Options{Registry: reg, Topics: topics, Register: true}); err != nil {
		return nil, fmt.Errorf("register schemas: %w", err)
	}
	return s, nil
}

// inputTopic, resultTopic and errorTopic are the purchase topic and its
// replies.
func (s *stack) inputTopic() string  { return s.topics.Purchase }
func (s *stack) resultTopic() string { return s.topics.ResultTopic(s.topics.Purchase) }
func (s *stack) errorTopic() string  { return s.topics.ErrorTopic(s.topics.Purchase) }

// write writes events 0…n-1 of sc to the input topic, keyed by loyaltyId
// (Kafka's default partitioner spreads the keys over the partitions), and
// remembers each record's timestamp in inputTS. With sc.Rate it paces the
// writes at that many events per second from now (open loop: it does not
// wait for the contestant); otherwise it writes as fast as it can.
// progress, when set, is called now and then with the number written.
func (s *stack) write(ctx context.Context, sc Scenario, n int, progress func(int)) error {
	linger := 5 * time.Millisecond
	if sc.Rate > 0 {
		linger = time.Millisecond // input timestamps are taken before the linger
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...), kgo.ProducerLinger(linger),
		kgo.MaxBufferedRecords(20_000), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return fmt.Errorf("input producer: %w", err)
	}
	defer cl.Close()
	s.inputTS = make([]int64, n)
	var (
		written  atomic.Int64
		mu       sync.Mutex
		firstErr error
	)
	start := time.Now()
	topic := s.inputTopic()
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		if sc.Rate > 0 {
			due := start.Add(time.Duration(float64(i) / float64(sc.Rate) * float64(time.Second)))
			if time.Until(due) > time.Millisecond { // events due within a millisecond go out together
				if err := sleepUntil(ctx, due.UnixNano()); err != nil {
					break
				}
			}
		}
		ev := sc.Event(i, start)
		value, err := s.codec.Encode(topic, ev)
		if err != nil {
			return fmt.Errorf("encode event %d: %w", i, err)
		}
		now := time.Now()
		s.inputTS[i] = now.UnixMilli() * int64(time.Millisecond) // Kafka keeps milliseconds
		rec := &kgo.Record{Topic: topic, Key: []byte(ev.LoyaltyID), Value: value, Timestamp: now}
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				return
			}
			if w := written.Add(1); progress != nil && w%100_000 == 0 {
				progress(int(w))
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("write input: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return fmt.Errorf("write input: %w", firstErr)
	}
	return ctx.Err()
}
