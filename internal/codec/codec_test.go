package codec_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realregistry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ptr[T any](v T) *T { return &v }

var (
	// topics are the input topics of this run: the defaults on srfake,
	// where each test has a registry of its own; on a real registry,
	// shared by every test and every run, names of this run alone (tests
	// that change a subject's versions or level take their own, from
	// realregistry.Topics).
	topics = runTopics()
	when   = time.Date(2026, 11, 20, 10, 30, 0, 123e6, time.UTC)
)

func runTopics() codec.Topics {
	if realregistry.URL() == "" {
		return codec.DefaultTopics()
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	p := "codec-test-" + hex.EncodeToString(b[:])
	return codec.Topics{Purchase: p + ".purchase", RefundRedemption: p + ".refund-redemption", MemberOnboarding: p + ".member-onboarding"}
}

// samples holds one fully populated value of every type, with its topic.
func samples() []struct {
	topic string
	value any
} {
	et := events.TypePurchaseCompleted
	return []struct {
		topic string
		value any
	}{
		{topics.Purchase, &events.PurchaseCompleted{TransactionID: "T-1", LoyaltyID: "L-1", ItemID: ptr("SKU-9"), TransactionDate: when,
			Amount: 125000.5, Currency: "VND", Description: ptr(`{"sku":"SKU-9"}`), ExtraData: ptr(`{"store":"HN-01"}`)}},
		{topics.RefundRedemption, &events.RedemptionRequested{TransactionID: "T-2", LoyaltyID: "L-1", TransactionDate: when,
			Amount: 50000, UsedPoint: 120, Description: ptr("voucher"), Sign: ptr("eyJ.x.y")}},
		{topics.RefundRedemption, &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1",
			RefundAmount: 25000, RefundDate: when}},
		{topics.MemberOnboarding, &events.MemberOnboardRequested{TransactionID: "C-1", Phone: "+84900000001", FullName: "A B",
			FirstName: ptr("A"), LastName: ptr("B"), Gender: "other", Birthday: "1990-01-01", Email: ptr("a@example.com"), IsKYC: true,
			IDNumber: ptr("0790"), PassportNumber: ptr("B1"), PlaceOfIssue: "HN", PlaceOfBirth: "HP", IssueDate: "2020-01-01",
			ExpireDate: "2030-01-01", Nationality: "VNM", Address: "x", ExternalID: "E-1"}},
		{topics.MemberOnboarding, &events.MemberLinkRequested{TransactionID: "C-2", LoyaltyID: "L-1", PartnerMemberID: "P-1"}},
		{topics.MemberOnboarding, &events.MemberUnlinkRequested{TransactionID: "C-3", LoyaltyID: "L-1", PartnerMemberID: "P-1"}},
		{topics.ResultTopic(topics.Purchase), &events.LoyaltyResult{TransactionID: "T-1", EventType: events.TypeMemberLinkRequested,
			LoyaltyID: ptr("L-1"), Outcome: events.OutcomeAlreadyLinked, BitReference: ptr("BIT-1"), SponsorID: ptr(int64(7)),
			UsedPoint: ptr(int64(0)), Points: ptr(int64(12)), RequestID: ptr("0b7e"), MemberCode: ptr("M-1"), CreatedAt: ptr("2026-11-20T10:30:00.000Z"),
			APITimestamp: ptr("2026-11-20T10:30:00Z"), LinkState: ptr(events.LinkStateLinked), StateChanged: ptr(false),
			APIErrorCode: ptr("MEMBER_IS_LINKED"), TierClass: ptr("GOLD"), MemberStatus: ptr("ACTIVE"), EKYCStatus: ptr("VERIFIED"),
			Attempts: 2, LatencyMs: 37, ProcessedAt: when, Source: events.Source{Topic: topics.Purchase, Partition: 3, Offset: 99}}},
		{topics.ErrorTopic(topics.RefundRedemption), &events.LoyaltyError{TransactionID: "R-1", EventType: &et,
			Category: events.CategoryBusiness, Retryable: false, Reason: ptr(events.ReasonOriginalNotFound), HTTPStatus: ptr(int32(400)),
			APIStatusCode: ptr(int32(400)), APIMessage: ptr("Bad Request"), APIErrorCode: ptr("0001"), APIErrorMessage: ptr("Bad Request"),
			APIErrorName: ptr("BAD_REQUEST"), ResultURL: ptr("https://partner.example/r?errorCode=X"), Detail: "original purchase not found",
			Attempts: 1, Source: events.ErrorSource{Topic: topics.RefundRedemption, Partition: 1, Offset: 5, Timestamp: when},
			OriginalKey: []byte("L-1"), OriginalValue: []byte{0, 0, 0, 0, 1, 2}, ProcessedAt: when}},
	}
}

// testRegistry is the client side of the registry a test runs against
// (realregistry.Open: srfake, or the real one): it counts the requests the
// client sends and can fail some of them, with the same code on both.
type testRegistry struct {
	requests atomic.Int64
	fail     atomic.Pointer[func(*http.Request) bool]
	next     http.RoundTripper
}

func (r *testRegistry) RoundTrip(req *http.Request) (*http.Response, error) {
	r.requests.Add(1)
	if f := r.fail.Load(); f != nil && (*f)(req) {
		body := `{"error_code":50001,"message":"boom"}`
		return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error", Request: req,
			Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}, nil
	}
	return r.next.RoundTrip(req)
}

// failWhen makes the requests f picks fail with a 500; nil stops it.
func (r *testRegistry) failWhen(f func(*http.Request) bool) {
	if f == nil {
		r.fail.Store(nil)
		return
	}
	r.fail.Store(&f)
}

// newRegistry returns a client of the registry the test runs against,
// counting its requests.
func newRegistry(t testing.TB) (*sr.Client, *testRegistry) {
	t.Helper()
	return clientOf(t, realregistry.Open(t))
}

// newFakeRegistry is newRegistry on srfake whatever the environment: for
// tests whose data carry srfake's schema ids (the committed fuzz corpus).
func newFakeRegistry(t testing.TB) (*sr.Client, *testRegistry) {
	t.Helper()
	reg := srfake.New()
	t.Cleanup(reg.Close)
	return clientOf(t, reg.URL())
}

func clientOf(t testing.TB, url string) (*sr.Client, *testRegistry) {
	t.Helper()
	tr := &testRegistry{next: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(tr.next.(*http.Transport).CloseIdleConnections)
	cl, err := sr.NewClient(sr.URLs(url), sr.HTTPClient(&http.Client{Transport: tr, Timeout: 30 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	return cl, tr
}

// newCodec returns a codec of topics that registered its schemas.
func newCodec(t testing.TB, cl *sr.Client) *codec.Codec {
	t.Helper()
	c, err := codec.New(context.Background(), codec.Options{Registry: cl, Topics: topics, Register: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func encodeAny(c *codec.Codec, topic string, v any) ([]byte, error) {
	switch v := v.(type) {
	case *events.LoyaltyResult:
		return c.EncodeResult(topic, v)
	case *events.LoyaltyError:
		return c.EncodeError(topic, v)
	default:
		return c.Encode(topic, v.(events.Event))
	}
}

func TestRoundTripEveryType(t *testing.T) {
	cl, reg := newRegistry(t)
	c := newCodec(t, cl)
	// A second codec with its own caches reads what the first wrote: it
	// must fetch nothing either, since New looked the same ids up.
	c2, err := codec.New(context.Background(), codec.Options{Registry: cl, Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	before := reg.requests.Load()
	for _, s := range samples() {
		b, err := encodeAny(c, s.topic, s.value)
		if err != nil {
			t.Fatalf("%T: encode: %v", s.value, err)
		}
		id, _ := c.SchemaID(s.topic)
		if b[0] != 0 || int(binary.BigEndian.Uint32(b[1:5])) != id {
			t.Fatalf("%T: header % x, want id %d", s.value, b[:5], id)
		}
		for _, dec := range []*codec.Codec{c, c2} {
			got, err := dec.Decode(context.Background(), s.topic, b)
			if err != nil {
				t.Fatalf("%T: decode: %v", s.value, err)
			}
			if !reflect.DeepEqual(got, s.value) {
				t.Errorf("%T round trip:\n got %+v\nwant %+v", s.value, got, s.value)
			}
		}
	}
	if n := reg.requests.Load() - before; n != 0 {
		t.Errorf("%d registry requests on the per-record path, want 0", n)
	}
}

func TestEncodeRejectsWrongTopic(t *testing.T) {
	cl, _ := newRegistry(t)
	c := newCodec(t, cl)
	if _, err := c.Encode(topics.Purchase, &events.MemberLinkRequested{}); err == nil {
		t.Error("link event encoded on the purchase topic")
	}
	if _, err := c.EncodeResult(topics.Purchase, &events.LoyaltyResult{}); err == nil {
		t.Error("result encoded on an input topic")
	}
	if _, err := c.Encode("nope", &events.MemberLinkRequested{}); !errors.Is(err, codec.ErrUnknownTopic) {
		t.Errorf("unknown topic: %v", err)
	}
	if got := c.EventTypes(topics.RefundRedemption); !reflect.DeepEqual(got, []events.EventType{events.TypeRedemptionRequested, events.TypePurchaseRefunded}) {
		t.Errorf("EventTypes = %v", got)
	}
	if got := c.EventTypes(topics.ResultTopic(topics.Purchase)); got != nil {
		t.Errorf("EventTypes(result topic) = %v", got)
	}
}

// wire builds a Confluent-framed value with hamba and an arbitrary schema.
func wire(t testing.TB, id int, schema string, v any) []byte {
	t.Helper()
	s, err := avro.ParseWithCache(schema, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	body, err := avro.Marshal(s, v)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, body...)
}

// register registers schema under a subject of this run named for name,
// as an upstream producer would, and returns its id.
func register(t testing.TB, cl *sr.Client, name, schema string) int {
	t.Helper()
	ss, err := cl.CreateSchema(context.Background(), topics.Purchase+"."+name+"-value", sr.Schema{Schema: schema, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	return ss.ID
}

// An upstream producer one version behind: its PurchaseCompleted has no
// itemId, currency or extraData. The reader fills the defaults.
const oldPurchase = `{"type":"record","name":"PurchaseCompleted","namespace":"com.loyaltybridge.events","fields":[
 {"name":"transactionId","type":"string"},{"name":"loyaltyId","type":"string"},
 {"name":"transactionDate","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"amount","type":"double"},{"name":"description","type":["null","string"],"default":null}]}`

// An upstream producer one version ahead: a new optional field on both
// records, the refund written under its old field name refundId (an alias),
// and a third branch the bridge does not know.
const newRefundRedemption = `[
 {"type":"record","name":"RedemptionRequested","namespace":"com.loyaltybridge.events","fields":[
  {"name":"transactionId","type":"string"},{"name":"loyaltyId","type":"string"},
  {"name":"channel","type":["null","string"],"default":null},
  {"name":"transactionDate","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"amount","type":"double"},{"name":"usedPoint","type":"long"},
  {"name":"description","type":["null","string"],"default":null},{"name":"sign","type":["null","string"],"default":null}]},
 {"type":"record","name":"PointsGifted","namespace":"com.loyaltybridge.events","fields":[{"name":"transactionId","type":"string"}]},
 {"type":"record","name":"PurchaseRefunded","namespace":"com.loyaltybridge.events","fields":[
  {"name":"refundId","type":"string"},{"name":"originalTransactionId","type":"string"},{"name":"loyaltyId","type":"string"},
  {"name":"refundAmount","type":"double"},{"name":"refundDate","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"reason","type":["null","string"],"default":null}]}
]`

func TestEvolutionOldWriterNewReader(t *testing.T) {
	cl, _ := newRegistry(t)
	c := newCodec(t, cl)
	id := register(t, cl, "other", oldPurchase)
	b := wire(t, id, oldPurchase, map[string]any{
		"transactionId": "T-1", "loyaltyId": "L-1", "transactionDate": when, "amount": 10.0, "description": map[string]any{"string": `{"a":1}`},
	})
	got, err := c.DecodeEvent(context.Background(), topics.Purchase, b)
	if err != nil {
		t.Fatal(err)
	}
	want := &events.PurchaseCompleted{TransactionID: "T-1", LoyaltyID: "L-1", TransactionDate: when, Amount: 10, Currency: "VND", Description: ptr(`{"a":1}`)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestEvolutionNewWriterOldReader(t *testing.T) {
	cl, reg := newRegistry(t)
	c := newCodec(t, cl)
	id := register(t, cl, "upstream", newRefundRedemption)
	// Union branches in Go maps: {"<full name>": {fields}}.
	red := wire(t, id, newRefundRedemption, map[string]any{"com.loyaltybridge.events.RedemptionRequested": map[string]any{
		"transactionId": "T-2", "loyaltyId": "L-1", "channel": map[string]any{"string": "app"}, "transactionDate": when,
		"amount": 5.0, "usedPoint": int64(3), "description": nil, "sign": nil}})
	ref := wire(t, id, newRefundRedemption, map[string]any{"com.loyaltybridge.events.PurchaseRefunded": map[string]any{
		"refundId": "R-1", "originalTransactionId": "T-1", "loyaltyId": "L-1", "refundAmount": 1.5, "refundDate": when,
		"reason": map[string]any{"string": "damaged"}}})
	gift := wire(t, id, newRefundRedemption, map[string]any{"com.loyaltybridge.events.PointsGifted": map[string]any{"transactionId": "G-1"}})

	before := reg.requests.Load()
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.DecodeEvent(context.Background(), topics.RefundRedemption, red)
			if err != nil {
				t.Error(err)
				return
			}
			want := &events.RedemptionRequested{TransactionID: "T-2", LoyaltyID: "L-1", TransactionDate: when, Amount: 5, UsedPoint: 3}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		}()
	}
	wg.Wait()
	got, err := c.DecodeEvent(context.Background(), topics.RefundRedemption, ref)
	if err != nil {
		t.Fatal(err)
	}
	want := &events.PurchaseRefunded{TransactionID: "R-1", OriginalTransactionID: "T-1", LoyaltyID: "L-1", RefundAmount: 1.5, RefundDate: when}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	_, err = c.DecodeEvent(context.Background(), topics.RefundRedemption, gift)
	var de *codec.DecodeError
	if !errors.As(err, &de) || de.Kind != codec.KindUnknownBranch {
		t.Fatalf("unknown branch: err = %v", err)
	}
	if n := reg.requests.Load() - before; n != 1 {
		t.Errorf("%d registry requests for one new writer id, want exactly 1", n)
	}
}

func TestDecodeErrors(t *testing.T) {
	cl, _ := newRegistry(t)
	c := newCodec(t, cl)
	good, err := c.Encode(topics.Purchase, samples()[0].value.(events.Event))
	if err != nil {
		t.Fatal(err)
	}
	union, err := c.Encode(topics.MemberOnboarding, &events.MemberLinkRequested{TransactionID: "C", LoyaltyID: "L", PartnerMemberID: "P"})
	if err != nil {
		t.Fatal(err)
	}
	badIndex := append([]byte(nil), union...)
	badIndex[5] = 0x0a // zig-zag 5: past the three branches
	intID := register(t, cl, "ints", `"int"`)
	tests := []struct {
		name  string
		topic string
		value []byte
		want  codec.DecodeKind
	}{
		{"nil", topics.Purchase, nil, codec.KindEmpty},
		{"header only", topics.Purchase, good[:5], codec.KindEmpty},
		{"wrong magic", topics.Purchase, append([]byte{1}, good[1:]...), codec.KindWrongMagic},
		{"json", topics.Purchase, []byte(`{"transactionId":"T"}`), codec.KindWrongMagic},
		{"short header", topics.Purchase, good[:3], codec.KindTruncated},
		{"truncated", topics.Purchase, good[:len(good)-4], codec.KindTruncated},
		{"truncated string", topics.Purchase, good[:8], codec.KindTruncated},
		{"trailing", topics.Purchase, append(append([]byte(nil), good...), 0), codec.KindTrailingBytes},
		// The largest id: no registry, shared or not, has handed it out.
		{"unknown id", topics.Purchase, append([]byte{0, 0x7f, 0xff, 0xff, 0xff}, good[5:]...), codec.KindUnknownSchemaID},
		{"wrong topic", topics.MemberOnboarding, good, codec.KindWrongTopic},
		{"union index out of range", topics.MemberOnboarding, badIndex, codec.KindUnknownBranch},
		{"not a record", topics.Purchase, append(binary.BigEndian.AppendUint32([]byte{0}, uint32(intID)), 2), codec.KindUnknownBranch},
		{"negative length", topics.Purchase, append(append([]byte(nil), good[:5]...), 1), codec.KindMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := c.Decode(context.Background(), tt.topic, tt.value)
			var de *codec.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode = %v, %v; want *DecodeError", v, err)
			}
			if de.Kind != tt.want || de.Topic != tt.topic {
				t.Fatalf("kind %s topic %s (%v), want %s", de.Kind, de.Topic, err, tt.want)
			}
		})
	}
}

// A registry failure is transient: not a DecodeError, not cached.
func TestRegistryFailureIsTransient(t *testing.T) {
	cl, reg := newRegistry(t)
	c := newCodec(t, cl)
	id := register(t, cl, "other", oldPurchase)
	// A path, not a prefix: a real registry's API may sit under one
	// (Apicurio's /apis/ccompat/v7).
	reg.failWhen(func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/schemas/ids/") })
	b := wire(t, id, oldPurchase, map[string]any{"transactionId": "T", "loyaltyId": "L", "transactionDate": when, "amount": 1.0, "description": nil})
	_, err := c.Decode(context.Background(), topics.Purchase, b)
	var de *codec.DecodeError
	if errors.As(err, &de) || !errors.Is(err, codec.ErrRegistry) {
		t.Fatalf("err = %v, want ErrRegistry and no DecodeError", err)
	}
	reg.failWhen(nil)
	if _, err := c.Decode(context.Background(), topics.Purchase, b); err != nil {
		t.Fatalf("after the registry recovered: %v", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	cl, _ := newRegistry(t)
	if _, err := codec.New(context.Background(), codec.Options{}); err == nil {
		t.Error("no registry accepted")
	}
	if _, err := codec.New(context.Background(), codec.Options{Registry: cl, Topics: codec.Topics{Purchase: "x", RefundRedemption: "x"}}); err == nil {
		t.Error("one topic for two inputs accepted")
	}
}

func TestNewWithoutRegisterNeedsSchemas(t *testing.T) {
	cl, _ := newRegistry(t)
	// Topics of its own: on a real registry, other tests of the run
	// registered the run's.
	_, err := codec.New(context.Background(), codec.Options{Registry: cl, Topics: realregistry.Topics(t)})
	if err == nil || !strings.Contains(err.Error(), "schemas register") {
		t.Fatalf("err = %v", err)
	}
}

func TestTopics(t *testing.T) {
	tp := codec.Topics{Purchase: "p"}
	if got := tp.Inputs(); !reflect.DeepEqual(got, []string{"p", codec.DefaultRefundRedemptionTopic, codec.DefaultMemberOnboardingTopic}) {
		t.Errorf("Inputs = %v", got)
	}
	if tp.ResultTopic("p") != "p.result" || tp.ErrorTopic("p") != "p.error" || codec.Subject("p") != "p-value" {
		t.Error("derived names")
	}
	if len(codec.SubjectsOf(tp)) != 9 {
		t.Error("SubjectsOf")
	}
}

// Appending to a decoded bytes field must not write into memory that other
// decoded values share.
func TestDecodedBytesDoNotAlias(t *testing.T) {
	cl, _ := newRegistry(t)
	c := newCodec(t, cl)
	s := samples()[7]
	b, err := encodeAny(c, s.topic, s.value)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := c.Decode(context.Background(), s.topic, b)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := c.Decode(context.Background(), s.topic, b)
	if err != nil {
		t.Fatal(err)
	}
	e1 := v1.(*events.LoyaltyError)
	_ = append(e1.OriginalKey, "XXXXXXXXXXXXXXXX"...)
	_ = append(e1.OriginalValue, "XXXXXXXXXXXXXXXX"...)
	if !reflect.DeepEqual(v1, s.value) || !reflect.DeepEqual(v2, s.value) {
		t.Fatalf("append to a decoded field changed other values:\n%+v\n%+v", v1, v2)
	}
}

// What Encode writes is plain Avro of the topic's registered schema: a
// generic reader (hamba's, with no knowledge of our Go types) reads union
// topics' records as the right branch.
func TestEncodeIsStandardAvro(t *testing.T) {
	cl, _ := newRegistry(t)
	c := newCodec(t, cl)
	for _, s := range samples() {
		b, err := encodeAny(c, s.topic, s.value)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := c.SchemaID(s.topic)
		registered, err := cl.SchemaByID(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		schema, err := avro.ParseWithCache(registered.Schema, "", &avro.SchemaCache{})
		if err != nil {
			t.Fatal(err)
		}
		var generic any
		if err := avro.Unmarshal(schema, b[5:], &generic); err != nil {
			t.Fatalf("%T: %v", s.value, err)
		}
		fields, ok := generic.(map[string]any)
		if !ok {
			t.Fatalf("%T: generic value %T", s.value, generic)
		}
		if _, union := schema.(*avro.UnionSchema); union {
			name := "com.loyaltybridge.events." + reflect.TypeOf(s.value).Elem().Name()
			if fields, ok = fields[name].(map[string]any); !ok {
				t.Fatalf("%T: union value %v lacks branch %s", s.value, generic, name)
			}
		}
		if fields["transactionId"] == "" || fields["transactionId"] == nil {
			t.Errorf("%T: generic read %v", s.value, fields)
		}
	}
}
