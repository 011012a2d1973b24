package tail

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stack is a kfake cluster over TCP holding the bridge's topics and a
// codec whose schemas are registered in an srfake registry.
type stack struct {
	ctx     context.Context
	brokers []string
	cd      *codec.Codec
	cl      *kgo.Client
}

func newStack(t *testing.T) *stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	e := testkit.StartEvents(t, testkit.EventsOptions{})
	return &stack{ctx: ctx, brokers: e.Brokers, cd: e.Codec, cl: e.Client(t)}
}

// put produces records whose value is an event (encoded), an error event
// (encoded) or raw bytes.
func (s *stack) put(t *testing.T, topic, key string, v any, headers ...kgo.RecordHeader) {
	t.Helper()
	var value []byte
	var err error
	switch v := v.(type) {
	case events.Event:
		value, err = s.cd.Encode(topic, v)
	case *events.LoyaltyError:
		value, err = s.cd.EncodeError(topic, v)
	case []byte:
		value = v
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cl.ProduceSync(s.ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: value, Headers: headers}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// tail runs Run over topic from its start and returns stdout and what was
// skipped.
func (s *stack) tail(t *testing.T, topic string, o Options) (string, []string) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.brokers...)}, ClientOpts(topic, true)...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out bytes.Buffer
	var skipped []string
	o.Codec = s.cd
	o.OnSkip = func(err error) { skipped = append(skipped, err.Error()) }
	if err := Run(s.ctx, cl, &out, o); err != nil {
		t.Fatal(err)
	}
	return out.String(), skipped
}

func onboarding() *events.MemberOnboardRequested {
	return &events.MemberOnboardRequested{TransactionID: "C-1", Phone: "+84901234567", FullName: "Nguyen Van An", Gender: "male",
		Birthday: "1990-01-31", IsKYC: true, IDNumber: ptr("079201001234"), PlaceOfIssue: "HN", PlaceOfBirth: "HP", IssueDate: "2020-01-01",
		ExpireDate: "2030-01-01", Nationality: "VNM", Address: "12 Ly Thuong Kiet", ExternalID: "E-1"}
}

func ptr(s string) *string { return &s }

func TestLinesCarryRecordAndRedactOnboarding(t *testing.T) {
	s := newStack(t)
	topic := codec.DefaultMemberOnboardingTopic
	s.put(t, topic, "E-1", onboarding(), kgo.RecordHeader{Key: "source", Value: []byte("crm")})
	s.put(t, topic, "L-1", &events.MemberLinkRequested{TransactionID: "C-2", LoyaltyID: "L-1", PartnerMemberID: "P-1"})

	out, _ := s.tail(t, topic, Options{Max: 2})
	for _, pii := range []string{"+84901234567", "Nguyen", "079201001234", "Ly Thuong Kiet", "1990-01-31"} {
		if strings.Contains(out, pii) {
			t.Errorf("printed %q:\n%s", pii, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	var first struct {
		Line
		Value map[string]any `json:"value"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.Topic != topic || first.Offset != 0 || first.Key != "E-1" || first.Headers["source"] != "crm" || first.SchemaID == 0 ||
		first.Type != "MemberOnboardRequested" || first.Value["phone"] != events.Redacted || first.Value["externalId"] != "E-1" {
		t.Errorf("first line: %s", lines[0])
	}
	if !strings.Contains(lines[1], `"key":"L-1"`) || !strings.Contains(lines[1], `"type":"MemberLinkRequested"`) {
		t.Errorf("second line: %s", lines[1])
	}

	out, _ = s.tail(t, topic, Options{Max: 1, ShowPII: true})
	if !strings.Contains(out, "+84901234567") {
		t.Errorf("ShowPII hid the data:\n%s", out)
	}
}

// An error event's original is an input record, personal data included:
// it is withheld unless ShowPII, and the line says what was left out.
func TestErrorOriginalsWithheld(t *testing.T) {
	s := newStack(t)
	const pii = "+84901234567 Nguyen Van An"
	errTopic := codec.DefaultTopics().ErrorTopic(codec.DefaultMemberOnboardingTopic)
	s.put(t, errTopic, "C-1", &events.LoyaltyError{TransactionID: "C-1", Category: events.CategoryValidation, Detail: "phone: invalid",
		OriginalKey: []byte("E-1"), OriginalValue: []byte(pii), ProcessedAt: time.Now()})
	encoded := base64.StdEncoding.EncodeToString([]byte(pii))
	for _, valuesOnly := range []bool{false, true} {
		out, _ := s.tail(t, errTopic, Options{Max: 1, ValuesOnly: valuesOnly})
		if strings.Contains(out, encoded[:16]) || strings.Contains(out, "Nguyen") || strings.Contains(out, `"originalValue":`) {
			t.Errorf("values only %v: %s", valuesOnly, out)
		}
		if !valuesOnly && !strings.Contains(out, `"withheld":"originalKey and originalValue (29 bytes; --show-pii prints them)"`) {
			t.Errorf("the line does not say what it withheld:\n%s", out)
		}
	}
	if out, _ := s.tail(t, errTopic, Options{Max: 1, ShowPII: true}); !strings.Contains(out, encoded) {
		t.Errorf("ShowPII withheld the original:\n%s", out)
	}
}

// A record that does not decode is a line with decodeError; with
// ValuesOnly it is skipped and reported.
func TestUndecodableRecords(t *testing.T) {
	s := newStack(t)
	topic := codec.DefaultPurchaseTopic
	s.put(t, topic, "k", []byte(`{"not":"avro"}`))
	s.put(t, topic, "L-1", &events.PurchaseCompleted{TransactionID: "T-1", LoyaltyID: "L-1", TransactionDate: time.Now(), Amount: 5, Currency: "VND"})
	out, _ := s.tail(t, topic, Options{Max: 1})
	if !strings.Contains(out, `"decodeError":{"kind":"WRONG_MAGIC","topic":"loyalty.purchase"`) || strings.Contains(out, `"value"`) {
		t.Fatalf("undecodable line: %s", out)
	}
	out, skipped := s.tail(t, topic, Options{Max: 1, ValuesOnly: true})
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil || v["type"] != "PurchaseCompleted" || v["transactionId"] != "T-1" {
		t.Fatalf("values only: %s (%v)", out, err)
	}
	if len(skipped) != 1 || !strings.HasPrefix(skipped[0], "loyalty.purchase/0/0: ") {
		t.Fatalf("skipped: %q", skipped)
	}
}

// cancelAfter cancels a context once n lines are written.
type cancelAfter struct {
	n      int
	cancel context.CancelFunc
	buf    bytes.Buffer
}

func (w *cancelAfter) Write(p []byte) (int, error) {
	if w.n--; w.n == 0 {
		w.cancel()
	}
	return w.buf.Write(p)
}

// Without Max, Run follows the topic until ctx ends, which is a normal end.
func TestRunEndsWithContext(t *testing.T) {
	s := newStack(t)
	topic := codec.DefaultPurchaseTopic
	for _, id := range []string{"T-1", "T-2"} {
		s.put(t, topic, "L-1", &events.PurchaseCompleted{TransactionID: id, LoyaltyID: "L-1", TransactionDate: time.Now(), Amount: 5, Currency: "VND"})
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.brokers...)}, ClientOpts(topic, true)...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	w := &cancelAfter{n: 2, cancel: cancel}
	if err := Run(ctx, cl, w, Options{Codec: s.cd}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := strings.Count(w.buf.String(), "\n"); n != 2 {
		t.Fatalf("%d lines:\n%s", n, w.buf.String())
	}
}
