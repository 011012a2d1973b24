package benchkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
)

// The baseline is deliberately what a first version looks like: franz-go's
// goroutine-per-partition pattern (as in its examples), one record at a
// time per partition, the reply produced with ProduceSync before the next
// record, client settings left at their defaults (ProduceSync does not
// linger). It is correct (at-least-once, replies before commits) and
// simple; its throughput per partition is bounded by one API call plus one
// produce round trip.

type baseline struct {
	cl        *kgo.Client
	codec     *codec.Codec
	api       *loyalty.Client
	topics    codec.Topics
	done      atomic.Int64
	failed    atomic.Int64
	mu        sync.Mutex
	firstErr  string
	consumers map[int32]*partitionWorker
}

type partitionWorker struct {
	recs chan []*kgo.Record
	quit chan struct{}
	done chan struct{}
}

func runBaseline(ctx context.Context, spec WorkerSpec) (WorkerResult, error) {
	b := &baseline{topics: spec.Topics.WithDefaults(), consumers: map[int32]*partitionWorker{}}
	api, hc, err := apiClient(spec, int(spec.Scenario.Partitions))
	if err != nil {
		return WorkerResult{}, err
	}
	defer hc.CloseIdleConnections()
	b.api = api
	reg, err := sr.NewClient(sr.URLs(spec.RegistryURL))
	if err != nil {
		return WorkerResult{}, err
	}
	if b.codec, err = codec.New(ctx, codec.Options{Registry: reg, Topics: b.topics}); err != nil {
		return WorkerResult{}, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(spec.Brokers...),
		kgo.ConsumerGroup(spec.Group),
		kgo.ConsumeTopics(b.topics.Purchase),
		kgo.AutoCommitMarks(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(b.assigned),
		kgo.OnPartitionsRevoked(b.revoked),
		kgo.OnPartitionsLost(b.revoked),
	}
	if b.cl, err = kgo.NewClient(opts...); err != nil {
		return WorkerResult{}, err
	}
	b.poll(ctx)
	b.cl.Close() // leaves the group after committing what was marked
	b.mu.Lock()
	defer b.mu.Unlock()
	return WorkerResult{Done: int(b.done.Load()), Errors: int(b.failed.Load()), FirstError: b.firstErr}, nil
}

func (b *baseline) poll(ctx context.Context) {
	defer b.stopAll()
	for {
		fetches := b.cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			b.cl.AllowRebalance()
			return
		}
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			w := b.consumers[p.Partition]
			if w == nil {
				return
			}
			select {
			case w.recs <- p.Records:
			case <-ctx.Done():
			}
		})
		b.cl.AllowRebalance()
	}
}

func (b *baseline) assigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	for _, p := range assigned[b.topics.Purchase] {
		w := &partitionWorker{recs: make(chan []*kgo.Record, 4), quit: make(chan struct{}), done: make(chan struct{})}
		b.consumers[p] = w
		go b.work(ctx, w)
	}
}

func (b *baseline) revoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	for _, p := range revoked[b.topics.Purchase] {
		if w := b.consumers[p]; w != nil {
			close(w.quit)
			<-w.done
			delete(b.consumers, p)
		}
	}
}

func (b *baseline) stopAll() {
	for p, w := range b.consumers {
		close(w.quit)
		<-w.done
		delete(b.consumers, p)
	}
}

// work handles one partition's records, one at a time.
func (b *baseline) work(ctx context.Context, w *partitionWorker) {
	defer close(w.done)
	for {
		select {
		case <-w.quit:
			return
		case recs := <-w.recs:
			for _, r := range recs {
				if err := b.handle(ctx, r); err != nil {
					return // the client is closing; unmarked records are redelivered
				}
				b.cl.MarkCommitRecords(r)
			}
		}
	}
}

// handle decodes, calls the API, and produces the reply synchronously.
func (b *baseline) handle(ctx context.Context, r *kgo.Record) error {
	start := time.Now()
	resultTopic, errorTopic := b.topics.ResultTopic(r.Topic), b.topics.ErrorTopic(r.Topic)
	src := events.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	var out *kgo.Record
	var (
		pc   *events.PurchaseCompleted
		res  *loyalty.AccrualResult
		info loyalty.CallInfo
		cat  events.Category
	)
	ev, err := b.codec.DecodeEvent(ctx, r.Topic, r.Value)
	if err == nil {
		var ok bool
		if pc, ok = ev.(*events.PurchaseCompleted); !ok {
			err = fmt.Errorf("unexpected %T on %s", ev, r.Topic)
		}
	}
	if err != nil {
		cat = events.CategoryDecode
	} else if err = pc.Validate(); err != nil {
		cat = events.CategoryValidation
	} else {
		res, info, err = b.api.Accrue(ctx, AccrualRequest(pc))
		cat = events.Category(loyalty.Category(err))
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		b.failed.Add(1)
		b.mu.Lock()
		if b.firstErr == "" {
			b.firstErr = err.Error()
		}
		b.mu.Unlock()
		id := events.SourceID(r.Topic, r.Partition, r.Offset)
		if pc != nil {
			id = pc.TransactionID
		}
		le := &events.LoyaltyError{TransactionID: id, Category: cat,
			Retryable: loyalty.Retryable(err), Detail: err.Error(), Attempts: int32(info.Attempts),
			Source:        events.ErrorSource{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp},
			OriginalValue: r.Value, ProcessedAt: time.Now()}
		v, encErr := b.codec.EncodeError(errorTopic, le)
		if encErr != nil {
			return encErr
		}
		out = &kgo.Record{Topic: errorTopic, Key: []byte(id), Value: v}
	} else {
		sponsor := res.SponsorID
		lid := pc.LoyaltyID
		lr := &events.LoyaltyResult{TransactionID: pc.TransactionID, EventType: events.TypePurchaseCompleted,
			LoyaltyID: &lid, Outcome: events.OutcomeApplied, BitReference: &res.BitReference, SponsorID: &sponsor,
			RequestID: &res.RequestID, APITimestamp: &res.Timestamp, Attempts: int32(info.Attempts),
			LatencyMs: time.Since(start).Milliseconds(), ProcessedAt: time.Now(), Source: src}
		v, encErr := b.codec.EncodeResult(resultTopic, lr)
		if encErr != nil {
			return encErr
		}
		out = &kgo.Record{Topic: resultTopic, Key: []byte(pc.TransactionID), Value: v}
	}
	if err := b.cl.ProduceSync(ctx, out).FirstErr(); err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return fmt.Errorf("produce reply: %w", err)
	}
	b.done.Add(1)
	return nil
}
