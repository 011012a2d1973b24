package service

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pyreader"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// TestPythonReaderReadsReplies: a second, independent client reads our
// reply records as analytics teams would (confluent-kafka, librdkafka,
// read_committed, Confluent's AvroDeserializer with the writer schema from
// the registry), and what it decodes is held, field by field and down to
// the Python type, to what franz-go and our codec read from the same
// records. Purchases, redemptions, refunds and member commands go through
// the bridge on a real broker in both delivery modes, their replies
// covering every result outcome and the error events an input can cause
// without a failing partner (decode, validation, the partner's refusals,
// an unknown original). An aborted transaction's record in a reply topic
// shows that read_committed is in force; in exactly-once mode every input
// has exactly one reply in what the Python reader saw.
func TestPythonReaderReadsReplies(t *testing.T) {
	py := pyreader.Python(t)
	realkafka.Brokers(t)
	for _, mode := range []pipeline.Delivery{pipeline.ExactlyOnce, pipeline.AtLeastOnce} {
		t.Run(mode.String(), func(t *testing.T) { testPythonReader(t, py, mode) })
	}
}

func testPythonReader(t *testing.T, py string, mode pipeline.Delivery) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st := newStackWith(t, 2, sim.Options{Members: 20})
	apiURL := withResultURL(t, st.SimURL)
	cfg := stackConfig(t, st, func(c *config.Config) {
		c.API.BaseURL = apiURL
		c.Delivery.Mode = mode
		if mode == pipeline.ExactlyOnce {
			c.Delivery.TransactionalID = realkafka.Name(t, "txn")
		}
		// Every optional field of the replies gets a value somewhere:
		// enrichment fills the member fields, originals the bytes.
		c.Processing.Enrich = true
		c.Processing.IncludeOriginal = true
	})
	svc := runService(ctx, t, cfg)
	waitFor(t, "/readyz", 30*time.Second, func() bool { c, _ := get(svc.base + "/readyz"); return c == http.StatusOK })

	replyTopics := replyTopicsOf(st.Topics)
	ref := readReference(ctx, t, st.Brokers, svc.Codec, replyTopics)
	inputs := producePyInputs(ctx, t, st, svc.Codec, mode)
	aborted := produceAborted(ctx, t, st.Brokers, svc.Codec, st.Topics.ResultTopic(st.Topics.Purchase))

	waitFor(t, "a reply to every input in the reference", 2*time.Minute, func() bool { return ref.answers(inputs) })
	// Stopped, the bridge writes no more: the Python reader and the
	// reference then read the same, settled topics.
	svc.halt(t)
	want := ref.count()

	began := time.Now()
	got, err := pyreader.Read(ctx, pyreader.Options{Python: py, Brokers: st.Brokers, Registry: st.RegistryURL,
		Topics: replyTopics, Count: want, Timeout: time.Minute})
	if err != nil {
		// What it did print is still compared below: that names the
		// records it could not decode, or those it did not reach.
		t.Error(err)
	}
	t.Logf("%s: the Python reader read %d records in %s (the reference %d)", mode, len(got), time.Since(began).Round(time.Millisecond), want)

	// Whatever Python read is in the log, committed: the reference reads
	// it too, or the difference is real, and reported below record by
	// record. The aborted record is never committed: no use waiting.
	for deadline := time.Now().Add(30 * time.Second); !ref.hasAll(got, aborted) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond) // polling, not synchronising
	}
	seen := map[coord]bool{}
	perInput := map[coord]int{}
	for _, g := range got {
		at := coord{g.Topic, g.Partition, g.Offset}
		if seen[at] {
			t.Errorf("%s: python printed it twice", g.Where())
		}
		seen[at] = true
		if at == aborted {
			t.Errorf("%s: python read the aborted transaction's record: read_committed is not in force", g.Where())
			continue
		}
		r, ok := ref.get(at)
		if !ok {
			t.Errorf("%s: python read it, the reference never did", g.Where())
			continue
		}
		for _, d := range pyreader.Compare(r.rec, r.value, g) {
			t.Errorf("%s (key %q): %s", g.Where(), r.rec.Key, d)
		}
		perInput[r.source]++
	}
	for _, r := range ref.all() {
		if !seen[r.at] {
			t.Errorf("%s (key %q): the reference read it, python did not", r.at, r.rec.Key)
		}
	}
	for _, in := range inputs {
		switch n := perInput[in.at]; {
		case n == 0:
			t.Errorf("input %s (%s): no reply in what python read", in.at, in.what)
		case n > 1 && mode == pipeline.ExactlyOnce:
			t.Errorf("input %s (%s): %d replies in what python read, exactly-once promises one", in.at, in.what, n)
		case n > 1:
			t.Logf("input %s (%s): %d replies (at-least-once allows it)", in.at, in.what, n)
		}
	}
	// The comparison proves a field only where it has a value: each
	// reply type's every optional field must have had one somewhere.
	for _, miss := range ref.neverSet() {
		t.Errorf("no reply had a value for %s: the comparison did not cover it", miss)
	}
	ref.checkCases(t, inputs)
}

func replyTopicsOf(tp codec.Topics) []string {
	var out []string
	for _, in := range tp.Inputs() {
		out = append(out, tp.ResultTopic(in), tp.ErrorTopic(in))
	}
	return out
}

// coord is a record's place in the log.
type coord struct {
	topic     string
	partition int32
	offset    int64
}

func (c coord) String() string { return fmt.Sprintf("%s/%d@%d", c.topic, c.partition, c.offset) }

// pyInput is one input record the test produced, and the reply it must get.
type pyInput struct {
	at   coord
	what string
	// check holds the reply to what the input must have come to, so the
	// run covers what it claims (a VALIDATION error, an ALREADY_LINKED …).
	check func(v any) error
}

// producePyInputs produces the inputs, each case with its expected reply.
// Keys are the producer's choice: loyaltyId, or externalId for onboarding,
// as docs/events.md tells producers.
func producePyInputs(ctx context.Context, t *testing.T, st *testStack, cd *codec.Codec, mode pipeline.Delivery) []pyInput {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pt, rt, mt := st.Topics.Purchase, st.Topics.RefundRedemption, st.Topics.MemberOnboarding
	now := time.Now()
	str := func(s string) *string { return &s }
	onboard := func(id, gender, externalID string) *events.MemberOnboardRequested {
		return &events.MemberOnboardRequested{TransactionID: id, Phone: "+84900000001", FullName: "Py Reader", Gender: gender,
			Birthday: "1990-01-02", IsKYC: true, IDNumber: str("079000000001"), PlaceOfIssue: "Ha Noi", PlaceOfBirth: "Hue",
			IssueDate: "2016-01-01", ExpireDate: "2036-01-01", Nationality: "VNM", Address: "1 Example St", ExternalID: externalID}
	}
	traceparent := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	var ins []pyInput
	send := func(topic, key string, value []byte, what string, check func(any) error, hdrs ...kgo.RecordHeader) {
		r := &kgo.Record{Topic: topic, Value: value, Headers: hdrs}
		if key != "" {
			r.Key = []byte(key)
		}
		out, err := cl.ProduceSync(ctx, r).First()
		if err != nil {
			t.Fatalf("produce %s: %v", what, err)
		}
		ins = append(ins, pyInput{at: coord{out.Topic, out.Partition, out.Offset}, what: what, check: check})
	}
	event := func(topic string, ev events.Event, what string, check func(any) error, hdrs ...kgo.RecordHeader) {
		v, err := cd.Encode(topic, ev)
		if err != nil {
			t.Fatal(err)
		}
		key := ev.ID()
		switch ev := ev.(type) {
		case *events.PurchaseCompleted:
			key = ev.LoyaltyID
		case *events.RedemptionRequested:
			key = ev.LoyaltyID
		case *events.PurchaseRefunded:
			key = ev.LoyaltyID
		case *events.MemberOnboardRequested:
			key = ev.ExternalID
		case *events.MemberLinkRequested:
			key = ev.LoyaltyID
		case *events.MemberUnlinkRequested:
			key = ev.LoyaltyID
		}
		send(topic, key, v, what, check, hdrs...)
	}
	m1, m2, m3 := sim.MemberID(1), sim.MemberID(2), sim.MemberID(3)
	purchase := &events.PurchaseCompleted{TransactionID: "py-p1", LoyaltyID: m1, ItemID: str("sku-1"), TransactionDate: now,
		Amount: 250_000, Currency: "VND", Description: str(`{"store":"HN-01"}`), ExtraData: str(`{"channel":"app"}`)}
	event(pt, purchase, "purchase", repliedAs(events.OutcomeApplied),
		kgo.RecordHeader{Key: "correlation-id", Value: []byte("corr-py-p1")}, kgo.RecordHeader{Key: "traceparent", Value: []byte(traceparent)})
	event(pt, purchase, "the same purchase again", repliedAs(events.OutcomeAlreadyApplied))
	event(pt, &events.PurchaseCompleted{TransactionID: "py-p2", LoyaltyID: m1, TransactionDate: now, Amount: 10, Currency: "VND",
		ExtraData: str(`{"unclosed":`)}, "purchase with extraData that is no JSON object", failedAs(events.CategoryValidation, ""))
	event(pt, &events.PurchaseCompleted{TransactionID: "py-p3", LoyaltyID: "LB99999999", TransactionDate: now, Amount: 10, Currency: "VND"},
		"purchase of an unknown member", failedAs(events.CategoryBusiness, ""))
	send(pt, "", []byte("not avro"), "an undecodable record", failedAs(events.CategoryDecode, string(codec.KindWrongMagic)),
		kgo.RecordHeader{Key: "correlation-id", Value: []byte("corr-junk")})

	event(rt, &events.RedemptionRequested{TransactionID: "py-r1", LoyaltyID: m2, TransactionDate: now, Amount: 50_000, UsedPoint: 500,
		Description: str("gift card")}, "redemption", repliedAs(events.OutcomeApplied))
	event(rt, &events.RedemptionRequested{TransactionID: "py-r2", LoyaltyID: m2, TransactionDate: now, Amount: 1, UsedPoint: 1 << 40},
		"redemption beyond the balance", failedAs(events.CategoryBusiness, ""))
	event(rt, &events.PurchaseRefunded{TransactionID: "py-f1", OriginalTransactionID: "py-p1", LoyaltyID: m1, RefundAmount: 100_000,
		RefundDate: now}, "refund", repliedAs(events.OutcomeApplied), kgo.RecordHeader{Key: "traceparent", Value: []byte(traceparent)})
	event(rt, &events.PurchaseRefunded{TransactionID: "py-f3", OriginalTransactionID: "py-p1", LoyaltyID: m1, RefundAmount: 1,
		RefundDate: now}, "refund worth no points", repliedAs(events.OutcomeNoOp))
	// Parked until --original-wait in at-least-once mode; answered at once
	// in exactly-once mode, which does not park (retryable either way).
	unknownOriginal := failedAs(events.CategoryTransientExhausted, events.ReasonOriginalNotFound)
	if mode == pipeline.ExactlyOnce {
		unknownOriginal = failedAs(events.CategoryBusiness, events.ReasonOriginalNotFound)
	}
	event(rt, &events.PurchaseRefunded{TransactionID: "py-f2", OriginalTransactionID: "py-none", LoyaltyID: m2, RefundAmount: 1,
		RefundDate: now}, "refund of an unknown purchase", unknownOriginal)

	event(mt, onboard("py-o1", "female", "py-ext-1"), "onboarding", repliedAs(events.OutcomeOnboarded))
	event(mt, onboard("py-o2", "robot", "py-ext-2"), "onboarding with a bad gender", failedAs(events.CategoryValidation, ""))
	event(mt, onboard("py-o3", "male", "py-ext-1"), "a second onboarding of one member", failedAs(events.CategoryBusiness, ""))
	link := func(id string) *events.MemberLinkRequested {
		return &events.MemberLinkRequested{TransactionID: id, LoyaltyID: m3, PartnerMemberID: "pm-3"}
	}
	unlink := func(id string) *events.MemberUnlinkRequested {
		return &events.MemberUnlinkRequested{TransactionID: id, LoyaltyID: m3, PartnerMemberID: "pm-3"}
	}
	event(mt, link("py-l1"), "link", repliedAs(events.OutcomeLinked))
	event(mt, link("py-l2"), "link of a linked member", repliedAs(events.OutcomeAlreadyLinked))
	event(mt, unlink("py-u1"), "unlink", repliedAs(events.OutcomeUnlinked))
	event(mt, unlink("py-u2"), "unlink of an unlinked member", repliedAs(events.OutcomeNotLinked))
	return ins
}

func repliedAs(want events.Outcome) func(any) error {
	return func(v any) error {
		r, ok := v.(*events.LoyaltyResult)
		switch {
		case !ok:
			return fmt.Errorf("want a %s result, got %s", want, describeReply(v))
		case r.Outcome != want:
			return fmt.Errorf("want outcome %s, got %s", want, r.Outcome)
		}
		return nil
	}
}

func failedAs(cat events.Category, reason string) func(any) error {
	return func(v any) error {
		e, ok := v.(*events.LoyaltyError)
		switch {
		case !ok:
			return fmt.Errorf("want a %s error, got %s", cat, describeReply(v))
		case e.Category != cat:
			return fmt.Errorf("want category %s, got %s (%s)", cat, e.Category, e.Detail)
		case reason != "" && (e.Reason == nil || *e.Reason != reason):
			return fmt.Errorf("want reason %s, got %v (%s)", reason, e.Reason, e.Detail)
		}
		return nil
	}
}

func describeReply(v any) string {
	switch v := v.(type) {
	case *events.LoyaltyResult:
		return "result " + string(v.Outcome)
	case *events.LoyaltyError:
		return "error " + string(v.Category) + " (" + v.Detail + ")"
	}
	return fmt.Sprintf("%T", v)
}

// produceAborted writes a valid result record to topic in a transaction
// that it aborts, and returns where it landed: a read_committed reader
// never returns it, a read_uncommitted one would.
func produceAborted(ctx context.Context, t *testing.T, seeds []string, cd *codec.Codec, topic string) coord {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(realkafka.Name(t, "aborted")))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	v, err := cd.EncodeResult(topic, &events.LoyaltyResult{TransactionID: "py-aborted", EventType: events.TypePurchaseCompleted,
		Outcome: events.OutcomeApplied, Attempts: 1, ProcessedAt: time.Now(), Source: events.Source{Topic: "aborted"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("py-aborted"), Value: v}).First()
	if err != nil {
		t.Fatalf("aborted record: %v", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("abort: %v", err)
	}
	return coord{r.Topic, r.Partition, r.Offset}
}
