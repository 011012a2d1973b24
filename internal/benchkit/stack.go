package benchkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/devstack"
	"github.com/loyalty-bridge/loyalty-bridge/internal/topicseed"
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
	// inputPart[i] is the input partition event i was written to, set as
	// each write is acknowledged.
	inputPart []int32
	// prefix starts every topic and group name of the stack: empty on
	// kfake, which is the stack's own; on an external cluster, a name of
	// this run and contestant, so that runs never read each other's
	// records or offsets, and Close deletes them.
	prefix   string
	external bool
	seeds    []string
	groups   []string // handed out by group, for Close
}

// startStack starts a stack for sc with the simulator's latency in force
// and every topic of the default topic set created with sc.Partitions: on
// kfake in this process, or on the cluster brokers names.
func startStack(ctx context.Context, sc Scenario, brokers []string) (_ *stack, err error) {
	s := &stack{topics: codec.DefaultTopics(), external: len(brokers) > 0, seeds: brokers}
	if s.external {
		var r [4]byte
		_, _ = rand.Read(r[:])
		s.prefix = fmt.Sprintf("loyalty-bench-%s-%s.", time.Now().UTC().Format("20060102T150405"), hex.EncodeToString(r[:]))
		s.topics = codec.Topics{Purchase: s.prefix + s.topics.Purchase, RefundRedemption: s.prefix + s.topics.RefundRedemption,
			MemberOnboarding: s.prefix + s.topics.MemberOnboarding}
	}
	topics := s.topics
	ds, err := devstack.Start(ctx, devstack.Options{
		KafkaAddr: "127.0.0.1:0", Brokers: brokers, RegistryAddr: "127.0.0.1:0", SimAddr: "127.0.0.1:0",
		Partitions: sc.Partitions, Topics: topics.All(),
		Sim: sc.simOptions(),
	})
	if err != nil {
		if s.external {
			// devstack may have created some of them before it failed.
			s.deleteExternal(topics.All())
		}
		return nil, fmt.Errorf("dev stack: %w", err)
	}
	s.Stack = ds
	defer func() {
		if err != nil {
			s.Close()
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

// group is the consumer group of the contestant named name.
func (s *stack) group(name string) string {
	g := s.prefix + name
	s.groups = append(s.groups, g)
	return g
}

// bridgeGroupOf is the consumer group of the bridge in ordering mode mode.
func (s *stack) bridgeGroupOf(mode string) string { return s.group(bridgeGroup + mode) }

// Close stops the stack; on an external cluster it deletes the stack's
// topics and groups, which would otherwise fill the cluster run by run.
func (s *stack) Close() {
	s.Stack.Close()
	if s.external {
		topics := s.topics.All()
		for _, g := range s.groups {
			if strings.Contains(g, bridgeGroup) {
				// The bridge's own topics, named after its group (the
				// defaults of --ledger-topic and --parked-topic).
				topics = append(topics, config.DefaultLedgerTopic(g), config.DefaultParkedTopic(g))
			}
		}
		s.deleteExternal(topics, s.groups...)
	}
}

// deleteExternal deletes topics and groups from the external cluster, best
// effort: a failure leaves names of this run only, which say what they are.
func (s *stack) deleteExternal(topics []string, groups ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.seeds...))
	if err != nil {
		return
	}
	defer cl.Close()
	_ = topicseed.Delete(ctx, cl, topics...)
	if len(groups) > 0 {
		_, _ = kadm.NewClient(cl).DeleteGroups(ctx, groups...)
	}
}

// inputTopic, resultTopic and errorTopic are the purchase topic and its
// replies.
func (s *stack) inputTopic() string  { return s.topics.Purchase }
func (s *stack) resultTopic() string { return s.topics.ResultTopic(s.topics.Purchase) }
func (s *stack) errorTopic() string  { return s.topics.ErrorTopic(s.topics.Purchase) }

// write writes events 0…n-1 of sc to the input topic, keyed by loyaltyId
// (Kafka's default partitioner spreads the keys over the partitions), and
// remembers each record's timestamp in inputTS and its partition in
// inputPart. With sc.Rate it paces the
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
	s.inputPart = make([]int32, n)
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
		cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				return
			}
			s.inputPart[i] = r.Partition // read after Flush, which orders it
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
