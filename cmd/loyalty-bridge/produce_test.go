package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/schemas"
)

// eventsStack is a kfake cluster (over TCP) and an srfake registry holding
// the bridge's topics.
type eventsStack struct {
	brokers, registry string
	reg               *srfake.Registry
}

func newEventsStack(t *testing.T) eventsStack {
	t.Helper()
	// Registered first, so it runs last: after the stack is closed.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	reg := srfake.New()
	t.Cleanup(reg.Close)
	c, err := kfake.NewCluster(kfake.SeedTopics(2, codec.DefaultTopics().All()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return eventsStack{brokers: strings.Join(c.ListenAddrs(), ","), registry: reg.URL(), reg: reg}
}

// cli runs one loyalty-bridge command against the stack, configured through
// the environment as an operator would.
func (s eventsStack) cli(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	envs := map[string]string{"LOYALTY_BRIDGE_BROKERS": s.brokers, "LOYALTY_BRIDGE_SCHEMA_REGISTRY_URL": s.registry}
	lookup := func(k string) (string, bool) { v, ok := envs[k]; return v, ok }
	code = run(ctx, env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, lookup: lookup}, args)
	return code, out.String(), errb.String()
}

const produceInput = `{"transactionId":"T-1","loyaltyId":"L-1","transactionDate":"2026-11-20T10:30:00Z","amount":125000,"description":"{\"sku\":\"A\"}"}
{"type":"RedemptionRequested","transactionId":"T-2","loyaltyId":"L-1","transactionDate":"2026-11-20T10:31:00Z","amount":-5,"usedPoint":0}

# comments and blank lines are skipped
{"type":"RedemptionRequested","transactionId":"T-3","loyaltyId":"L-2","transactionDate":"2026-11-20T10:32:00Z","amout":5,"usedPoint":10}
{"type":"RedemptionRequested","transactionId":"T-4","loyaltyId":"L-2","transactionDate":"2026-11-20T10:33:00Z","amount":5,"usedPoint":10}
{"type":"PurchaseRefunded","transactionId":"R-1","originalTransactionId":"T-1","loyaltyId":"L-1","refundAmount":"lots","refundDate":"2026-11-21T00:00:00Z"}
{"type":"PurchaseRefunded","transactionId":"R-2","originalTransactionId":"T-1","loyaltyId":"L-1","refundAmount":1000,"refundDate":"2026-11-21T00:00:00Z"}
not json
`

func TestProduceThenTail(t *testing.T) {
	s := newEventsStack(t)
	if code, out, errs := s.cli(t, "", "schemas", "register"); code != 0 || strings.Count(out, "registered") != 9 {
		t.Fatalf("schemas register: %d\n%s%s", code, out, errs)
	}

	// The purchase line goes to the purchase topic; the others, to refund-redemption.
	lines := strings.SplitN(produceInput, "\n", 2)
	if code, _, errs := s.cli(t, lines[0]+"\n", "produce", "--topic", "loyalty.purchase"); code != 0 {
		t.Fatalf("produce purchase: %d %s", code, errs)
	}
	code, _, errs := s.cli(t, lines[1], "produce", "--topic", "loyalty.refund-redemption", "--key-field", "transactionId")
	if code != 1 {
		t.Fatalf("produce with bad lines: exit %d, want 1\n%s", code, errs)
	}
	for _, want := range []string{
		"line 1: invalid RedemptionRequested: amount: must be >= 0; usedPoint: must be > 0",
		`line 4: RedemptionRequested: unknown field "amout"`,
		"line 6: PurchaseRefunded: refundAmount: must be a number, not a JSON string",
		"line 8: not a JSON object",
		"produced 2 records to loyalty.refund-redemption, 4 lines failed",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if strings.Contains(errs, "lots") {
		t.Errorf("stderr echoes a field value:\n%s", errs)
	}

	code, out, errs := s.cli(t, "", "tail", "--topic", "loyalty.refund-redemption", "--from-beginning", "--max", "2")
	if code != 0 {
		t.Fatalf("tail: %d %s", code, errs)
	}
	var got []tailLine
	keys := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var tl struct {
			tailLine
			Value map[string]any `json:"value"`
		}
		if err := json.Unmarshal([]byte(l), &tl); err != nil {
			t.Fatalf("tail line %q: %v", l, err)
		}
		got = append(got, tl.tailLine)
		keys[tl.Key] = true
		if tl.Value["transactionId"] != tl.Key || tl.SchemaID == 0 {
			t.Errorf("line %s: key %q, value %v", l, tl.Key, tl.Value)
		}
	}
	if len(got) != 2 || !keys["T-4"] || !keys["R-2"] {
		t.Fatalf("tail got %d records, keys %v:\n%s", len(got), keys, out)
	}

	// --values-only output is produce's input: tail | produce round-trips.
	_, out, _ = s.cli(t, "", "tail", "--topic", "loyalty.purchase", "--from-beginning", "--max", "1", "--values-only")
	if !strings.Contains(out, `"type":"PurchaseCompleted"`) || !strings.Contains(out, `"currency":"VND"`) {
		t.Fatalf("values-only: %s", out)
	}
	if code, _, errs := s.cli(t, out, "produce", "--topic", "loyalty.purchase"); code != 0 {
		t.Fatalf("re-produce tail output: %d %s", code, errs)
	}
}

func TestTailRedactsOnboarding(t *testing.T) {
	s := newEventsStack(t)
	s.cli(t, "", "schemas", "register")
	in := `{"type":"MemberOnboardRequested","transactionId":"C-1","phone":"+84901234567","fullName":"Nguyen Van An","gender":"male","birthday":"1990-01-31","isKYC":true,"idNumber":"079201001234","placeOfIssue":"HN","placeOfBirth":"HP","issueDate":"2020-01-01","expireDate":"2030-01-01","nationality":"VNM","address":"12 Ly Thuong Kiet","externalId":"E-1"}
{"type":"MemberLinkRequested","transactionId":"C-2","loyaltyId":"L-1","partnerMemberId":"P-1"}
`
	if code, _, errs := s.cli(t, in, "produce", "--topic", "loyalty.member-onboarding"); code != 0 {
		t.Fatalf("produce: %d %s", code, errs)
	}
	_, out, _ := s.cli(t, "", "tail", "--topic", "loyalty.member-onboarding", "--from-beginning", "--max", "2")
	for _, pii := range []string{"+84901234567", "Nguyen", "079201001234", "Ly Thuong Kiet", "1990-01-31"} {
		if strings.Contains(out, pii) {
			t.Errorf("tail printed %q:\n%s", pii, out)
		}
	}
	if !strings.Contains(out, `"key":"E-1"`) || !strings.Contains(out, `"key":"L-1"`) || !strings.Contains(out, "MemberLinkRequested") {
		t.Errorf("tail output:\n%s", out)
	}
	_, out, _ = s.cli(t, "", "tail", "--topic", "loyalty.member-onboarding", "--from-beginning", "--max", "1", "--show-pii")
	if !strings.Contains(out, "+84901234567") {
		t.Errorf("--show-pii hid the data:\n%s", out)
	}
}

// An error event's original is an input record, personal data included:
// tail withholds it unless --show-pii.
func TestTailWithholdsOriginals(t *testing.T) {
	s := newEventsStack(t)
	s.cli(t, "", "schemas", "register")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	cd, err := codec.New(ctx, codec.Options{Registry: rc})
	if err != nil {
		t.Fatal(err)
	}
	const pii = "+84901234567 Nguyen Van An"
	errTopic := codec.DefaultTopics().ErrorTopic(codec.DefaultMemberOnboardingTopic)
	v, err := cd.EncodeError(errTopic, &events.LoyaltyError{TransactionID: "C-1", Category: events.CategoryValidation, Detail: "phone: invalid",
		OriginalKey: []byte("E-1"), OriginalValue: []byte(pii), ProcessedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(s.brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: errTopic, Key: []byte("C-1"), Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	encoded := base64.StdEncoding.EncodeToString([]byte(pii))
	for _, values := range []bool{false, true} {
		args := []string{"tail", "--topic", errTopic, "--from-beginning", "--max", "1"}
		if values {
			args = append(args, "--values-only")
		}
		code, out, errs := s.cli(t, "", args...)
		if code != 0 || strings.Contains(out, encoded[:16]) || strings.Contains(out, "Nguyen") || strings.Contains(out, `"originalValue":`) {
			t.Errorf("tail %v: %d\nstdout: %s\nstderr: %s", args, code, out, errs)
		}
		if !values && !strings.Contains(out, `"withheld":"originalKey and originalValue (29 bytes; --show-pii prints them)"`) {
			t.Errorf("tail does not say what it withheld:\n%s", out)
		}
	}
	_, out, _ := s.cli(t, "", "tail", "--topic", errTopic, "--from-beginning", "--max", "1", "--show-pii")
	if !strings.Contains(out, encoded) {
		t.Errorf("--show-pii withheld the original:\n%s", out)
	}
}

func TestTailReportsUndecodableRecords(t *testing.T) {
	s := newEventsStack(t)
	s.cli(t, "", "schemas", "register")
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(s.brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "loyalty.purchase.error", Key: []byte("k"), Value: []byte(`{"not":"avro"}`)}).FirstErr()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := s.cli(t, "", "tail", "--topic", "loyalty.purchase.error", "--from-beginning", "--max", "1")
	if code != 0 || !strings.Contains(out, `"decodeError":{"kind":"WRONG_MAGIC","topic":"loyalty.purchase.error"`) {
		t.Fatalf("tail: %d\n%s%s", code, out, errs)
	}
}

func TestSchemasCheck(t *testing.T) {
	s := newEventsStack(t)
	if code, out, errs := s.cli(t, "", "schemas", "check"); code != 0 || strings.Count(out, "ok") != 9 {
		t.Fatalf("check of an empty registry: %d\n%s%s", code, out, errs)
	}
	s.cli(t, "", "schemas", "register")
	if code, out, errs := s.cli(t, "", "schemas", "check"); code != 0 {
		t.Fatalf("check after register: %d\n%s%s", code, out, errs)
	}
	// Someone registered a purchase schema whose amount is a string: our
	// reader (amount double) cannot read data written with it.
	bad := strings.Replace(schemas.Purchase(), `"name": "amount", "type": "double"`, `"name": "amount", "type": "string"`, 1)
	if _, _, err := s.reg.RegisterSchema("loyalty.purchase-value", sr.Schema{Schema: bad, Type: sr.TypeAvro}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := s.cli(t, "", "schemas", "check")
	if code == 0 {
		t.Fatalf("check passed an incompatible subject:\n%s", out)
	}
	if !strings.Contains(out, "INCOMPATIBLE loyalty.purchase-value: BACKWARD") || !strings.Contains(errs, "loyalty.purchase-value") ||
		strings.Contains(out, "INCOMPATIBLE loyalty.refund-redemption-value") {
		t.Fatalf("check output:\n%s%s", out, errs)
	}
}
