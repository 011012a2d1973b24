package produce

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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

// stack is a kfake cluster over TCP holding the bridge's topics, a client
// of it, and a codec whose schemas are registered in an srfake registry.
func stack(t *testing.T) (*kgo.Client, *codec.Codec, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	e := testkit.StartEvents(t, testkit.EventsOptions{})
	return e.Client(t), e.Codec, ctx
}

const refundRedemptionLines = `{"type":"RedemptionRequested","transactionId":"T-2","loyaltyId":"L-1","transactionDate":"2026-11-20T10:31:00Z","amount":-5,"usedPoint":0}

# comments and blank lines are skipped
{"type":"RedemptionRequested","transactionId":"T-3","loyaltyId":"L-2","transactionDate":"2026-11-20T10:32:00Z","amout":5,"usedPoint":10}
{"type":"RedemptionRequested","transactionId":"T-4","loyaltyId":"L-2","transactionDate":"2026-11-20T10:33:00Z","amount":5,"usedPoint":10}
{"type":"PurchaseRefunded","transactionId":"R-1","originalTransactionId":"T-1","loyaltyId":"L-1","refundAmount":"lots","refundDate":"2026-11-21T00:00:00Z"}
{"type":"PurchaseRefunded","transactionId":"R-2","originalTransactionId":"T-1","loyaltyId":"L-1","refundAmount":1000,"refundDate":"2026-11-21T00:00:00Z"}
not json
`

func TestRunProducesGoodLinesAndReportsBadOnes(t *testing.T) {
	cl, cd, ctx := stack(t)
	topic := codec.DefaultRefundRedemptionTopic
	var failed []string
	res, err := Run(ctx, cl, strings.NewReader(refundRedemptionLines), Options{Topic: topic, Codec: cd, KeyField: "transactionId",
		OnError: func(e *LineError) { failed = append(failed, e.Error()) }})
	if err != nil || res != (Result{Produced: 2, Failed: 4}) {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	want := []string{
		"line 1: invalid RedemptionRequested: amount: must be >= 0; usedPoint: must be > 0",
		`line 4: RedemptionRequested: unknown field "amout" (a typo, or a field of another event type?)`,
		"line 6: PurchaseRefunded: refundAmount: must be a number, not a JSON string",
		"line 8: not a JSON object",
	}
	if len(failed) != len(want) {
		t.Fatalf("errors:\n%s", strings.Join(failed, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(failed[i], w) || strings.Contains(failed[i], "lots") {
			t.Errorf("error %d = %q, want %q (and no field value)", i, failed[i], w)
		}
	}

	// The two good lines are on the topic, keyed by transactionId, and decode.
	rd, err := kgo.NewClient(kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var keys []string
	for len(keys) < 2 && ctx.Err() == nil {
		fs := rd.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			v, err := cd.Decode(ctx, r.Topic, r.Value)
			if err != nil {
				t.Errorf("record %s: %v", r.Key, err)
			}
			if ev, ok := v.(events.Event); !ok || ev.ID() != string(r.Key) {
				t.Errorf("record %s holds %#v", r.Key, v)
			}
			keys = append(keys, string(r.Key))
		})
	}
	if strings.Join(keys, ",") != "T-4,R-2" {
		t.Fatalf("keys %v", keys)
	}
}

// --no-validate sends what fails validation; a line too long to read
// ends the run after what came before it was sent.
func TestRunNoValidateAndReadError(t *testing.T) {
	cl, cd, ctx := stack(t)
	in := `{"transactionId":"T-1","loyaltyId":"L-1","transactionDate":"2026-11-20T10:30:00Z","amount":-1}` + "\n" +
		`{"transactionId":"` + strings.Repeat("x", MaxLine) + `"}` + "\n"
	res, err := Run(ctx, cl, strings.NewReader(in), Options{Topic: codec.DefaultPurchaseTopic, Codec: cd, NoValidate: true})
	var re *ReadError
	if !errors.As(err, &re) || re.Line != 1 || res != (Result{Produced: 1}) {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	if _, err := Run(ctx, cl, strings.NewReader(""), Options{Topic: "loyalty.purchase.result", Codec: cd}); err == nil {
		t.Fatal("produced to a reply topic")
	}
}

func TestParseLine(t *testing.T) {
	purchase := []events.EventType{events.TypePurchaseCompleted}
	rr := []events.EventType{events.TypeRedemptionRequested, events.TypePurchaseRefunded}
	const p = `{"transactionId":"T-1","loyaltyId":"L-1","transactionDate":"2026-11-20T10:30:00Z","amount":1`
	for _, tc := range []struct {
		name, line      string
		in              []events.EventType
		typ             events.EventType
		keyField, key   string
		wantKey, errHas string
	}{
		{"default key loyaltyId", p + `}`, purchase, "", "", "", "L-1", ""},
		{"literal key", p + `}`, purchase, "", "", "K", "K", ""},
		{"key field", p + `}`, purchase, "", "transactionId", "", "T-1", ""},
		{"numeric key field", p + `}`, purchase, "", "amount", "", "1", ""},
		{"missing key field", p + `}`, purchase, "", "nope", "", "", "key: field nope is missing or empty"},
		{"type needed", `{"transactionId":"T-1"}`, rr, "", "", "", "", "type: required on this topic (one of RedemptionRequested, PurchaseRefunded)"},
		{"type from flag", `{"transactionId":"T-1","loyaltyId":"L","transactionDate":"2026-11-20T10:30:00Z","amount":1,"usedPoint":1}`,
			rr, events.TypeRedemptionRequested, "", "", "L", ""},
		{"wrong type", p + `,"type":"PurchaseRefunded"}`, purchase, "", "", "", "", `type: "PurchaseRefunded" is not an event of this topic`},
		{"type not a string", p + `,"type":1}`, purchase, "", "", "", "", "type: must be a string"},
		{"bad timestamp", `{"transactionId":"T-1","transactionDate":"yesterday 4pm"}`, purchase, "", "", "", "", "a timestamp must be an RFC 3339 string"},
	} {
		ev, key, err := ParseLine([]byte(tc.line), tc.in, tc.typ, tc.keyField, tc.key)
		switch {
		case tc.errHas != "":
			if err == nil || !strings.Contains(err.Error(), tc.errHas) || strings.Contains(err.Error(), "yesterday") {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.errHas)
			}
		case err != nil || string(key) != tc.wantKey || ev == nil:
			t.Errorf("%s: %v key %q err %v, want key %q", tc.name, ev, key, err, tc.wantKey)
		}
	}
}

// The documentation's example input records (docs/events.md's, one per
// type, and the README tour's purchase, sent with produce's default type
// for the purchase topic) are valid lines.
func TestDocsExamplesAreValid(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	all := events.EventTypes()
	seen := map[string]bool{}
	tour := 0
	for _, f := range append(files, "../../README.md") {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(text), "\n") {
			var flagType events.EventType
			switch {
			case strings.HasPrefix(l, `echo '{"transactionId"`):
				// The tour: `echo '{…}' | … produce --topic loyalty.purchase`.
				l = l[len("echo '") : strings.LastIndex(l, "}")+1]
				flagType = events.TypePurchaseCompleted
				tour++
			case !strings.HasPrefix(l, `{"type":"`) || strings.HasPrefix(l, `{"type":"Loyalty`):
				continue
			}
			ev, _, err := ParseLine([]byte(l), all, flagType, "", "")
			if err == nil {
				err = ev.Validate()
			}
			if err != nil {
				t.Errorf("%s: example %.40s…: %v", filepath.Base(f), l, err)
				continue
			}
			seen[string(ev.Type())] = true
		}
	}
	if len(seen) != len(all) {
		t.Errorf("the docs have examples of %v, want all %d input types", seen, len(all))
	}
	if tour == 0 {
		t.Error("no README tour purchase found")
	}
}
