package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/service"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// live runs the bridge as `run` would (consumer group and all), with mod
// applied to its configuration; stop shuts it down and leaves the group.
func (s *replayStack) live(t *testing.T, mod func(*config.Config)) (stop func()) {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, b := config.Define(fs)
	if err := b.Parse(nil, s.lookup); err != nil {
		t.Fatal(err)
	}
	cfg.Processing.RecordBackoff = time.Millisecond
	if mod != nil {
		mod(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(context.Background(), cfg, service.Options{Logger: zap.NewNop(),
		ClientOpts: []kgo.Opt{kgo.HeartbeatInterval(100 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("live bridge: %v", err)
		}
		svc.Close()
	}
	t.Cleanup(stop)
	return stop
}

// produce writes one purchase per id to partition i%2, stamped at(i)
// (nil: now), keyed by its member.
func (s *replayStack) produce(t *testing.T, at func(i int) time.Time, ids ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.st.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i, id := range ids {
		ev := &events.PurchaseCompleted{TransactionID: id, LoyaltyID: sim.MemberID(1 + i%20), TransactionDate: time.Now(), Amount: 5000, Currency: "VND"}
		v, err := s.cd.Encode(s.topics.Purchase, ev)
		if err != nil {
			t.Fatal(err)
		}
		rec := &kgo.Record{Topic: s.topics.Purchase, Partition: int32(i % 2), Key: []byte(ev.LoyaltyID), Value: v}
		if at != nil {
			rec.Timestamp = at(i)
		}
		if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// replies reads topic from the start until it holds want records (or a
// deadline passes) and returns them.
func (s *replayStack) replies(t *testing.T, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.st.Brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	deadline := time.Now().Add(time.Minute)
	for len(got) < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, r) })
		cancel()
	}
	if len(got) < want {
		t.Fatalf("%s: %d replies, want %d", topic, len(got), want)
	}
	return got
}

// byKey counts records per key; replayed counts those marked replayed.
func byKey(recs []*kgo.Record) (all, replayed map[string]int) {
	all, replayed = map[string]int{}, map[string]int{}
	for _, r := range recs {
		all[string(r.Key)]++
		for _, h := range r.Headers {
			if h.Key == bridge.HeaderReplayed && string(h.Value) == "true" {
				replayed[string(r.Key)]++
			}
		}
	}
	return all, replayed
}

// outcome reads a row of the summary table.
func outcome(t *testing.T, out, label string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(label) + ` +(\d+)$`).FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// outage makes the live bridge fail: applied (the partner applies the
// accrual and answers 500) and lost (503) purchases all end as
// TRANSIENT_EXHAUSTED error events (one attempt each, no circuit).
func (s *replayStack) outage(t *testing.T, mod func(*config.Config), applied, lost []string) {
	t.Helper()
	stop := s.live(t, func(c *config.Config) {
		c.Processing.RecordAttempts, c.API.MaxAttempts, c.Processing.BreakerFailures, c.Processing.BreakerRatio = 1, 1, 1000, 0
		if mod != nil {
			mod(c)
		}
	})
	s.st.Sim.SetFaults(sim.Faults{ApplyThen500Rate: 1, Endpoints: []string{sim.EndpointAccrual}})
	s.produce(t, nil, applied...)
	s.replies(t, s.topics.Purchase+".error", len(applied))
	s.st.Sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, Endpoints: []string{sim.EndpointAccrual}})
	s.produce(t, nil, lost...)
	s.replies(t, s.topics.Purchase+".error", len(applied)+len(lost))
	stop()
	s.st.Sim.SetFaults(sim.Faults{})
	for _, id := range applied {
		if s.st.Sim.Effects(id) != 1 {
			t.Fatalf("%s: %d effects during the outage, want 1 (applied, answer lost)", id, s.st.Sim.Effects(id))
		}
	}
	for _, id := range lost {
		if s.st.Sim.Effects(id) != 0 {
			t.Fatalf("%s: %d effects during the outage, want 0", id, s.st.Sim.Effects(id))
		}
	}
}

// A window of purchases that failed under an outage (some applied before
// the answer was lost) is replayed from the error topic after recovery:
// every one ends with one result and exactly one effect, the applied ones
// ALREADY_APPLIED.
func TestReplayFromErrorsAfterOutage(t *testing.T) {
	s := newOpsStack(t, sim.Options{})
	applied, lost := ids("ap", 6), ids("lost", 6)
	s.outage(t, nil, applied, lost)

	code, out, errs := s.cli(t, "replay", "--from-errors", s.topics.Purchase+".error", "--category", "TRANSIENT_EXHAUSTED", "--rate", "200/s")
	if code != 0 {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	if outcome(t, out, "ALREADY_APPLIED") != len(applied) || outcome(t, out, "APPLIED") != len(lost) || outcome(t, out, "total") != 12 {
		t.Errorf("summary:\n%s", out)
	}
	if !strings.Contains(errs, "12/12 records replayed") {
		t.Errorf("no final progress line:\n%s", errs)
	}
	all, replayed := byKey(s.replies(t, s.topics.Purchase+".result", len(applied)+len(lost)))
	for _, id := range append(applied, lost...) {
		if s.st.Sim.Effects(id) != 1 || all[id] != 1 || replayed[id] != 1 {
			t.Errorf("%s: %d effects, %d results (%d replayed)", id, s.st.Sim.Effects(id), all[id], replayed[id])
		}
	}

	// Replaying the same errors again (every retryable one by default)
	// writes nothing: each is found by the guard.
	calls := s.st.Sim.TotalCalls(sim.EndpointAccrual)
	code, out, errs = s.cli(t, "replay", "--from-errors", s.topics.Purchase+".error")
	if code != 0 || outcome(t, out, "ALREADY_APPLIED") != 12 {
		t.Fatalf("second replay: exit %d\n%s\n%s", code, out, errs)
	}
	if s.st.Sim.TotalCalls(sim.EndpointAccrual) != calls {
		t.Error("a second replay called accrual again")
	}
}

// PII-strict: error events carry no original, so replay reads the source
// records by position; those deleted by retention are reported as not
// replayable and the exit status says so.
func TestReplayFromErrorsWithoutOriginals(t *testing.T) {
	s := newOpsStack(t, sim.Options{})
	lost := ids("strict", 6)
	s.outage(t, func(c *config.Config) { c.Processing.IncludeOriginal = false }, nil, lost)
	ends, err := s.adm.ListEndOffsets(context.Background(), s.topics.Purchase)
	if err != nil {
		t.Fatal(err)
	}
	end0, _ := ends.Lookup(s.topics.Purchase, 0)
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: s.topics.Purchase, Partition: 0, At: end0.Offset})
	if _, err := s.adm.DeleteRecords(context.Background(), del); err != nil {
		t.Fatal(err)
	}

	code, out, errs := s.cli(t, "replay", "--from-errors", s.topics.Purchase+".error")
	if code != 1 || outcome(t, out, "APPLIED") != 3 || strings.Count(out, "not replayable: "+s.topics.Purchase+"/0/") != 3 ||
		!strings.Contains(out, "no longer retained") {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	for i, id := range lost {
		want := i % 2 // partition 1 is retained, partition 0 is gone
		if s.st.Sim.Effects(id) != want {
			t.Errorf("%s: %d effects, want %d", id, s.st.Sim.Effects(id), want)
		}
	}
}

// A replay of a range that fully succeeded causes no second effect and no
// second write; a dry run calls nothing at all; a time window is found by
// timestamps.
func TestReplayRangeAndDryRun(t *testing.T) {
	s := newOpsStack(t, sim.Options{})
	stop := s.live(t, nil)
	t0 := time.Now().Add(-30 * time.Minute).Truncate(time.Minute)
	okIDs := ids("ok", 10)
	s.produce(t, func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }, okIDs...)
	s.replies(t, s.topics.Purchase+".result", len(okIDs))
	stop()

	ledger := s.st.Sim.Ledger()
	before := map[string]int{}
	for _, ep := range sim.AllEndpoints {
		before[ep] = s.st.Sim.TotalCalls(ep)
	}
	// ok-3..ok-6 (partitions 1, 0, 1, 0) lie in [t0+3m, t0+7m).
	code, out, errs := s.cli(t, "replay", "--topic", s.topics.Purchase, "--since", t0.Add(3*time.Minute).Format(time.RFC3339),
		"--until", t0.Add(7*time.Minute).Format(time.RFC3339), "--dry-run")
	if code != 0 || strings.Count(out, "would call lookup-transaction (guard), then point-accrual") != 4 ||
		outcome(t, out, "would replay PurchaseCompleted") != 4 {
		t.Fatalf("dry run: exit %d\n%s\n%s", code, out, errs)
	}
	for _, id := range []string{"ok-3", "ok-4", "ok-5", "ok-6"} {
		if !strings.Contains(out, "tx="+id+" ") {
			t.Errorf("dry run misses %s:\n%s", id, out)
		}
	}
	for _, ep := range sim.AllEndpoints {
		if got := s.st.Sim.TotalCalls(ep); got != before[ep] {
			t.Errorf("dry run called %s %d times", ep, got-before[ep])
		}
	}

	for p := range 2 {
		code, out, errs = s.cli(t, "replay", "--topic", s.topics.Purchase, "--partition", fmt.Sprint(p), "--from-offset", "0", "--max-in-flight", "4")
		if code != 0 || outcome(t, out, "ALREADY_APPLIED") != 5 || !strings.Contains(errs, "replaying "+s.topics.Purchase+"/"+fmt.Sprint(p)+" [0, 5)") {
			t.Fatalf("range replay: exit %d\n%s\n%s", code, out, errs)
		}
	}
	for id, n := range s.st.Sim.Ledger() {
		if n != ledger[id] {
			t.Errorf("%s: %d effects after the replay, %d before", id, n, ledger[id])
		}
	}
	if s.st.Sim.TotalCalls(sim.EndpointAccrual) != before[sim.EndpointAccrual] {
		t.Error("a replay of applied purchases called accrual")
	}
	all, replayed := byKey(s.replies(t, s.topics.Purchase+".result", 2*len(okIDs)))
	for _, id := range okIDs {
		if all[id] != 2 || replayed[id] != 1 {
			t.Errorf("%s: %d results, %d replayed (want the original and the replayed one)", id, all[id], replayed[id])
		}
	}
}

func TestReplayUsageErrors(t *testing.T) {
	s := &replayStack{envs: map[string]string{}}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay"}, "say what to replay"},
		{[]string{"replay", "--topic", "loyalty.purchase"}, "--from-offset or --since"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--from-offset", "3"}, "--from-offset needs --partition"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--partition", "0", "--from-offset", "3", "--to-offset", "3"}, "not after"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--partition", "0", "--from-offset", "3", "--since", "1h"}, "exclusive"},
		{[]string{"replay", "--topic", "other", "--since", "1h"}, "not an input topic"},
		{[]string{"replay", "--from-errors", "loyalty.purchase.result"}, "not the error topic"},
		{[]string{"replay", "--from-errors", "loyalty.purchase.error", "--category", "NOPE"}, "--category \"NOPE\""},
		{[]string{"replay", "--from-errors", "loyalty.purchase.error", "--partition", "1"}, "--from-errors takes no"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--since", "yesterday"}, "--since"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--since", "1h", "--rate", "fast"}, "--rate"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--since", "1h", "--category", "AUTH"}, "--category goes with --from-errors"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--since", "1h", "--trust-error-originals"}, "--trust-error-originals goes with --from-errors"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--partition", "-1", "--from-offset", "0"}, "--partition -1: must be 0 or more"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--partition", "0", "--from-offset", "-5"}, "--from-offset -5: must be 0 or more"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--partition", "0", "--from-offset", "1", "--to-offset", "-1"}, "--to-offset -1: must be 0 or more"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--partition", "4294967296", "--since", "1h"}, "--partition 4294967296: must be at most 2147483647"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--since", "1h", "--until", "2h"}, "is not after --since"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--since", "2026-11-23T10:00:00Z", "--until", "2026-11-23T09:00:00Z"},
			"--until 2026-11-23T09:00:00Z is not after --since 2026-11-23T10:00:00Z"},
	} {
		code, _, errs := s.cli(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q (want %q)", tc.args, code, errs, tc.want)
		}
	}
}

// purchaseRecord is a purchase of id by member 1 as produced to the
// purchase topic, for topic and partition (not produced).
func (s *replayStack) purchaseRecord(t *testing.T, topic string, part int32, id string) *kgo.Record {
	t.Helper()
	ev := &events.PurchaseCompleted{TransactionID: id, LoyaltyID: sim.MemberID(1), TransactionDate: time.Now(), Amount: 5000, Currency: "VND"}
	v, err := s.cd.Encode(s.topics.Purchase, ev)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: topic, Partition: part, Key: []byte(ev.LoyaltyID), Value: v}
}

// write produces recs to their partitions and returns them with their
// offsets.
func (s *replayStack) write(t *testing.T, recs ...*kgo.Record) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.st.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// errorEvent writes a retryable error event naming the position of src to
// the purchase error topic, carrying orig as its original unless orig is
// nil, and returns the error event's record.
func (s *replayStack) errorEvent(t *testing.T, src, orig *kgo.Record) *kgo.Record {
	t.Helper()
	e := &events.LoyaltyError{TransactionID: "x", Category: events.CategoryTransientExhausted,
		Retryable: true, Detail: "test", Attempts: 1, ProcessedAt: time.Now(),
		Source: events.ErrorSource{Topic: src.Topic, Partition: src.Partition, Offset: src.Offset, Timestamp: src.Timestamp}}
	if orig != nil {
		e.OriginalKey, e.OriginalValue = orig.Key, orig.Value
	}
	topic := s.topics.Purchase + ".error"
	v, err := s.cd.EncodeError(topic, e)
	if err != nil {
		t.Fatal(err)
	}
	return s.write(t, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("x"), Value: v})[0]
}

func pos(r *kgo.Record) string { return events.SourceID(r.Topic, r.Partition, r.Offset) }

// An error event whose original differs from the record at its source
// position (someone wrote the error topic) makes neither be replayed; it is
// counted, and named by positions only; the rest of the replay goes on.
func TestReplayFromErrorsOriginalMismatch(t *testing.T) {
	s := newOpsStack(t, sim.Options{})
	src := s.write(t, s.purchaseRecord(t, s.topics.Purchase, 0, "src-1"), s.purchaseRecord(t, s.topics.Purchase, 1, "src-2"))
	forged := s.purchaseRecord(t, s.topics.Purchase, 0, "forged-1")
	bad := s.errorEvent(t, src[0], forged)
	s.errorEvent(t, src[1], src[1]) // a true copy: replayed from the source

	code, out, errs := s.cli(t, "replay", "--from-errors", s.topics.Purchase+".error")
	if code != 1 || outcome(t, out, "not replayed: original differs from source") != 1 || outcome(t, out, "APPLIED") != 1 ||
		outcome(t, out, "replayed from their source") != 1 {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	if line := fmt.Sprintf("error event %s: its original differs from the source record %s", pos(bad), pos(src[0])); !strings.Contains(out, line) {
		t.Errorf("no line %q:\n%s", line, out)
	}
	for _, id := range []string{"src-1", "forged-1", sim.MemberID(1)} {
		if strings.Contains(out+errs, id) {
			t.Errorf("the output names %s:\n%s\n%s", id, out, errs)
		}
	}
	if s.st.Sim.Effects("src-1") != 0 || s.st.Sim.Effects("forged-1") != 0 || s.st.Sim.Effects("src-2") != 1 ||
		s.st.Sim.TotalCalls(sim.EndpointAccrual) != 1 {
		t.Errorf("accruals: src-1 %d, forged-1 %d, src-2 %d, calls %d (want 0, 0, 1, 1)", s.st.Sim.Effects("src-1"),
			s.st.Sim.Effects("forged-1"), s.st.Sim.Effects("src-2"), s.st.Sim.TotalCalls(sim.EndpointAccrual))
	}
}

// An error event without its original (the default) has the record at its
// source position replayed, with the source record's own headers.
func TestReplayFromErrorsReadsTheSource(t *testing.T) {
	s := newOpsStack(t, sim.Options{})
	in := s.purchaseRecord(t, s.topics.Purchase, 1, "src-1")
	in.Headers = []kgo.RecordHeader{{Key: bridge.HeaderCorrelationID, Value: []byte("corr-source")}}
	src := s.write(t, in)
	s.errorEvent(t, src[0], nil)

	code, out, errs := s.cli(t, "replay", "--from-errors", s.topics.Purchase+".error")
	if code != 0 || outcome(t, out, "APPLIED") != 1 || outcome(t, out, "replayed from their source") != 1 {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	if s.st.Sim.Effects("src-1") != 1 || s.st.Sim.TotalCalls(sim.EndpointAccrual) != 1 {
		t.Errorf("src-1: %d accruals, %d calls (want 1)", s.st.Sim.Effects("src-1"), s.st.Sim.TotalCalls(sim.EndpointAccrual))
	}
	res := s.replies(t, s.topics.Purchase+".result", 1)
	corr := ""
	for _, h := range res[0].Headers {
		if h.Key == bridge.HeaderCorrelationID {
			corr = string(h.Value)
		}
	}
	if string(res[0].Key) != "src-1" || corr != "corr-source" {
		t.Errorf("result %s with correlation id %q", res[0].Key, corr)
	}
}

// A source record that retention deleted is replayed from the original in
// its error event only with --trust-error-originals.
func TestReplayFromErrorsSourceTrimmed(t *testing.T) {
	s := newOpsStack(t, sim.Options{})
	src := s.write(t, s.purchaseRecord(t, s.topics.Purchase, 0, "gone-1"))
	s.errorEvent(t, src[0], src[0])
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: src[0].Topic, Partition: src[0].Partition, At: src[0].Offset + 1})
	if _, err := s.adm.DeleteRecords(context.Background(), del); err != nil {
		t.Fatal(err)
	}

	code, out, errs := s.cli(t, "replay", "--from-errors", s.topics.Purchase+".error")
	if code != 1 || outcome(t, out, "not replayed: source gone") != 1 || outcome(t, out, "total") != 0 ||
		!strings.Contains(out, "not replayable: "+pos(src[0])+" (no longer retained") {
		t.Fatalf("replay without trust: exit %d\n%s\n%s", code, out, errs)
	}
	if n := s.st.Sim.TotalCalls(sim.EndpointAccrual); n != 0 {
		t.Fatalf("%d accrual calls without trusting the original", n)
	}

	code, out, errs = s.cli(t, "replay", "--from-errors", s.topics.Purchase+".error", "--trust-error-originals")
	if code != 0 || outcome(t, out, "APPLIED") != 1 || outcome(t, out, "replayed from error-event originals") != 1 ||
		outcome(t, out, "not replayed: source gone") != 0 {
		t.Fatalf("replay with trust: exit %d\n%s\n%s", code, out, errs)
	}
	if s.st.Sim.Effects("gone-1") != 1 {
		t.Errorf("gone-1: %d accruals with the original trusted, want 1", s.st.Sim.Effects("gone-1"))
	}
}

// An error event on loyalty.purchase.error naming a position outside
// loyalty.purchase (a topic that is no input, or another input) is refused:
// the topic is never asked about, let alone read, and nothing is called.
func TestReplayFromErrorsRefusesOtherTopics(t *testing.T) {
	s := newOpsStack(t, sim.Options{})
	ctx := context.Background()
	shadow := realkafka.Name(t, "shadow")
	s.createTopic(t, shadow)
	link, err := s.cd.Encode(s.topics.MemberOnboarding,
		&events.MemberLinkRequested{TransactionID: "link-1", LoyaltyID: sim.MemberID(2), PartnerMemberID: "P-2"})
	if err != nil {
		t.Fatal(err)
	}
	other := s.write(t, s.purchaseRecord(t, shadow, 0, "shadow-1"),
		&kgo.Record{Topic: s.topics.MemberOnboarding, Partition: 0, Key: []byte(sim.MemberID(2)), Value: link})
	evs := []*kgo.Record{s.errorEvent(t, other[0], other[0]), s.errorEvent(t, other[1], nil)}

	ids := map[[16]byte]string{}
	td, err := s.adm.ListTopics(ctx, shadow, s.topics.MemberOnboarding, s.topics.Purchase+".error")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range td {
		ids[d.ID] = d.Topic
	}
	var recorded realkafka.Requests
	s.kafka = []kgo.Opt{recorded.Opt()}
	before := map[string]int{}
	for _, ep := range sim.AllEndpoints {
		before[ep] = s.st.Sim.TotalCalls(ep)
	}

	code, out, errs := s.cli(t, "replay", "--from-errors", s.topics.Purchase+".error")
	if code != 1 || outcome(t, out, "refused: source outside the input topic") != 2 || outcome(t, out, "total") != 0 {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	for i, ev := range evs {
		if line := fmt.Sprintf("error event %s names %q/%d/%d", pos(ev), other[i].Topic, other[i].Partition, other[i].Offset); !strings.Contains(out, line) {
			t.Errorf("no line %q:\n%s", line, out)
		}
	}
	// The replay's requests naming a topic, by kind. Fetch names topics
	// by id in recent versions; the replay (like run) checks that the
	// input topics exist, so a metadata request naming the other input is
	// expected.
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
					asked["metadata "+*t.Topic]++
				}
			}
		case *kmsg.ListOffsetsRequest:
			for _, t := range r.Topics {
				asked["offsets "+t.Topic]++
			}
		case *kmsg.FetchRequest:
			for _, t := range r.Topics {
				asked["fetch "+t.Topic+ids[t.TopicID]]++
			}
		}
	}
	for _, k := range []string{"metadata " + shadow, "offsets " + shadow, "fetch " + shadow,
		"offsets " + s.topics.MemberOnboarding, "fetch " + s.topics.MemberOnboarding} {
		if asked[k] != 0 {
			t.Errorf("%d requests %s", asked[k], k)
		}
	}
	if asked["fetch "+s.topics.Purchase+".error"] == 0 {
		t.Errorf("the error topic was not fetched either: the requests are not seen (%v)", asked)
	}
	for _, ep := range sim.AllEndpoints {
		if n := s.st.Sim.TotalCalls(ep) - before[ep]; n != 0 && ep != sim.EndpointToken && ep != sim.EndpointExchangeToken {
			t.Errorf("%s called %d times", ep, n)
		}
	}
}

// A window that cannot match what the topic holds is a usage error (exit
// 2) naming the flag and what the topic holds, and nothing is called.
func TestReplayWindowsThatCannotMatch(t *testing.T) {
	s := newOpsStack(t, sim.Options{})
	// Two days ago: a real broker deletes records older than its retention
	// (7 days by default) by their timestamps, and a fixed date ages past it.
	t0 := time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Hour)
	at := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }
	yearBefore := func(d time.Duration) string { return t0.AddDate(-1, 0, 0).Add(d).Format(time.RFC3339) }
	s.produce(t, func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }, ids("w", 6)...)
	s.errorEvent(t, s.write(t, s.purchaseRecord(t, s.topics.Purchase, 0, "failed-1"))[0], nil)
	future := time.Now().AddDate(1, 0, 0).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--topic", s.topics.Purchase, "--since", future},
			[]string{"--since " + future + " is in the future (now ", "): the records of " + s.topics.Purchase + " were written from " + at(0) + " to "}},
		{[]string{"--topic", s.topics.Purchase, "--partition", "1", "--since", at(6 * time.Minute)},
			[]string{"--since " + at(6*time.Minute) + " is after the last record: the records of " + s.topics.Purchase + "/1 were written from " + at(time.Minute) + " to " + at(5*time.Minute)}},
		{[]string{"--topic", s.topics.Purchase, "--since", yearBefore(0), "--until", yearBefore(time.Hour)},
			[]string{"--until " + yearBefore(time.Hour) + " is not after the first record: the records of " + s.topics.Purchase + " were written from " + at(0) + " to "}},
		{[]string{"--from-errors", s.topics.Purchase + ".error", "--since", future},
			[]string{"--since " + future + " is in the future (now ", "): the records of " + s.topics.Purchase + ".error were all written at "}},
		{[]string{"--topic", s.topics.Purchase, "--partition", "1", "--from-offset", "5000", "--to-offset", "6000"},
			[]string{"--from-offset 5000 is beyond the end of " + s.topics.Purchase + "/1, which holds offsets 0 to 2"}},
		{[]string{"--topic", s.topics.Purchase, "--partition", "1", "--from-offset", "1", "--to-offset", "60"},
			[]string{"--to-offset 60 is beyond the end of " + s.topics.Purchase + "/1, which holds offsets 0 to 2 (leave --to-offset out to replay to the end)"}},
		{[]string{"--topic", s.topics.Purchase, "--partition", "7", "--from-offset", "0"},
			[]string{"--partition 7: topic " + s.topics.Purchase + " has no partition 7 (it has 2: 0 to 1)"}},
	} {
		code, out, errs := s.cli(t, append([]string{"replay"}, tc.args...)...)
		ok := code == 2
		for _, w := range tc.want {
			ok = ok && strings.Contains(errs, w)
		}
		if !ok {
			t.Errorf("%v: exit %d\n%s\n%s", tc.args, code, out, errs)
		}
	}
	if n := s.st.Sim.TotalCalls(sim.EndpointAccrual) + s.st.Sim.TotalCalls(sim.EndpointLookup); n != 0 {
		t.Errorf("%d partner calls", n)
	}
	// A window between two records is no mistake: nothing to replay.
	code, out, errs := s.cli(t, "replay", "--topic", s.topics.Purchase, "--since", at(30*time.Second), "--until", at(40*time.Second))
	if code != 0 || !strings.Contains(errs, "nothing to replay: no records in that window") {
		t.Errorf("a window between records: exit %d\n%s\n%s", code, out, errs)
	}
}
