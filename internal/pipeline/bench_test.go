package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// BenchmarkPipeline measures the engine's own throughput over kfake (TCP,
// one broker, 6 partitions, 1000 keys) with a trivial handler producing one
// output per input: consume, schedule, produce, wait for the acknowledgement,
// commit. Each iteration is one record; the records are produced before the
// timer starts.
func BenchmarkPipeline(b *testing.B) {
	for _, mode := range []ordering.Mode{ordering.Key, ordering.Partition, ordering.Unordered} {
		b.Run(mode.String(), func(b *testing.B) { benchPipeline(b, mode, 0) })
	}
}

// BenchmarkPipelineLatency is the reason for key-ordered concurrency: with
// a handler that takes 5ms (a partner API call), partition mode is capped
// near partitions/5ms, key mode by the in-flight limits.
func BenchmarkPipelineLatency(b *testing.B) {
	for _, mode := range []ordering.Mode{ordering.Key, ordering.Partition} {
		b.Run(mode.String(), func(b *testing.B) { benchPipeline(b, mode, 5*time.Millisecond) })
	}
}

func benchPipeline(b *testing.B, mode ordering.Mode, latency time.Duration) {
	c := testkit.StartKafka(b, testkit.KafkaOptions{Topics: []testkit.TopicSet{{Partitions: 6, Names: []string{inTopic, outTopic}}}})
	prod := c.Client(b, kgo.ProducerLinger(5*time.Millisecond))
	ctx := context.Background()
	for i := 0; i < b.N; {
		batch := make([]*kgo.Record, 0, 1000)
		for ; i < b.N && len(batch) < cap(batch); i++ {
			batch = append(batch, &kgo.Record{Topic: inTopic, Key: fmt.Appendf(nil, "member-%d", i%1000), Value: make([]byte, 200)})
		}
		if err := prod.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	rec := newRecorder()
	all := make(chan struct{})
	obs := &doneAt{recorder: rec, n: b.N, all: all}
	p, err := New(Options{
		Brokers: c.Brokers, Group: "bench", Topics: []string{inTopic}, Mode: mode,
		Handler: func(_ context.Context, r *kgo.Record, _ Meta) ([]*kgo.Record, error) {
			if latency > 0 {
				time.Sleep(latency)
			}
			return []*kgo.Record{{Topic: outTopic, Key: r.Key, Value: r.Value}}, nil
		},
		Observer:   obs,
		Logger:     zap.NewNop(),
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
	})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	go func() { done <- p.Run(runCtx) }()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Error("records not all processed")
	}
	b.StopTimer()
	elapsed := obs.elapsed() // from the first dispatch: joining the group is not throughput
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
}

// doneAt closes all once n records are done, and times them from the
// first dispatch to the last done.
type doneAt struct {
	*recorder
	n           int
	all         chan struct{}
	seen        int
	first, last time.Time
}

func (d *doneAt) RecordStarted(string, int32, bool) {
	d.mu.Lock()
	if d.first.IsZero() {
		d.first = time.Now()
	}
	d.mu.Unlock()
}

func (d *doneAt) elapsed() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last.Sub(d.first)
}

func (d *doneAt) RecordDone(topic string, partition int32, o Outcome, t time.Duration) {
	d.recorder.RecordDone(topic, partition, o, t)
	d.mu.Lock()
	d.seen++
	if d.seen == d.n {
		d.last = time.Now()
		close(d.all)
	}
	d.mu.Unlock()
}
