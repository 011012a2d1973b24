package bridge_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/parking"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// parkedStack is a stack whose bridge parks refunds on group.parked, with
// a ledger, a member running it and a reader of the parked topic.
type parkedStack struct {
	*stack
	group, topic string
	out          *outputs
	parked       *recordsOf
	in           *kgo.Client // produces to the partition it is told
}

// recordsOf follows one topic and keeps its records.
type recordsOf struct {
	mu   sync.Mutex
	recs []*kgo.Record
}

func (r *recordsOf) all() []*kgo.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*kgo.Record(nil), r.recs...)
}

func newParkedStack(t *testing.T, group string, wait, backoff time.Duration) *parkedStack {
	t.Helper()
	s := newStack(t, stackOpts{partitions: 2})
	l, part := s.withLedger(group)
	ps := &parkedStack{stack: s, group: group, topic: group + ".parked"}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ps.in = cl
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := parking.Ensure(ctx, cl, ps.topic, topics.RefundRedemption, wait, 1); err != nil {
		t.Fatal(err)
	}
	ps.out = s.follow()
	ps.parked = ps.follow(ps.topic)
	b := s.bridge(func(o *bridge.Options) {
		o.Ledger, o.ParkedTopic, o.OriginalWait, o.ParkBackoff = l, ps.topic, wait, backoff
	})
	s.start(memberOpts{bridge: b, group: group, clientOpts: []kgo.Opt{part}})
	return ps
}

func (ps *parkedStack) follow(topic string) *recordsOf {
	ps.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(ps.brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		ps.t.Fatal(err)
	}
	r := &recordsOf{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
				r.mu.Lock()
				r.recs = append(r.recs, rec)
				r.mu.Unlock()
			})
		}
	})
	ps.t.Cleanup(func() { cancel(); wg.Wait(); cl.Close() })
	return r
}

// send produces ev to partition p of topic, keyed by key, and returns its
// offset.
func (ps *parkedStack) send(topic string, p int32, key string, ev events.Event, headers ...kgo.RecordHeader) int64 {
	ps.t.Helper()
	v, err := ps.codec.Encode(topic, ev)
	if err != nil {
		ps.t.Fatal(err)
	}
	return ps.raw(&kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: v, Headers: headers})
}

func (ps *parkedStack) raw(r *kgo.Record) int64 {
	ps.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := ps.in.ProduceSync(ctx, r).First()
	if err != nil {
		ps.t.Fatal(err)
	}
	return got.Offset
}

// committed is the group's committed offset of topic's partition p (-1:
// none).
func (ps *parkedStack) committed(topic string, p int32) int64 {
	ps.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	os, err := kadm.NewClient(ps.in).FetchOffsets(ctx, ps.group)
	if err != nil {
		return -1
	}
	o, ok := os.Lookup(topic, p)
	if !ok || o.Err != nil {
		return -1
	}
	return o.At
}

func header(r *kgo.Record, k string) string {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

// A refund read before its purchase was applied (issue 29, finding 6: it
// was a BUSINESS ORIGINAL_NOT_FOUND, never replayed by default, so lost)
// is parked: one record on the parked topic, no reply, its input
// committed past it, and a later record of another key on its partition
// answered meanwhile. Once the purchase is applied, the parked refund
// comes back and is clawed back once, answered as the original refund on
// the refund topic's .result, naming its original position.
func TestRefundParkedUntilItsPurchaseIsApplied(t *testing.T) {
	ps := newParkedStack(t, "park", 30*time.Second, 100*time.Millisecond)
	rt, pt := topics.RefundRedemption, topics.Purchase
	m := sim.MemberID(1)
	at := ps.send(rt, 0, m, refundOf("f-1", "p-1", 1, 30_000, time.Now()),
		kgo.RecordHeader{Key: "correlation-id", Value: []byte("corr-f-1")},
		kgo.RecordHeader{Key: parking.HeaderTries, Value: []byte("99")}) // no input chooses its parking
	// Another key, the same partition: answered while the refund waits.
	ps.send(rt, 0, sim.MemberID(2), redemption("r-1", 2, 10))

	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		if n := len(ps.parked.all()); n == 0 {
			return false, "refund f-1 not parked"
		}
		if len(ps.out.get("r-1")) == 0 {
			return false, "redemption r-1 behind the parked refund not answered"
		}
		if c := ps.committed(rt, 0); c < at+2 {
			return false, fmt.Sprintf("refund partition committed at %d, want past the refund and r-1 (%d)", c, at+2)
		}
		return true, ""
	})
	if rs := ps.out.get("f-1"); len(rs) != 0 {
		t.Fatalf("parked refund answered before its purchase: %s %s", rs[0].outcome(), rs[0].detail())
	}
	first := ps.parked.all()[0]
	if string(first.Key) != m || header(first, parking.HeaderSourceTopic) != rt ||
		header(first, parking.HeaderSourcePartition) != "0" || header(first, parking.HeaderSourceOffset) != fmt.Sprint(at) ||
		header(first, parking.HeaderTries) != "1" || header(first, "correlation-id") != "corr-f-1" {
		t.Errorf("parked record: key %q headers %v", first.Key, first.Headers)
	}

	ps.send(pt, 0, m, purchase("p-1", 1, 100_000))
	waitReplies(t, ps.out, 1, []string{"p-1", "f-1"})
	r := ps.out.get("f-1")[0]
	if r.result == nil || r.result.Outcome != events.OutcomeApplied || r.clawback() != bridge.ClawbackID("p-1", 1) {
		t.Fatalf("refund f-1: %s %s, want APPLIED in slot 1", r.outcome(), r.detail())
	}
	if r.rec.Topic != topics.ResultTopic(rt) || r.result.Source.Topic != rt || r.result.Source.Partition != 0 || r.result.Source.Offset != at ||
		r.header(bridge.HeaderSourceTopic) != rt || r.header(bridge.HeaderSourceOffset) != fmt.Sprint(at) ||
		r.header(bridge.HeaderCorrelationID) != "corr-f-1" {
		t.Errorf("refund f-1 answered on %s from %+v, headers %v; want the original refund's reply", r.rec.Topic, r.result.Source, r.rec.Headers)
	}
	if n := ps.sim.Effects(bridge.ClawbackID("p-1", 1)); n != 1 {
		t.Errorf("clawback applied %d times, want 1", n)
	}
	if n := ps.sim.Effects(bridge.ClawbackID("p-1", 2)); n != 0 {
		t.Errorf("a second clawback slot filled (%d effects)", n)
	}
	if n := metricValue(ps.metrics.RefundsParked); n < 1 {
		t.Errorf("refunds_parked_total %v, want at least 1", n)
	}
	// The parked partition is committed past every parked record, once
	// the last came back.
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		var left []string
		for _, rec := range ps.parked.all() {
			if c := ps.committed(ps.topic, rec.Partition); c <= rec.Offset {
				left = append(left, fmt.Sprintf("%d/%d (committed %d)", rec.Partition, rec.Offset, c))
			}
		}
		if len(left) > 0 {
			return false, "parked records not committed: " + strings.Join(left, ", ")
		}
		return true, ""
	})
	if rs := ps.out.get("f-1"); len(rs) != 1 {
		t.Errorf("refund f-1 answered %d times, want once", len(rs))
	}
}

// A refund whose purchase never comes keeps coming back until
// --original-wait has passed, then is a retryable TRANSIENT_EXHAUSTED
// ORIGINAL_NOT_FOUND error event, so that replay --from-errors takes it.
func TestParkedRefundGivesUpRetryable(t *testing.T) {
	ps := newParkedStack(t, "giveup", 500*time.Millisecond, 100*time.Millisecond)
	rt := topics.RefundRedemption
	at := ps.send(rt, 1, sim.MemberID(3), refundOf("f-2", "p-never", 3, 1_000, time.Now()))
	waitReplies(t, ps.out, 1, []string{"f-2"})
	r := ps.out.get("f-2")[0]
	if r.outcome() != "error TRANSIENT_EXHAUSTED ORIGINAL_NOT_FOUND" || !r.err.Retryable {
		t.Fatalf("refund f-2: %s retryable %v, want a retryable TRANSIENT_EXHAUSTED ORIGINAL_NOT_FOUND", r.outcome(), r.err != nil && r.err.Retryable)
	}
	if r.rec.Topic != topics.ErrorTopic(rt) || r.err.Source.Topic != rt || r.err.Source.Partition != 1 || r.err.Source.Offset != at {
		t.Errorf("error event on %s from %+v; want the original refund's", r.rec.Topic, r.err.Source)
	}
	parked := len(ps.parked.all())
	if parked < 2 || !strings.Contains(r.detail(), fmt.Sprintf("looked %d times", parked+1)) || r.err.Attempts != int32(parked+1) {
		t.Errorf("parked %d times; detail %q attempts %d: want it to say it looked %d times", parked, r.detail(), r.err.Attempts, parked+1)
	}
	if n := metricValue(ps.metrics.RefundsGivenUp); n != 1 {
		t.Errorf("refunds_given_up_total %v, want 1", n)
	}
}

// A parked record whose parking headers are missing or malformed (written
// by hand, or by something else) is an error event naming its own
// position, and the pipeline goes on.
func TestMalformedParkedRecord(t *testing.T) {
	ps := newParkedStack(t, "badpark", 30*time.Second, 100*time.Millisecond)
	v, err := ps.codec.Encode(topics.RefundRedemption, refundOf("f-3", "p-3", 4, 1_000, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	good := parking.Park(ps.topic, &kgo.Record{Topic: topics.RefundRedemption, Key: []byte("k"), Value: v}, time.Now(), time.Now(), 1)
	var bad []int64
	bad = append(bad, ps.raw(&kgo.Record{Topic: ps.topic, Partition: 0, Key: []byte("k"), Value: v}))
	for _, h := range []struct{ k, v string }{{parking.HeaderTries, "x"}, {parking.HeaderSourceTopic, "elsewhere"},
		{parking.HeaderDue, "tomorrow"}, {parking.HeaderSourceOffset, strings.Repeat("9", 1000)}} {
		r := &kgo.Record{Topic: ps.topic, Partition: 0, Key: []byte("k"), Value: v}
		for _, x := range good.Headers {
			if x.Key == h.k {
				x.Value = []byte(h.v)
			}
			r.Headers = append(r.Headers, x)
		}
		bad = append(bad, ps.raw(r))
	}
	ps.send(topics.Purchase, 0, sim.MemberID(5), purchase("p-after", 5, 1_000))
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		if len(ps.out.get("p-after")) == 0 {
			return false, "purchase after the malformed parked records not answered"
		}
		for _, off := range bad {
			rs := ps.out.get(events.SourceID(ps.topic, 0, off))
			if len(rs) == 0 {
				return false, fmt.Sprintf("malformed parked record at %d not answered", off)
			}
			if rs[0].outcome() != "error INTERNAL "+bridge.ReasonParkedRecordInvalid || rs[0].rec.Topic != topics.ErrorTopic(topics.RefundRedemption) ||
				rs[0].err.Source.Topic != ps.topic || rs[0].err.Source.Offset != off {
				t.Fatalf("malformed parked record at %d: %s on %s from %+v", off, rs[0].outcome(), rs[0].rec.Topic, rs[0].err.Source)
			}
		}
		return true, ""
	})
	if rs := ps.out.get("f-3"); len(rs) != 0 {
		t.Errorf("a malformed parked record was handled as refund f-3: %s", rs[0].outcome())
	}
}

// metricValue reads a counter's value.
func metricValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// A parked refund's latency counts from when it was due, not from when
// the pipeline took it to wait out its back-off.
func TestUnparkedLatencyCountsFromDue(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.bridge(func(o *bridge.Options) { o.ParkedTopic = "latency.parked" })
	if r := s.handle(b, s.record(topics.Purchase, purchase("pl-1", 1, 100_000)), false); r.outcome() != string(events.OutcomeApplied) {
		t.Fatalf("purchase: %s", r.outcome())
	}
	const wait = time.Second
	now := time.Now()
	rec := parking.Park("latency.parked", s.record(topics.RefundRedemption, refundOf("pl-r", "pl-1", 1, 30_000, refundBase)), now, now.Add(wait), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := b.Handle(ctx, rec, pipeline.Meta{Assignment: 1})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(now); took < wait {
		t.Fatalf("handled after %s, before it was due", took)
	}
	r := s.decode(out[0])
	if r.result == nil || r.result.Outcome != events.OutcomeApplied {
		t.Fatalf("%s (%s), want APPLIED", r.outcome(), r.detail())
	}
	if r.result.LatencyMs >= wait.Milliseconds() {
		t.Errorf("latency %d ms: counted from when it was taken, not from when it was due (%s later)", r.result.LatencyMs, wait)
	}
}
