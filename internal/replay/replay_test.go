package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness is a Kafka cluster and srfake with the bridge's topics (2
// partitions each, named for the test) and a fake handler that records what
// it is given and answers with a result (or what answer says). The cluster
// is the real one realkafka.Seeds names, the topics deleted at the end, or
// kfake.
type harness struct {
	t       *testing.T
	topics  codec.Topics
	brokers []string
	cd      *codec.Codec
	cl      *kgo.Client // manual partitioner, no linger
	adm     *kadm.Client

	mu      sync.Mutex
	handled []*kgo.Record
	busy    map[string]bool // keys being handled
	overlap bool            // one key handled twice at once
	answer  func(*kgo.Record) *events.LoyaltyError
	block   chan struct{} // when set, every handler call waits for it (or ctx)
	started chan struct{} // receives a value as each handler call starts
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, busy: map[string]bool{}, topics: codec.Topics{Purchase: realkafka.Name(t, "purchase"),
		RefundRedemption: realkafka.Name(t, "refund"), MemberOnboarding: realkafka.Name(t, "onboard")}}
	e := testkit.StartEvents(t, testkit.EventsOptions{Topics: h.topics, Partitions: 2, Kafka: testkit.KafkaOptions{Real: true}})
	h.brokers, h.cd = e.Brokers, e.Codec
	h.cl = e.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	h.adm = kadm.NewClient(h.cl)
	return h
}

// createTopic makes a topic of one partition besides the bridge's, deleted
// at the end on a real cluster.
func (h *harness) createTopic(name string) {
	h.t.Helper()
	if seeds := realkafka.Seeds(); len(seeds) > 0 {
		realkafka.SeedTopics(h.t, seeds, 1, name)
		return
	}
	if _, err := h.adm.CreateTopic(context.Background(), 1, 1, nil, name); err != nil {
		h.t.Fatal(err)
	}
}

// purchase is the input record of a purchase, not yet produced.
func (h *harness) purchase(part int32, key, id string, ts time.Time) *kgo.Record {
	h.t.Helper()
	v, err := h.cd.Encode(h.topics.Purchase, &events.PurchaseCompleted{TransactionID: id, LoyaltyID: key,
		TransactionDate: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), Amount: 1000, Currency: "VND"})
	if err != nil {
		h.t.Fatal(err)
	}
	return &kgo.Record{Topic: h.topics.Purchase, Partition: part, Key: []byte(key), Value: v, Timestamp: ts}
}

// produce writes recs one batch each, so that timestamps are searchable
// record by record, and returns them with their offsets.
func (h *harness) produce(recs ...*kgo.Record) []*kgo.Record {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, r := range recs {
		if err := h.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			h.t.Fatal(err)
		}
	}
	return recs
}

func (h *harness) handle(ctx context.Context, rec *kgo.Record, m pipeline.Meta) ([]*kgo.Record, error) {
	if !m.Fresh {
		h.t.Error("a replayed record is not marked Fresh")
	}
	h.mu.Lock()
	k := string(rec.Key)
	if h.busy[k] {
		h.overlap = true
	}
	h.busy[k] = true
	h.handled = append(h.handled, rec)
	block, started, answer := h.block, h.started, h.answer
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.busy, k)
		h.mu.Unlock()
	}()
	if started != nil {
		started <- struct{}{}
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ev, err := h.cd.DecodeEvent(ctx, rec.Topic, rec.Value)
	if err != nil {
		return nil, err
	}
	if answer != nil {
		if e := answer(rec); e != nil {
			e.TransactionID, e.Source = ev.ID(), events.ErrorSource{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}
			v, err := h.cd.EncodeError(h.topics.ErrorTopic(rec.Topic), e)
			if err != nil {
				return nil, err
			}
			return []*kgo.Record{{Topic: h.topics.ErrorTopic(rec.Topic), Key: []byte(ev.ID()), Value: v, Headers: rec.Headers}}, nil
		}
	}
	v, err := h.cd.EncodeResult(h.topics.ResultTopic(rec.Topic), &events.LoyaltyResult{TransactionID: ev.ID(), EventType: ev.Type(),
		Outcome: events.OutcomeAlreadyApplied, ProcessedAt: time.Now(),
		Source: events.Source{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}})
	if err != nil {
		return nil, err
	}
	return []*kgo.Record{{Topic: h.topics.ResultTopic(rec.Topic), Key: []byte(ev.ID()), Value: v, Headers: rec.Headers}}, nil
}

func (h *harness) fallback(rec *kgo.Record, cause error) ([]*kgo.Record, error) {
	return nil, fmt.Errorf("fallback for %s/%d/%d: %w", rec.Topic, rec.Partition, rec.Offset, cause)
}

func (h *harness) replayer(mod func(*Options)) *Replayer {
	h.t.Helper()
	o := Options{Kafka: []kgo.Opt{kgo.SeedBrokers(h.brokers...)}, Codec: h.cd, Handle: h.handle, Fallback: h.fallback,
		MaxInFlight: 4, Inputs: h.topics.Inputs()}
	if mod != nil {
		mod(&o)
	}
	r, err := New(o)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(r.Close)
	return r
}

// positions of the records handled so far, in the order they started.
func (h *harness) positions() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, len(h.handled))
	for i, r := range h.handled {
		out[i] = events.SourceID(r.Topic, r.Partition, r.Offset)
	}
	return out
}

// endOffsets of topic, partition by partition.
func (h *harness) endOffsets(topic string) []int64 {
	h.t.Helper()
	l, err := h.adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		h.t.Fatal(err)
	}
	out := make([]int64, 2)
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestReplayRangesExactlyInKeyOrder(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	var recs []*kgo.Record
	for i := range 30 {
		recs = append(recs, h.purchase(int32(i%2), fmt.Sprintf("L-%d", i%3), fmt.Sprintf("T-%d", i), time.Time{}))
	}
	h.produce(recs...)
	r := h.replayer(nil)
	ctx := ctxT(t)

	ranges, err := r.OffsetRanges(ctx, topics.Purchase, 0, 3, 11)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) != 1 || ranges[0] != (Range{topics.Purchase, 0, 3, 11}) {
		t.Fatalf("ranges %v", ranges)
	}
	var progress []int
	r.o.Progress = func(p Progress) { progress = append(progress, p.Done, p.Planned) }
	sum, err := r.Ranges(ctx, ranges)
	if err != nil {
		t.Fatal(err)
	}
	got := h.positions()
	if len(got) != 8 || sum.Records != 8 || sum.Outcomes["ALREADY_APPLIED"] != 8 || !sum.OK() {
		t.Fatalf("handled %v\n%s", got, sum.Table())
	}
	seen := map[string]bool{}
	for _, p := range got {
		seen[p] = true
	}
	for off := 3; off < 11; off++ {
		if !seen[events.SourceID(topics.Purchase, 0, int64(off))] {
			t.Errorf("offset %d not replayed: %v", off, got)
		}
	}
	if n := len(progress); n == 0 || progress[n-2] != 8 || progress[n-1] != 8 {
		t.Errorf("progress %v", progress)
	}
	// One key's records started in offset order and never overlapped.
	last := map[string]int64{}
	h.mu.Lock()
	for _, rec := range h.handled {
		if o, ok := last[string(rec.Key)]; ok && rec.Offset < o {
			t.Errorf("key %s: offset %d after %d", rec.Key, rec.Offset, o)
		}
		last[string(rec.Key)] = rec.Offset
	}
	overlap := h.overlap
	h.mu.Unlock()
	if overlap {
		t.Error("records of one key ran at the same time")
	}
	if ends := h.endOffsets(topics.ResultTopic(topics.Purchase)); ends[0]+ends[1] != 8 {
		t.Errorf("outputs produced: %v", ends)
	}

	// An open range ends where the partition ended when it was planned.
	ranges, err = r.OffsetRanges(ctx, topics.Purchase, -1, 10, -1)
	if err != nil {
		t.Fatal(err)
	}
	h.produce(h.purchase(0, "L-9", "T-late", time.Time{}))
	before := len(h.positions())
	if sum, err = r.Ranges(ctx, ranges); err != nil {
		t.Fatal(err)
	}
	if n := len(h.positions()) - before; n != 10 || sum.Records != 10 || sum.Planned != 10 {
		t.Errorf("open range from 10 of two partitions of 15: %d handled\n%s", n, sum.Table())
	}

	if _, err := r.OffsetRanges(ctx, topics.Purchase, 5, 0, -1); err == nil || !strings.Contains(err.Error(), "no partition 5") {
		t.Errorf("missing partition: %v", err)
	}
	if _, err := r.OffsetRanges(ctx, realkafka.Name(t, "no.such.topic"), 0, 0, -1); err == nil {
		t.Error("missing topic accepted")
	}
}

func TestReplayBelowTheLogStartIsRefused(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	for i := range 5 {
		h.produce(h.purchase(0, "L-1", fmt.Sprintf("T-%d", i), time.Time{}))
	}
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topics.Purchase, Partition: 0, At: 3})
	if _, err := h.adm.DeleteRecords(context.Background(), del); err != nil {
		t.Fatal(err)
	}
	r := h.replayer(nil)
	_, err := r.OffsetRanges(ctxT(t), topics.Purchase, 0, 1, -1)
	var re *RequestError
	if !errors.As(err, &re) || re.Flag != "--from-offset" ||
		err.Error() != "--from-offset 1 is below the log start of "+topics.Purchase+"/0, which holds offsets 3 to 4 (earlier records were deleted by retention)" {
		t.Fatalf("offset below the log start: %v", err)
	}
}

// An offset range that cannot match is a RequestError naming the flag and
// the partition's offsets, not an empty replay.
func TestOffsetRangesBeyondTheEnd(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	for i := range 5 {
		h.produce(h.purchase(1, "L-1", fmt.Sprintf("T-%d", i), time.Time{}))
	}
	r := h.replayer(nil)
	for _, tc := range []struct {
		p        int32
		from, to int64
		flag     string
		want     string
	}{
		{1, 5000, 6000, "--from-offset", "--from-offset 5000 is beyond the end of " + topics.Purchase + "/1, which holds offsets 0 to 4"},
		{1, 5, -1, "--from-offset", "--from-offset 5 is beyond the end of " + topics.Purchase + "/1, which holds offsets 0 to 4"},
		{1, 2, 6, "--to-offset", "--to-offset 6 is beyond the end of " + topics.Purchase + "/1, which holds offsets 0 to 4 (leave --to-offset out to replay to the end)"},
		{0, 0, -1, "--from-offset", "--from-offset 0 is beyond the end of " + topics.Purchase + "/0, which holds no records (its next offset is 0)"},
		{2, 0, -1, "--partition", "--partition 2: topic " + topics.Purchase + " has no partition 2 (it has 2: 0 to 1)"},
	} {
		_, err := r.OffsetRanges(ctxT(t), topics.Purchase, tc.p, tc.from, tc.to)
		var re *RequestError
		if !errors.As(err, &re) || re.Flag != tc.flag || err.Error() != tc.want {
			t.Errorf("partition %d [%d, %d): %v\nwant %s", tc.p, tc.from, tc.to, err, tc.want)
		}
	}
	if got, err := r.OffsetRanges(ctxT(t), topics.Purchase, 1, 2, 5); err != nil || fmt.Sprint(got) != fmt.Sprint([]Range{{topics.Purchase, 1, 2, 5}}) {
		t.Errorf("up to the end: %v %v", got, err)
	}
}

func TestReplayTimeRanges(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	// A day ago: a real broker deletes records older than its retention
	// (7 days by default) by their timestamps, and a fixed date ages past it.
	t0 := time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Hour)
	at := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }
	for i := range 10 {
		h.produce(h.purchase(1, "L-1", fmt.Sprintf("T-%d", i), t0.Add(time.Duration(i)*time.Minute)))
	}
	r := h.replayer(nil)
	c := ctxT(t)
	for _, tc := range []struct {
		name         string
		p            int32
		since, until time.Time
		want         []Range
	}{
		{"window", 1, t0.Add(3 * time.Minute), t0.Add(7 * time.Minute), []Range{{topics.Purchase, 1, 3, 7}}},
		{"between records", 1, t0.Add(150 * time.Second), t0.Add(270 * time.Second), []Range{{topics.Purchase, 1, 3, 5}}},
		{"open end, every partition", -1, t0.Add(8 * time.Minute), time.Time{}, []Range{{topics.Purchase, 1, 8, 10}}},
		{"before the first", 1, t0.Add(-time.Hour), t0.Add(time.Minute), []Range{{topics.Purchase, 1, 0, 1}}},
		{"between two records", 1, t0.Add(61 * time.Second), t0.Add(62 * time.Second), nil},
	} {
		got, err := r.TimeRanges(c, topics.Purchase, tc.p, tc.since, tc.until)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := r.TimeRanges(c, topics.Purchase, 1, t0, t0); err == nil {
		t.Error("empty window accepted")
	}
	// Windows that cannot match say so, naming the flag and when the
	// records were written. The clock is the harness's: a day after t0.
	now := t0.Add(24 * time.Hour)
	r = h.replayer(func(o *Options) { o.Now = func() time.Time { return now } })
	span := "the records of " + topics.Purchase + " were written from " + at(0) + " to " + at(9*time.Minute)
	for _, tc := range []struct {
		name         string
		p            int32
		since, until time.Time
		flag, want   string
	}{
		{"a mistyped year", -1, t0.AddDate(1, 0, 0), time.Time{}, "--since",
			"--since " + t0.AddDate(1, 0, 0).Format(time.RFC3339) + " is in the future (now " + at(24*time.Hour) + "): " + span},
		{"after the last record", -1, t0.Add(time.Hour), time.Time{}, "--since", "--since " + at(time.Hour) + " is after the last record: " + span},
		{"before the first record", -1, t0.Add(-2 * time.Hour), t0.Add(-time.Hour), "--until",
			"--until " + at(-time.Hour) + " is not after the first record: " + span},
		{"an empty partition", 0, t0, time.Time{}, "--since", "--since " + at(0) + ": " + topics.Purchase + "/0 holds no records"},
	} {
		_, err := r.TimeRanges(c, topics.Purchase, tc.p, tc.since, tc.until)
		var re *RequestError
		if !errors.As(err, &re) || re.Flag != tc.flag || err.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.want)
		}
	}
	ranges, _ := r.TimeRanges(c, topics.Purchase, 1, t0.Add(3*time.Minute), t0.Add(7*time.Minute))
	sum, err := r.Ranges(c, ranges)
	if err != nil || sum.Records != 4 {
		t.Fatalf("%v\n%s", err, sum.Table())
	}
}

// A range over a transactional topic ends although its last offsets are
// transaction markers, and aborted records are not replayed.
func TestReplayEndsOnTransactionMarkers(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	txn, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...), kgo.TransactionalID(realkafka.Name(t, "upstream")),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	c := ctxT(t)
	for i, commit := range []bool{true, false, true} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(c, h.purchase(0, "L-1", fmt.Sprintf("T-%d", i), time.Time{})).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(c, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	h.waitStable(t, topics.Purchase, 0, 6)
	r := h.replayer(nil)
	ranges, err := r.OffsetRanges(c, topics.Purchase, 0, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) != 1 || ranges[0].To != 6 {
		t.Fatalf("ranges %v (three records, three markers)", ranges)
	}
	sum, err := r.Ranges(c, ranges)
	if err != nil {
		t.Fatal(err)
	}
	got := h.positions()
	if fmt.Sprint(got) != fmt.Sprintf("[%s/0/0 %s/0/4]", topics.Purchase, topics.Purchase) || sum.Planned != 2 {
		t.Errorf("replayed %v (want the two committed records)\n%s", got, sum.Table())
	}
}

// errorEvent produces an error event for the input record in (already
// produced) onto its error topic.
func (h *harness) errorEvent(in *kgo.Record, cat events.Category, retryable, withOriginal bool, at time.Time) {
	h.t.Helper()
	var orig *kgo.Record
	if withOriginal {
		orig = in
	}
	h.claim(h.topics.ErrorTopic(in.Topic), events.ErrorSource{Topic: in.Topic, Partition: in.Partition, Offset: in.Offset, Timestamp: in.Timestamp},
		orig, cat, retryable, at)
}

// claim produces an error event onto errorTopic naming src, carrying
// orig's key and value as its original unless orig is nil, and returns it.
func (h *harness) claim(errorTopic string, src events.ErrorSource, orig *kgo.Record, cat events.Category, retryable bool, at time.Time) *kgo.Record {
	h.t.Helper()
	e := &events.LoyaltyError{TransactionID: "x", Category: cat, Retryable: retryable, Detail: "test", Attempts: 1,
		Source: src, ProcessedAt: at}
	key := "?"
	if orig != nil {
		e.OriginalKey, e.OriginalValue, key = orig.Key, orig.Value, string(orig.Key)
	}
	v, err := h.cd.EncodeError(errorTopic, e)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.produce(&kgo.Record{Topic: errorTopic, Partition: int32(len(v) % 2), Key: []byte("x"), Value: v,
		Headers: []kgo.RecordHeader{{Key: bridge.HeaderCorrelationID, Value: []byte("corr-" + key)},
			{Key: bridge.HeaderSourceTopic, Value: []byte(src.Topic)}}})[0]
}

func TestReplayFromErrors(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	now := time.Now()
	var in []*kgo.Record
	for i := range 8 {
		rec := h.purchase(int32(i%2), fmt.Sprintf("L-%d", i), fmt.Sprintf("T-%d", i), time.Time{})
		rec.Headers = []kgo.RecordHeader{{Key: bridge.HeaderCorrelationID, Value: fmt.Appendf(nil, "src-L-%d", i)}}
		in = append(in, rec)
	}
	h.produce(in...)
	// 0, 3: originals carried (checked against the source, replayed from
	// it); 3 failed twice (a replay that failed again).
	h.errorEvent(in[3], events.CategoryTransientExhausted, true, true, now)
	h.errorEvent(in[0], events.CategoryTransientExhausted, true, true, now)
	h.errorEvent(in[3], events.CategoryTransientExhausted, true, true, now)
	// 2, 1: PII-strict, read from the source; 1 is gone (log start moved).
	h.errorEvent(in[2], events.CategoryAuth, true, false, now)
	h.errorEvent(in[1], events.CategoryTransientExhausted, true, false, now)
	// 4: permanent, not chosen by default; 5: before --since.
	h.errorEvent(in[4], events.CategoryValidation, false, true, now)
	h.errorEvent(in[5], events.CategoryTransientExhausted, true, true, now.Add(-48*time.Hour))
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topics.Purchase, Partition: in[1].Partition, At: in[1].Offset + 1})
	if _, err := h.adm.DeleteRecords(context.Background(), del); err != nil {
		t.Fatal(err)
	}

	r := h.replayer(nil)
	c := ctxT(t)
	sum, err := r.FromErrors(c, topics.ErrorTopic(topics.Purchase), ErrorFilter{Since: now.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{events.SourceID(topics.Purchase, 0, in[0].Offset), events.SourceID(topics.Purchase, 0, in[2].Offset),
		events.SourceID(topics.Purchase, 1, in[3].Offset)}
	got := h.positions()
	if fmt.Sprint(slices.Sorted(slices.Values(got))) != fmt.Sprint(slices.Sorted(slices.Values(want))) {
		t.Errorf("replayed %v, want %v", got, want)
	}
	if sum.OK() || len(sum.NotReplayable) != 1 || !strings.Contains(sum.NotReplayable[0], "no longer retained") ||
		sum.FromSource != 3 || sum.SourceGone != 1 || sum.FromErrorOriginals+sum.Mismatched+sum.Refused != 0 ||
		!strings.Contains(sum.Table(), "not replayable: "+events.SourceID(topics.Purchase, in[1].Partition, in[1].Offset)) {
		t.Errorf("summary:\n%s", sum.Table())
	}
	h.mu.Lock()
	for _, rec := range h.handled {
		orig := in[rec.Offset*2+int64(rec.Partition)] // produced alternately to 0 and 1
		if !bytes.Equal(rec.Value, orig.Value) || !bytes.Equal(rec.Key, orig.Key) {
			t.Errorf("%s/%d/%d: not the original record", rec.Topic, rec.Partition, rec.Offset)
		}
		if rec.Offset == in[0].Offset && rec.Partition == 0 &&
			(len(rec.Headers) != 1 || string(rec.Headers[0].Value) != "src-L-0") {
			t.Errorf("not the source record's headers: %v", rec.Headers)
		}
	}
	h.handled = nil
	h.mu.Unlock()

	// Naming categories replaces the retryable default.
	sum, err = r.FromErrors(c, topics.ErrorTopic(topics.Purchase), ErrorFilter{Categories: []events.Category{events.CategoryValidation}})
	if err != nil || sum.Records != 1 || !sum.OK() {
		t.Fatalf("%v\n%s", err, sum.Table())
	}
}

func sourceOf(r *kgo.Record) events.ErrorSource {
	return events.ErrorSource{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
}

// An original carried in an error event is checked against the record at
// its source position: one that differs (key or value) keeps both from
// being replayed, whatever other error events say; it is counted and named
// by position only, and the rest goes on.
func TestReplayFromErrorsChecksOriginals(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	now := time.Now()
	in := h.produce(h.purchase(0, "L-0", "T-0", time.Time{}), h.purchase(0, "L-1", "T-1", time.Time{}),
		h.purchase(1, "L-2", "T-2", time.Time{}), h.purchase(1, "L-3", "T-3", time.Time{}), h.purchase(1, "L-4", "T-4", time.Time{}))
	forged := h.purchase(0, "L-forged", "T-forged", time.Time{})
	et, cat := topics.ErrorTopic(topics.Purchase), events.CategoryTransientExhausted
	bad := []*kgo.Record{h.claim(et, sourceOf(in[0]), forged, cat, true, now)}
	h.claim(et, sourceOf(in[1]), in[1], cat, true, now) // a true copy, then a forged one
	bad = append(bad, h.claim(et, sourceOf(in[1]), forged, cat, true, now))
	h.claim(et, sourceOf(in[2]), in[2], cat, true, now)
	h.claim(et, sourceOf(in[3]), nil, cat, true, now)
	bad = append(bad, h.claim(et, sourceOf(in[4]), &kgo.Record{Key: []byte("L-other"), Value: in[4].Value}, cat, true, now))

	sum, err := h.replayer(nil).FromErrors(ctxT(t), et, ErrorFilter{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{events.SourceID(topics.Purchase, 1, in[2].Offset), events.SourceID(topics.Purchase, 1, in[3].Offset)}
	if got := slices.Sorted(slices.Values(h.positions())); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("replayed %v, want %v", got, want)
	}
	tab := sum.Table()
	if sum.OK() || sum.Mismatched != 3 || sum.FromSource != 2 || sum.Records != 2 || len(sum.NotReplayable) != 3 ||
		!regexp.MustCompile(`(?m)^`+LabelMismatched+` +3$`).MatchString(tab) {
		t.Errorf("summary:\n%s", tab)
	}
	for i, src := range []*kgo.Record{in[0], in[1], in[4]} {
		line := fmt.Sprintf("error event %s/%d/%d: its original differs from the source record %s/%d/%d (neither replayed)",
			bad[i].Topic, bad[i].Partition, bad[i].Offset, src.Topic, src.Partition, src.Offset)
		if !strings.Contains(tab, line) {
			t.Errorf("no line %q:\n%s", line, tab)
		}
	}
	for _, pii := range []string{"L-forged", "T-forged", "L-other", "L-0", "T-0"} {
		if strings.Contains(tab, pii) {
			t.Errorf("the summary names %s:\n%s", pii, tab)
		}
	}
}

// A record the source no longer holds (below the log start, or no record
// at its offset) is replayed from the original its error events carry only
// with TrustErrorOriginals, and only if they agree on it.
func TestReplayFromErrorsSourceGone(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	now := time.Now()
	in := h.produce(h.purchase(0, "L-0", "T-0", time.Time{}), h.purchase(0, "L-1", "T-1", time.Time{}),
		h.purchase(0, "L-2", "T-2", time.Time{}))
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topics.Purchase, Partition: 0, At: in[2].Offset + 1})
	if _, err := h.adm.DeleteRecords(context.Background(), del); err != nil {
		t.Fatal(err)
	}
	// Partition 1: a committed record at 0, its transaction marker at 1.
	txn, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...), kgo.TransactionalID(realkafka.Name(t, "upstream")),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	c := ctxT(t)
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(c, h.purchase(1, "L-3", "T-3", time.Time{})).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(c, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	h.waitStable(t, topics.Purchase, 1, 2)
	marker := events.ErrorSource{Topic: topics.Purchase, Partition: 1, Offset: 1}

	et, cat := topics.ErrorTopic(topics.Purchase), events.CategoryTransientExhausted
	h.claim(et, sourceOf(in[0]), in[0], cat, true, now)
	h.claim(et, sourceOf(in[1]), nil, cat, true, now)
	h.claim(et, sourceOf(in[2]), in[2], cat, true, now) // two error events that disagree
	h.claim(et, sourceOf(in[2]), h.purchase(0, "L-2", "T-forged", time.Time{}), cat, true, now)
	atMarker := h.purchase(1, "L-m", "T-m", time.Time{})
	h.claim(et, marker, atMarker, cat, true, now)

	sum, err := h.replayer(nil).FromErrors(c, et, ErrorFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(h.positions()); n != 0 || sum.OK() || sum.SourceGone != 4 || sum.Mismatched != 0 || sum.FromErrorOriginals != 0 ||
		!strings.Contains(sum.Table(), "not replayable: "+topics.Purchase+"/1/1 (not found at its position") ||
		strings.Count(sum.Table(), "not used unless error-event originals are trusted") != 3 {
		t.Fatalf("%d replayed without trusting error originals\n%s", n, sum.Table())
	}

	sum, err = h.replayer(func(o *Options) { o.TrustErrorOriginals = true }).FromErrors(c, et, ErrorFilter{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{events.SourceID(topics.Purchase, 0, in[0].Offset), topics.Purchase + "/1/1"}
	if got := slices.Sorted(slices.Values(h.positions())); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("replayed %v, want %v", got, want)
	}
	if sum.OK() || sum.FromErrorOriginals != 2 || sum.SourceGone != 1 || sum.Mismatched != 1 || sum.Records != 2 ||
		!strings.Contains(sum.Table(), "its original differs from the original of error event") {
		t.Errorf("summary:\n%s", sum.Table())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, rec := range h.handled {
		orig := in[0]
		if rec.Partition == 1 {
			orig = atMarker
		}
		if !bytes.Equal(rec.Key, orig.Key) || !bytes.Equal(rec.Value, orig.Value) ||
			len(rec.Headers) != 1 || string(rec.Headers[0].Value) != "corr-"+string(orig.Key) {
			t.Errorf("%s/%d/%d: not the carried original with its error event's trace headers", rec.Topic, rec.Partition, rec.Offset)
		}
	}
}

// An error event naming a position outside the input topic of its error
// topic is refused: nothing about another topic is asked or read, and the
// rest goes on. A replay of a topic that is not an input's error topic
// does not start.
func TestReplayFromErrorsRefusesOtherPositions(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	now := time.Now()
	c := ctxT(t)
	shadow := realkafka.Name(t, "shadow")
	h.createTopic(shadow)
	sh := h.purchase(0, "L-s", "T-s", time.Time{})
	sh.Topic = shadow
	rr := h.purchase(0, "L-r", "T-r", time.Time{})
	rr.Topic = topics.RefundRedemption
	in := h.produce(h.purchase(0, "L-0", "T-0", time.Time{}), sh, rr)
	ids := map[[16]byte]string{}
	td, err := h.adm.ListTopics(c, shadow, topics.RefundRedemption)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range td {
		ids[d.ID] = d.Topic
	}

	et, cat := topics.ErrorTopic(topics.Purchase), events.CategoryTransientExhausted
	claims := []struct {
		src  events.ErrorSource
		orig *kgo.Record
		why  string
	}{
		{sourceOf(in[1]), in[1], "not a position of " + topics.Purchase},
		{sourceOf(in[2]), nil, "not a position of " + topics.Purchase},
		{events.ErrorSource{Topic: topics.Purchase, Partition: 7}, in[0], topics.Purchase + " has no partition 7"},
		{events.ErrorSource{Topic: topics.Purchase, Partition: 0, Offset: 99}, in[0], "beyond the end (1) of its partition"},
		{events.ErrorSource{Topic: topics.Purchase, Partition: 0, Offset: -1}, in[0], "not a position of " + topics.Purchase},
	}
	var evs []*kgo.Record
	for _, cl := range claims {
		evs = append(evs, h.claim(et, cl.src, cl.orig, cat, true, now))
	}
	h.claim(et, sourceOf(in[0]), nil, cat, true, now)

	var recorded realkafka.Requests
	sum, err := h.replayer(func(o *Options) { o.Kafka = append(o.Kafka, recorded.Opt()) }).FromErrors(c, et, ErrorFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.positions(); fmt.Sprint(got) != fmt.Sprintf("[%s/0/0]", topics.Purchase) {
		t.Errorf("replayed %v", got)
	}
	tab := sum.Table()
	if sum.OK() || sum.Refused != len(claims) || sum.FromSource != 1 || sum.Records != 1 {
		t.Errorf("summary:\n%s", tab)
	}
	for i, cl := range claims {
		line := fmt.Sprintf("error event %s/%d/%d names %q/%d/%d: %s (refused, nothing read)", evs[i].Topic, evs[i].Partition, evs[i].Offset,
			cl.src.Topic, cl.src.Partition, cl.src.Offset, cl.why)
		if !strings.Contains(tab, line) {
			t.Errorf("no line %q:\n%s", line, tab)
		}
	}
	// The requests of the replay's clients naming a topic, by topic (fetch
	// names topics by id in recent versions).
	seen, err := recorded.Seen()
	if err != nil {
		t.Fatal(err)
	}
	asked := map[string]int{}
	for _, req := range seen {
		switch r := req.(type) {
		case *kmsg.MetadataRequest:
			for _, t := range r.Topics {
				if t.Topic != nil {
					asked[*t.Topic]++
				}
			}
		case *kmsg.ListOffsetsRequest:
			for _, t := range r.Topics {
				asked[t.Topic]++
			}
		case *kmsg.FetchRequest:
			for _, t := range r.Topics {
				asked[t.Topic+ids[t.TopicID]]++
			}
		}
	}
	if asked[shadow] != 0 || asked[topics.RefundRedemption] != 0 || asked[topics.Purchase] == 0 {
		t.Errorf("requests naming topics: %v", asked)
	}

	for _, tc := range []struct {
		inputs []string
		topic  string
	}{
		{topics.Inputs(), topics.ResultTopic(topics.Purchase)},
		{topics.Inputs(), shadow + ".error"},
		{nil, et},
	} {
		r := h.replayer(func(o *Options) { o.Inputs = tc.inputs })
		if _, err := r.FromErrors(c, tc.topic, ErrorFilter{}); err == nil || !strings.Contains(err.Error(), "not the error topic of an input topic") {
			t.Errorf("FromErrors(%s) with inputs %v: %v", tc.topic, tc.inputs, err)
		}
	}
}

func TestReplayDryRunCallsNothing(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	h.produce(h.purchase(0, "L-1", "T-1", time.Time{}),
		&kgo.Record{Topic: topics.Purchase, Partition: 0, Key: []byte("L-2"), Value: []byte{0, 0, 0, 0, 1, 2}})
	bad, err := h.cd.Encode(topics.Purchase, &events.PurchaseCompleted{TransactionID: "T-3", LoyaltyID: "L-3", Amount: -1})
	if err != nil {
		t.Fatal(err)
	}
	h.produce(&kgo.Record{Topic: topics.Purchase, Partition: 0, Key: []byte("L-3"), Value: bad})
	var out bytes.Buffer
	r := h.replayer(func(o *Options) { o.DryRun, o.Handle, o.Fallback, o.Out = true, nil, nil, &out })
	c := ctxT(t)
	ranges, err := r.OffsetRanges(c, topics.Purchase, 0, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := r.Ranges(c, ranges)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.positions()) != 0 {
		t.Error("a dry run called the handler")
	}
	if sum.Outcomes["would replay PurchaseCompleted"] != 1 || sum.Outcomes["would fail DECODE"] != 1 ||
		sum.Outcomes["would fail VALIDATION"] != 1 || !sum.OK() {
		t.Errorf("summary:\n%s", sum.Table())
	}
	if !strings.Contains(out.String(), "tx=T-1 PurchaseCompleted: would call lookup-transaction (guard), then point-accrual") ||
		strings.Count(out.String(), "\n") != 3 {
		t.Errorf("dry run lines:\n%s", out.String())
	}
	if ends := h.endOffsets(topics.ResultTopic(topics.Purchase)); ends[0]+ends[1] != 0 {
		t.Error("a dry run produced outputs")
	}
}

func TestReplayRetryableOutcomesAreNotOK(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	h.produce(h.purchase(0, "L-1", "T-1", time.Time{}), h.purchase(0, "L-2", "T-2", time.Time{}))
	h.answer = func(rec *kgo.Record) *events.LoyaltyError {
		if string(rec.Key) == "L-1" {
			return &events.LoyaltyError{Category: events.CategoryTransientExhausted, Retryable: true, ProcessedAt: time.Now()}
		}
		return &events.LoyaltyError{Category: events.CategoryBusiness, ProcessedAt: time.Now()}
	}
	r := h.replayer(nil)
	c := ctxT(t)
	sum, err := r.Ranges(c, []Range{{topics.Purchase, 0, 0, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.OK() || sum.Retry != 1 || sum.Outcomes["error TRANSIENT_EXHAUSTED"] != 1 || sum.Outcomes["error BUSINESS"] != 1 ||
		!strings.Contains(sum.Table(), "still failing") {
		t.Errorf("summary:\n%s", sum.Table())
	}
}

func TestReplayRateBoundsStarts(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	for i := range 6 {
		h.produce(h.purchase(0, fmt.Sprintf("L-%d", i), fmt.Sprintf("T-%d", i), time.Time{}))
	}
	r := h.replayer(func(o *Options) { o.Rate = 20 })
	start := time.Now()
	sum, err := r.Ranges(ctxT(t), []Range{{topics.Purchase, 0, 0, 6}})
	if err != nil || sum.Records != 6 {
		t.Fatal(err)
	}
	// Burst 1: the 6th start is 5 intervals of 50ms after the first.
	if el := time.Since(start); el < 240*time.Millisecond {
		t.Errorf("6 records at 20/s took %v", el)
	}
}

// Interrupted: nothing more starts, the records in flight are abandoned
// after the drain timeout, and the summary says the replay is incomplete.
func TestReplayInterrupted(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	for i := range 10 {
		h.produce(h.purchase(0, fmt.Sprintf("L-%d", i), fmt.Sprintf("T-%d", i), time.Time{}))
	}
	h.block, h.started = make(chan struct{}), make(chan struct{}, 10)
	r := h.replayer(func(o *Options) { o.MaxInFlight, o.DrainTimeout = 2, 50*time.Millisecond })
	c, cancel := context.WithCancel(ctxT(t))
	errc := make(chan error, 1)
	var sum *Summary
	go func() {
		var err error
		sum, err = r.Ranges(c, []Range{{topics.Purchase, 0, 0, 10}})
		errc <- err
	}()
	for range 2 {
		select {
		case <-h.started:
		case <-time.After(10 * time.Second):
			t.Fatal("handlers did not start")
		}
	}
	cancel()
	var err error
	select {
	case err = <-errc:
	case <-time.After(10 * time.Second):
		t.Fatal("replay did not stop")
	}
	if !errors.Is(err, context.Canceled) || sum.OK() || !sum.Interrupted || sum.Records != 0 ||
		!strings.Contains(sum.Table(), "interrupted: 10 of 10") {
		t.Errorf("%v\n%s", err, sum.Table())
	}
	if n := len(h.positions()); n != 2 {
		t.Errorf("%d records started after the interruption", n-2)
	}
}

func TestReplayPartitionModeIsSerial(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	for i := range 6 {
		h.produce(h.purchase(0, fmt.Sprintf("L-%d", i), fmt.Sprintf("T-%d", i), time.Time{}))
	}
	r := h.replayer(func(o *Options) { o.Mode = ordering.Partition; o.MaxInFlight = 8 })
	if _, err := r.Ranges(ctxT(t), []Range{{topics.Purchase, 0, 0, 6}}); err != nil {
		t.Fatal(err)
	}
	want := []string{}
	for i := range 6 {
		want = append(want, events.SourceID(topics.Purchase, 0, int64(i)))
	}
	if got := h.positions(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("partition mode order %v", got)
	}
}

func TestReplayNewChecksOptions(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("no codec accepted")
	}
	if _, err := New(Options{Codec: &codec.Codec{}}); err == nil {
		t.Error("no handler outside a dry run accepted")
	}
}

func TestReplayErrorFilter(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	transient := &events.LoyaltyError{Category: events.CategoryTransientExhausted, Retryable: true, ProcessedAt: now}
	validation := &events.LoyaltyError{Category: events.CategoryValidation, ProcessedAt: now}
	for _, tc := range []struct {
		name string
		f    ErrorFilter
		e    *events.LoyaltyError
		want bool
	}{
		{"default takes retryable", ErrorFilter{}, transient, true},
		{"default skips permanent", ErrorFilter{}, validation, false},
		{"category chosen", ErrorFilter{Categories: []events.Category{events.CategoryValidation}}, validation, true},
		{"category not chosen", ErrorFilter{Categories: []events.Category{events.CategoryValidation}}, transient, false},
		{"before since", ErrorFilter{Since: now.Add(time.Minute)}, transient, false},
		{"after since", ErrorFilter{Since: now.Add(-time.Minute)}, transient, true},
	} {
		if got := tc.f.match(tc.e); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReplaySummary(t *testing.T) {
	s := &Summary{Planned: 3, Records: 3, Outcomes: map[string]int{"APPLIED": 2, "ALREADY_APPLIED": 1}}
	if !s.OK() {
		t.Fatal("clean summary not OK")
	}
	tab := s.Table()
	if !strings.Contains(tab, "ALREADY_APPLIED") || !strings.Contains(tab, "total") {
		t.Fatalf("table:\n%s", tab)
	}
	for i := range maxListed + 2 {
		s.NotReplayable = append(s.NotReplayable, fmt.Sprintf("t/0/%d (gone)", i))
	}
	if s.OK() || !strings.Contains(s.Table(), "not replayable: t/0/1 (gone)") || !strings.Contains(s.Table(), "and 2 more") {
		t.Fatalf("records that could not be replayed are not reported:\n%s", s.Table())
	}
}

func TestReplayCallsNamesEveryType(t *testing.T) {
	for _, typ := range events.EventTypes() {
		if strings.Contains(calls(typ), "unknown") {
			t.Errorf("%s has no calls", typ)
		}
	}
}

// While no record finishes, Progress is still called on every tick with
// what WaitingFor says; MaxWait gives up, abandoning the records in
// flight, and the summary says to replay later.
func TestTicksAndMaxWait(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	for i := range 3 {
		h.produce(h.purchase(0, fmt.Sprintf("L-%d", i), fmt.Sprintf("T-%d", i), time.Time{}))
	}
	h.block = make(chan struct{}) // never closed: the partner never answers
	var ticks []Progress
	r := h.replayer(func(o *Options) {
		o.Tick, o.MaxWait = 10*time.Millisecond, 100*time.Millisecond
		o.WaitingFor = func(time.Time) (string, bool) { return "circuit open since 10:00:00", true }
		o.Progress = func(p Progress) {
			if p.Tick {
				ticks = append(ticks, p)
			}
		}
	})
	ranges, err := r.OffsetRanges(ctxT(t), topics.Purchase, 0, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := r.Ranges(ctxT(t), ranges)
	if err != nil {
		t.Fatal(err)
	}
	if sum.OK() || sum.Interrupted || sum.Records != 0 || sum.Planned != 3 ||
		!strings.HasPrefix(sum.GaveUp, "no record finished for ") || !strings.HasSuffix(sum.GaveUp, "(--max-wait 100ms): circuit open since 10:00:00") {
		t.Fatalf("gave up %q\n%s", sum.GaveUp, sum.Table())
	}
	if !strings.Contains(sum.Table(), "still failing, replay later: 0 of 3 planned records replayed, 3 not finished") {
		t.Errorf("table:\n%s", sum.Table())
	}
	if len(ticks) < 2 {
		t.Fatalf("%d ticks", len(ticks))
	}
	for _, p := range ticks {
		if p.Done != 0 || p.Planned != 3 || p.Waiting != "circuit open since 10:00:00" {
			t.Errorf("tick %+v", p)
		}
	}
	if last := ticks[len(ticks)-1]; !strings.HasPrefix(last.Note(), "no record finished for ") || !strings.HasSuffix(last.Note(), ": circuit open since 10:00:00") {
		t.Errorf("note %q", last.Note())
	}
}

// FailFast gives up at the first record that ends in a retryable error
// again, or as soon as WaitingFor says the partner is held.
func TestFailFast(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	for i := range 6 {
		h.produce(h.purchase(0, "L-1", fmt.Sprintf("T-%d", i), time.Time{})) // one key: one at a time
	}
	h.answer = func(rec *kgo.Record) *events.LoyaltyError {
		if rec.Offset == 1 {
			return &events.LoyaltyError{Category: events.CategoryTransientExhausted, Retryable: true, Detail: "503", Attempts: 3}
		}
		return nil
	}
	r := h.replayer(func(o *Options) { o.FailFast, o.Tick = true, 10*time.Millisecond })
	ranges, err := r.OffsetRanges(ctxT(t), topics.Purchase, 0, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := r.Ranges(ctxT(t), ranges)
	if err != nil || sum.Records != 2 || sum.Retry != 1 || sum.GaveUp != "a record ended in a retryable error again (error TRANSIENT_EXHAUSTED), and --fail-fast" {
		t.Fatalf("%v gave up %q\n%s", err, sum.GaveUp, sum.Table())
	}

	held := false
	h.answer = nil
	r = h.replayer(func(o *Options) {
		o.FailFast, o.Tick = true, 10*time.Millisecond
		o.WaitingFor = func(time.Time) (string, bool) { return "the partner refuses the credentials", held }
		o.Progress = func(p Progress) { // after two records the partner stops answering: held
			if p.Done == 2 && !held {
				held = true
				h.mu.Lock()
				h.block = make(chan struct{})
				h.mu.Unlock()
			}
		}
	})
	if sum, err = r.Ranges(ctxT(t), ranges); err != nil || sum.GaveUp != "the partner refuses the credentials, and --fail-fast" || sum.Records != 2 {
		t.Fatalf("%v gave up %q\n%s", err, sum.GaveUp, sum.Table())
	}
}

// A paced replay keeps ticking and can give up while a record waits for
// its start under --rate.
func TestPacedReplayTicks(t *testing.T) {
	h := newHarness(t)
	topics := h.topics
	for i := range 2 {
		h.produce(h.purchase(0, fmt.Sprintf("L-%d", i), fmt.Sprintf("T-%d", i), time.Time{}))
	}
	ticks := 0
	r := h.replayer(func(o *Options) {
		o.Rate, o.Tick, o.MaxWait = 1.0/60, 10*time.Millisecond, time.Second // the second record is due in a minute
		o.Progress = func(p Progress) {
			if p.Tick {
				ticks++
			}
		}
	})
	ranges, err := r.OffsetRanges(ctxT(t), topics.Purchase, 0, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := r.Ranges(ctxT(t), ranges)
	if err != nil || sum.Records != 1 || sum.GaveUp == "" || ticks < 2 || len(h.positions()) != 1 {
		t.Fatalf("%v: %d ticks, %d handled\n%s", err, ticks, len(h.positions()), sum.Table())
	}
}

// waitStable waits until topic/partition's last stable offset reaches end:
// a real broker writes a transaction's markers after EndTransaction has
// returned, and until then a read_committed reader (the replay's bounds)
// sees the partition end before the transaction.
func (h *harness) waitStable(t *testing.T, topic string, partition int32, end int64) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		ends, err := h.adm.ListCommittedOffsets(context.Background(), topic)
		if err != nil {
			return false, err.Error()
		}
		o, ok := ends.Lookup(topic, partition)
		return ok && o.Err == nil && o.Offset >= end, fmt.Sprintf("last stable offset of %s/%d: %+v, want %d", topic, partition, o, end)
	})
}
