package pipeline

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The mode-level tests drive one strategy through the core's entry points
// (enqueue, nextLocked, finish) and its own, with no broker: what they
// check happens under the pipeline's lock, before any Kafka call.

// modePipeline is a pipeline that never runs: its strategy is driven by
// hand. opts needs no Brokers, Group, Topics or Handler.
func modePipeline(t *testing.T, opts Options) *Pipeline {
	t.Helper()
	opts.Brokers, opts.Group, opts.Topics = []string{"unused:9092"}, "g", []string{inTopic}
	opts.Handler = echo(nil)
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	p.workCtx = context.Background()
	return p
}

// assign makes partition n of inTopic assigned, as onAssigned does.
func assign(p *Pipeline, n int32) *partition {
	p.mu.Lock()
	defer p.mu.Unlock()
	part := p.newPartitionLocked(tp{inTopic, n})
	p.mode.assignedLocked(part)
	return part
}

// polled is a fetch of partition n of inTopic with one record per offset
// in [from, to), keyed key(offset).
func polled(n int32, from, to int64, key func(int64) string) kgo.Fetches {
	var recs []*kgo.Record
	for o := from; o < to; o++ {
		recs = append(recs, &kgo.Record{Topic: inTopic, Partition: n, Offset: o, Key: []byte(key(o))})
	}
	return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: inTopic, Partitions: []kgo.FetchPartition{{Partition: n, Records: recs}}}}}}
}

func distinctKeys(o int64) string { return string(rune('a' + o)) }

// startAll dispatches every record the core and the strategy let start
// now, checking the counters after each, and returns them in order.
func startAll(t *testing.T, p *Pipeline) []*job {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var started []*job
	for j := p.nextLocked(); j != nil; j = p.nextLocked() {
		started = append(started, j)
		checkCounters(t, p)
	}
	return started
}

// checkCounters checks the invariant of every counters the pipeline
// keeps, with its lock held.
func checkCounters(t *testing.T, p *Pipeline) {
	t.Helper()
	if err := p.count.check(); err != nil {
		t.Fatal(err)
	}
	for _, part := range p.parts {
		if err := part.count.check(); err != nil {
			t.Fatalf("%s: %v", part.tp, err)
		}
	}
}

func offsets(js []*job) []int64 {
	out := make([]int64, len(js))
	for i, j := range js {
		out[i] = j.rec.Offset
	}
	return out
}
