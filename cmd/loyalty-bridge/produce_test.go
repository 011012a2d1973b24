package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tail"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// eventsStack is a kfake cluster (over TCP) and an srfake registry holding
// the bridge's topics.
type eventsStack struct {
	brokers, registry string
}

func newEventsStack(t *testing.T) eventsStack {
	t.Helper()
	// Registered first, so it runs last: after the stack is closed.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	reg := testkit.StartRegistry(t, testkit.RegistryOptions{})
	k := testkit.StartKafka(t, testkit.KafkaOptions{Topics: []testkit.TopicSet{{Partitions: 2, Names: codec.DefaultTopics().All()}}})
	return eventsStack{brokers: strings.Join(k.Brokers, ","), registry: reg.URL}
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
	var got []tail.Line
	keys := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var tl struct {
			tail.Line
			Value map[string]any `json:"value"`
		}
		if err := json.Unmarshal([]byte(l), &tl); err != nil {
			t.Fatalf("tail line %q: %v", l, err)
		}
		got = append(got, tl.Line)
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
