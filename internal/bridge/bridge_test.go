package bridge_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/devstack"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/service"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
)

var topics = codec.DefaultTopics()

// env is the embedded stack (kfake over TCP, srfake, the simulator over
// HTTP) and the service's connected parts.
type env struct {
	stack *devstack.Stack
	cfg   *config.Config
	deps  *service.Deps
	logs  *bytes.Buffer
	logMu *sync.Mutex
}

type envOpts struct {
	sim  sim.Options
	mod  func(*config.Config)
	noPK bool
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if o.sim.Members == 0 {
		o.sim.Members = 50
	}
	st, err := devstack.Start(ctx, devstack.Options{DataDir: t.TempDir(), KafkaAddr: "127.0.0.1:0", RegistryAddr: "127.0.0.1:0",
		SimAddr: "127.0.0.1:0", Partitions: 4, Topics: topics.All(), Sim: o.sim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	e := &env{stack: st, cfg: stackConfig(t, st, o), logs: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	log, err := telemetry.NewLogger(telemetry.LogOptions{Format: "json", Level: "debug", Output: lockedWriter{e.logs, e.logMu}})
	if err != nil {
		t.Fatal(err)
	}
	if e.deps, err = service.Connect(ctx, e.cfg, service.Options{Logger: log}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.deps.Close)
	return e
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (e *env) logText() string {
	e.logMu.Lock()
	defer e.logMu.Unlock()
	return e.logs.String()
}

func stackConfig(t *testing.T, s *devstack.Stack, o envOpts) *config.Config {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, b := config.Define(fs)
	if err := b.Parse(nil, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	cfg.Brokers, cfg.RegistryURL, cfg.RegisterSchemas = strings.Join(s.Brokers, ","), s.RegistryURL, true
	cfg.APIBaseURL, cfg.ClientID, cfg.ClientSecret = s.SimURL, sim.DefaultClientID, sim.DefaultClientSecret
	cfg.Username, cfg.Password = sim.DefaultUsername, sim.DefaultPassword
	if !o.noPK {
		cfg.PartnerKey, cfg.PartnerKeyID = s.PartnerKeyPath, s.PartnerKeyID
	}
	cfg.MetricsAddr = ""
	cfg.RecordBackoff = 5 * time.Millisecond
	cfg.APIMaxAttempts = 2
	cfg.CommitInterval = 100 * time.Millisecond
	if o.mod != nil {
		o.mod(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (e *env) bridge(t *testing.T, replay bool) *bridge.Bridge {
	t.Helper()
	b, err := e.deps.Bridge(replay)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// record encodes ev as an input record at a made-up position.
func (e *env) record(t *testing.T, topic string, ev events.Event, headers ...kgo.RecordHeader) *kgo.Record {
	t.Helper()
	v, err := e.deps.Codec.Encode(topic, ev)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: topic, Partition: 1, Offset: 42, Key: []byte("k"), Value: v, Headers: headers,
		Timestamp: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
}

// reply is one decoded output record.
type reply struct {
	rec    *kgo.Record
	result *events.LoyaltyResult
	err    *events.LoyaltyError
}

func (r reply) outcome() string {
	if r.result != nil {
		return string(r.result.Outcome)
	}
	s := "error " + string(r.err.Category)
	if r.err.Reason != nil {
		s += " " + *r.err.Reason
	}
	return s
}

func (r reply) header(k string) string {
	for _, h := range r.rec.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

func (e *env) decode(t *testing.T, out []*kgo.Record) reply {
	t.Helper()
	if len(out) != 1 {
		t.Fatalf("%d output records, want 1", len(out))
	}
	v, err := e.deps.Codec.Decode(context.Background(), out[0].Topic, out[0].Value)
	if err != nil {
		t.Fatalf("output on %s does not decode: %v", out[0].Topic, err)
	}
	r := reply{rec: out[0]}
	switch x := v.(type) {
	case *events.LoyaltyResult:
		r.result = x
	case *events.LoyaltyError:
		r.err = x
	default:
		t.Fatalf("output is %T", v)
	}
	return r
}

func (e *env) handle(t *testing.T, b *bridge.Bridge, rec *kgo.Record, fresh bool) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := b.Handle(ctx, rec, pipeline.Meta{Fresh: fresh})
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	return e.decode(t, out)
}

func purchase(id string, member int, amount float64) *events.PurchaseCompleted {
	return &events.PurchaseCompleted{TransactionID: id, LoyaltyID: sim.MemberID(member), TransactionDate: time.Now(), Amount: amount, Currency: "VND"}
}

// Canary personal data, none of which may reach an output or a log line.
const (
	canaryPhone    = "+84987650001"
	canaryName     = "Canary Fullname Nguyen"
	canaryEmail    = "canary.person@example.org"
	canaryID       = "079199000777"
	canaryPassport = "C9988776"
	canaryAddress  = "77 Canary Street"
	canaryBirthday = "1987-06-05"
)

func onboarding(id string) *events.MemberOnboardRequested {
	email, idn, pp, first, last := canaryEmail, canaryID, canaryPassport, "Canaryfirst", "Canarylast"
	return &events.MemberOnboardRequested{TransactionID: id, Phone: canaryPhone, FullName: canaryName, FirstName: &first,
		LastName: &last, Gender: "female", Birthday: canaryBirthday, Email: &email, IsKYC: true, IDNumber: &idn, PassportNumber: &pp,
		PlaceOfIssue: "Ha Noi", PlaceOfBirth: "Hue", IssueDate: "2015-01-02", ExpireDate: "2035-01-02", Nationality: "VNM",
		Address: canaryAddress, ExternalID: "ext-" + id}
}

// Every event type, every outcome and every error category the bridge can
// give, asserted on the decoded output records (key, headers, fields); no
// personal data in any output or log line.
func TestEveryOutcomeAndCategory(t *testing.T) {
	e := newEnv(t, envOpts{mod: func(c *config.Config) { c.Enrich = true; c.RecordAttempts = 2 }})
	b := e.bridge(t, false)
	corr := kgo.RecordHeader{Key: "correlation-id", Value: []byte("corr-1")}
	trace := kgo.RecordHeader{Key: "traceparent", Value: []byte("00-abc-def-01")}
	var outputs []reply

	check := func(name string, r reply, wantTopic, wantOutcome, wantKey string) {
		t.Helper()
		outputs = append(outputs, r)
		if got := r.outcome(); got != wantOutcome {
			detail := ""
			if r.err != nil {
				detail = r.err.Detail
			}
			t.Errorf("%s: outcome %q, want %q (%s)", name, got, wantOutcome, detail)
		}
		if r.rec.Topic != wantTopic {
			t.Errorf("%s: topic %s, want %s", name, r.rec.Topic, wantTopic)
		}
		if string(r.rec.Key) != wantKey {
			t.Errorf("%s: key %q, want %q", name, r.rec.Key, wantKey)
		}
		for _, h := range []string{"event-type", "source-topic", "source-partition", "source-offset", "attempts"} {
			if r.header(h) == "" {
				t.Errorf("%s: no %s header", name, h)
			}
		}
		if r.header("source-offset") != "42" || r.header("source-partition") != "1" {
			t.Errorf("%s: source headers %q/%q", name, r.header("source-partition"), r.header("source-offset"))
		}
	}
	res, errT := topics.ResultTopic, topics.ErrorTopic
	pt, rt, mt := topics.Purchase, topics.RefundRedemption, topics.MemberOnboarding

	r := e.handle(t, b, e.record(t, pt, purchase("p-1", 1, 200_000), corr, trace), false)
	check("accrual", r, res(pt), "APPLIED", "p-1")
	if r.header("correlation-id") != "corr-1" || r.header("traceparent") != "00-abc-def-01" {
		t.Errorf("tracing headers not copied: %v", r.rec.Headers)
	}
	if r.result.BitReference == nil || r.result.Source.Offset != 42 || r.result.Attempts != 1 || r.result.EventType != events.TypePurchaseCompleted {
		t.Errorf("accrual result fields: %+v", r.result)
	}

	red := &events.RedemptionRequested{TransactionID: "r-1", LoyaltyID: sim.MemberID(2), TransactionDate: time.Now(), Amount: 50_000, UsedPoint: 30}
	r = e.handle(t, b, e.record(t, rt, red), false)
	check("redemption signed by the bridge", r, res(rt), "APPLIED", "r-1")
	if r.result.UsedPoint == nil || *r.result.UsedPoint != 30 {
		t.Errorf("redemption usedPoint: %+v", r.result.UsedPoint)
	}
	bad := "not-a-jwt"
	red2 := &events.RedemptionRequested{TransactionID: "r-2", LoyaltyID: sim.MemberID(2), TransactionDate: time.Now(), Amount: 1, UsedPoint: 1, Sign: &bad}
	r = e.handle(t, b, e.record(t, rt, red2), false)
	check("redemption with a bad sign passed through", r, errT(rt), "error BUSINESS", "r-2")
	if r.err.APIErrorCode == nil || r.err.HTTPStatus == nil || *r.err.HTTPStatus != 400 || r.err.Retryable {
		t.Errorf("business error fields: %+v", r.err)
	}

	// Refund of p-1: 200,000 VND earned 200 points; half refunded claws back 100.
	ref := &events.PurchaseRefunded{TransactionID: "f-1", OriginalTransactionID: "p-1", LoyaltyID: sim.MemberID(1), RefundAmount: 100_000, RefundDate: time.Now()}
	r = e.handle(t, b, e.record(t, rt, ref), false)
	check("refund", r, res(rt), "APPLIED", "f-1")
	if r.result.UsedPoint == nil || *r.result.UsedPoint != 100 {
		t.Errorf("clawback usedPoint %v, want 100", r.result.UsedPoint)
	}
	tiny := &events.PurchaseRefunded{TransactionID: "f-2", OriginalTransactionID: "p-1", LoyaltyID: sim.MemberID(1), RefundAmount: 1, RefundDate: time.Now()}
	r = e.handle(t, b, e.record(t, rt, tiny), false)
	check("refund rounding to zero points", r, res(rt), "NO_OP", "f-2")
	orphan := &events.PurchaseRefunded{TransactionID: "f-3", OriginalTransactionID: "never", LoyaltyID: sim.MemberID(1), RefundAmount: 10, RefundDate: time.Now()}
	r = e.handle(t, b, e.record(t, rt, orphan), false)
	check("refund of an unknown purchase", r, errT(rt), "error BUSINESS ORIGINAL_NOT_FOUND", "f-3")

	r = e.handle(t, b, e.record(t, mt, onboarding("o-1")), false)
	check("onboarding", r, res(mt), "ONBOARDED", "o-1")
	if r.result.MemberCode == nil || r.result.CreatedAt == nil {
		t.Errorf("onboarding result: %+v", r.result)
	}
	dup := onboarding("o-2")
	dup.ExternalID = "ext-o-1" // already enrolled: the partner refuses
	r = e.handle(t, b, e.record(t, mt, dup), false)
	check("onboarding refused", r, errT(mt), "error BUSINESS", "o-2")

	link := &events.MemberLinkRequested{TransactionID: "l-1", LoyaltyID: sim.MemberID(3), PartnerMemberID: "pm-3"}
	r = e.handle(t, b, e.record(t, mt, link), false)
	check("link", r, res(mt), "LINKED", "l-1")
	if r.result.StateChanged == nil || !*r.result.StateChanged || r.result.TierClass == nil || r.result.MemberStatus == nil {
		t.Errorf("link result (enriched): %+v", r.result)
	}
	link.TransactionID = "l-2"
	r = e.handle(t, b, e.record(t, mt, link), false)
	check("link again", r, res(mt), "ALREADY_LINKED", "l-2")
	if *r.result.StateChanged || *r.result.LinkState != events.LinkStateLinked || *r.result.APIErrorCode != "MEMBER_IS_LINKED" {
		t.Errorf("already linked: %+v", r.result)
	}
	unlink := &events.MemberUnlinkRequested{TransactionID: "u-1", LoyaltyID: sim.MemberID(3), PartnerMemberID: "pm-3"}
	r = e.handle(t, b, e.record(t, mt, unlink), false)
	check("unlink", r, res(mt), "UNLINKED", "u-1")
	unlink.TransactionID = "u-2"
	r = e.handle(t, b, e.record(t, mt, unlink), false)
	check("unlink again", r, res(mt), "NOT_LINKED", "u-2")
	if *r.result.StateChanged || *r.result.APIErrorCode != "MEMBER_IS_NOT_LINKED_YET" {
		t.Errorf("not linked: %+v", r.result)
	}

	// Failures.
	garbage := &kgo.Record{Topic: pt, Partition: 1, Offset: 42, Value: []byte("\x00\x00\x00\x7fjunk")}
	r = e.handle(t, b, garbage, false)
	check("unknown schema id", r, errT(pt), "error DECODE UNKNOWN_SCHEMA_ID", pt+"/1/42")
	if !bytes.Equal(r.err.OriginalValue, garbage.Value) {
		t.Errorf("original value not carried")
	}
	r = e.handle(t, b, &kgo.Record{Topic: pt, Partition: 1, Offset: 42, Value: []byte("random")}, false)
	check("random bytes", r, errT(pt), "error DECODE WRONG_MAGIC", pt+"/1/42")
	r = e.handle(t, b, e.record(t, pt, purchase("p-bad", 1, -5)), false)
	check("invalid amount", r, errT(pt), "error VALIDATION", "p-bad")
	if !strings.Contains(r.err.Detail, "amount") {
		t.Errorf("validation detail does not name the field: %s", r.err.Detail)
	}
	r = e.handle(t, b, e.record(t, pt, purchase("p-nobody", 9999, 10)), false)
	check("unknown member", r, errT(pt), "error BUSINESS", "p-nobody")

	e.stack.Sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, Endpoints: []string{sim.EndpointAccrual}})
	r = e.handle(t, b, e.record(t, pt, purchase("p-down", 1, 10)), false)
	e.stack.Sim.SetFaults(sim.Faults{})
	check("API down", r, errT(pt), "error TRANSIENT_EXHAUSTED", "p-down")
	if !r.err.Retryable || r.err.Attempts != 2 {
		t.Errorf("exhausted: retryable %v attempts %d", r.err.Retryable, r.err.Attempts)
	}

	out, err := b.Fallback(e.record(t, pt, purchase("p-internal", 1, 10)), fmt.Errorf("boom: %w", pipeline.ErrProduce))
	if err != nil {
		t.Fatal(err)
	}
	check("fallback", e.decode(t, out), errT(pt), "error INTERNAL", "p-internal")

	// Nothing personal or secret anywhere.
	canaries := []string{canaryPhone, canaryName, canaryEmail, canaryID, canaryPassport, canaryAddress, canaryBirthday,
		"Canaryfirst", "Canarylast", sim.DefaultClientSecret, sim.DefaultPassword}
	for _, o := range outputs {
		raw := string(o.rec.Value) + fmt.Sprintf("%+v %+v", o.result, o.err)
		if o.err != nil {
			raw = strings.ReplaceAll(raw, string(o.err.OriginalValue), "") // the original record, by design
		}
		for _, c := range canaries {
			if strings.Contains(raw, c) {
				t.Errorf("output %s carries %q", o.rec.Key, c)
			}
		}
	}
	logs := e.logText()
	for _, c := range canaries {
		if strings.Contains(logs, c) {
			t.Errorf("logs carry %q", c)
		}
	}
}

// With the partner key absent, a redemption without sign is a VALIDATION
// error naming sign, not a crash or a retry loop.
func TestRedemptionWithoutKey(t *testing.T) {
	e := newEnv(t, envOpts{noPK: true})
	b := e.bridge(t, false)
	red := &events.RedemptionRequested{TransactionID: "r-nokey", LoyaltyID: sim.MemberID(2), TransactionDate: time.Now(), Amount: 1, UsedPoint: 1}
	r := e.handle(t, b, e.record(t, topics.RefundRedemption, red), false)
	if r.outcome() != "error VALIDATION" || !strings.Contains(r.err.Detail, "sign") {
		t.Fatalf("got %s: %+v", r.outcome(), r.err)
	}
}

// The idempotency guard: an ambiguous failure, a Fresh record, a replay and
// a duplicate answer all end ALREADY_APPLIED with exactly one effect.
func TestGuard(t *testing.T) {
	for _, policy := range []sim.DuplicatePolicy{sim.DuplicateReject, sim.DuplicateReturnOriginal} {
		t.Run(policy.String(), func(t *testing.T) {
			e := newEnv(t, envOpts{sim: sim.Options{DuplicatePolicy: policy}})
			b := e.bridge(t, false)
			s := e.stack.Sim
			pt, rt := topics.Purchase, topics.RefundRedemption

			// Applied, then answered 500: the retry looks it up.
			s.SetFaults(sim.Faults{ApplyThen500Rate: 1, Endpoints: []string{sim.EndpointAccrual, sim.EndpointRedemption}})
			r := e.handle(t, b, e.record(t, pt, purchase("g-1", 1, 5000)), false)
			red := &events.RedemptionRequested{TransactionID: "g-2", LoyaltyID: sim.MemberID(1), TransactionDate: time.Now(), Amount: 1, UsedPoint: 3}
			r2 := e.handle(t, b, e.record(t, rt, red), false)
			s.SetFaults(sim.Faults{})
			for _, rr := range []reply{r, r2} {
				if rr.outcome() != "ALREADY_APPLIED" || rr.result.BitReference == nil || rr.result.Attempts != 2 {
					t.Errorf("after apply-then-500: %s %+v %+v", rr.outcome(), rr.result, rr.err)
				}
			}
			if s.Effects("g-1") != 1 || s.Effects("g-2") != 1 {
				t.Fatalf("effects %d %d", s.Effects("g-1"), s.Effects("g-2"))
			}

			// Fresh and replayed records of applied transactions: looked up, not re-sent.
			calls := s.TotalCalls(sim.EndpointAccrual)
			if r := e.handle(t, b, e.record(t, pt, purchase("g-1", 1, 5000)), true); r.outcome() != "ALREADY_APPLIED" {
				t.Errorf("fresh: %s", r.outcome())
			}
			rb := e.bridge(t, true)
			rr := e.handle(t, rb, e.record(t, pt, purchase("g-1", 1, 5000)), false)
			if rr.outcome() != "ALREADY_APPLIED" || rr.header("replayed") != "true" {
				t.Errorf("replay: %s replayed=%q", rr.outcome(), rr.header("replayed"))
			}
			if got := s.TotalCalls(sim.EndpointAccrual); got != calls {
				t.Errorf("guarded records re-sent the accrual: %d calls", got-calls)
			}
			// A fresh record never applied: looked up, then applied once.
			if r := e.handle(t, b, e.record(t, pt, purchase("g-3", 1, 5000)), true); r.outcome() != "APPLIED" || s.Effects("g-3") != 1 {
				t.Errorf("fresh new: %s effects %d", r.outcome(), s.Effects("g-3"))
			}

			// Unguarded duplicate: the partner's answer decides how it is found.
			r = e.handle(t, b, e.record(t, pt, purchase("g-3", 1, 5000)), false)
			want := "ALREADY_APPLIED"
			if policy == sim.DuplicateReturnOriginal {
				want = "APPLIED" // the partner returned the original and applied nothing
			}
			if r.outcome() != want || s.Effects("g-3") != 1 {
				t.Errorf("duplicate: %s, want %s; effects %d", r.outcome(), want, s.Effects("g-3"))
			}
		})
	}
}

// A record whose context ends mid-call is abandoned, not answered: the
// next owner redoes it.
func TestAbandonedOnCancel(t *testing.T) {
	e := newEnv(t, envOpts{})
	b := e.bridge(t, false)
	e.stack.Sim.SetFaults(sim.Faults{HangRate: 1, Endpoints: []string{sim.EndpointAccrual}})
	defer e.stack.Sim.SetFaults(sim.Faults{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.Handle(ctx, e.record(t, topics.Purchase, purchase("c-1", 1, 10)), pipeline.Meta{})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for e.stack.Sim.TotalCalls(sim.EndpointAccrual) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling the simulator's counter
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Handle after cancel: %v", err)
	}
}

// Per-record lines (error events of bad input, results) are debug: an
// info-level log is one line per state change, not per record.
func TestPerRecordLogsAreDebug(t *testing.T) {
	e := newEnv(t, envOpts{})
	buf := &bytes.Buffer{}
	b, err := bridge.New(bridge.Options{Client: e.deps.Client, Codec: e.deps.Codec,
		Logger: zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(buf), zap.InfoLevel))})
	if err != nil {
		t.Fatal(err)
	}
	e.handle(t, b, e.record(t, topics.Purchase, purchase("d-1", 1, -1)), false)
	e.handle(t, b, &kgo.Record{Topic: topics.Purchase, Value: []byte("x")}, false)
	e.handle(t, b, e.record(t, topics.Purchase, purchase("d-2", 1, 10)), false)
	if buf.Len() != 0 {
		t.Fatalf("info lines for single records:\n%s", buf)
	}
}
