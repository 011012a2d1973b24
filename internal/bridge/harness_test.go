package bridge_test

// The test stack, so that every test runs the real protocols: a kfake
// cluster over TCP, an srfake Schema Registry over HTTP, the partner API
// simulator behind httptest, the loyalty client with a password-grant token
// cache (all started by testkit), and pipeline.New wired with Handle,
// Fallback and the breaker as Gate — as `loyalty-bridge run` wires them.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/circuit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var topics = codec.DefaultTopics()

// scale multiplies scenario sizes: BRIDGE_TEST_SCALE=10 for a long local run.
func scale(n int) int {
	if f, err := strconv.Atoi(os.Getenv("BRIDGE_TEST_SCALE")); err == nil && f > 0 {
		return n * f
	}
	return n
}

const partnerKID = "partner-test"

type stackOpts struct {
	sim        sim.Options
	partitions int32
	// clientSigner gives the loyalty client its own signer too.
	clientSigner bool
	// password overrides the client's password (a wrong one: AUTH).
	password string
	// profile is the bridge side's partner profile (signer, client and
	// bridge); the simulator's is sim.Profile. Its ApplyWindow, when
	// zero, is testApplyWindow rather than the 2 s default.
	profile partnerprofile.Profile
	// quiet logs nothing (benchmarks: debug lines would be most of what
	// they measure).
	quiet bool
	// writeGate is the loyalty client's WriteGate (nil: none).
	writeGate loyalty.WriteGate
}

// stack is one test's world. Everything is closed by t.Cleanup.
type stack struct {
	t       testing.TB
	cluster *kfake.Cluster
	brokers []string
	sim     *sim.Server
	simURL  string
	codec   *codec.Codec
	client  *loyalty.Client
	tokens  *tokensource.Cache
	signer  *signing.Signer
	profile partnerprofile.Profile
	metrics *telemetry.Metrics
	logs    *testkit.SyncBuffer
	log     *zap.Logger
	// failLookups answers lookup-transaction-id with 503 in front of the
	// simulator (whose faults are one set for every listed endpoint).
	failLookups atomic.Bool
	// answer, when set, answers the requests to one endpoint in front of
	// the simulator, which only says what the spec shows: a partner's own
	// texts (an echoed token, a member's phone in its spelling).
	answer atomic.Pointer[canned]
	// answerTx is answer for the requests whose body names one
	// transactionId: a partner refusing one record, not all.
	answerTx atomic.Pointer[txCanned]
	// intercept, when set, sees every request first, with the simulator
	// as next: a test's way to hold one call at a chosen point.
	intercept atomic.Pointer[func(w http.ResponseWriter, r *http.Request, next http.Handler)]
}

type txCanned struct {
	canned
	tx string
}

// canned is an answer of the partner's: status and JSON body, for the
// requests whose path ends in path.
type canned struct {
	path   string
	status int
	body   string
}

func (a *canned) write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

// testApplyWindow is the stack's apply window unless a test sets its
// own. The simulator applies a write before it answers (an apply-then-500
// included) unless a test asks for a late apply, and those tests set
// their window; so every lookup after the window finds what it would
// find after the 2 s default, and a guarded retry still waits the
// window before it looks (the same code path, shorter). With the
// default, each ambiguous write cost 2 s of the suite's wall time
// (TestGuard 12 s, TestCrashRestart 19 s).
const testApplyWindow = 100 * time.Millisecond

func newStack(t testing.TB, o stackOpts) *stack {
	t.Helper()
	if o.profile.ApplyWindow == 0 {
		o.profile.ApplyWindow = testApplyWindow
	}
	s := &stack{t: t, logs: &testkit.SyncBuffer{}, metrics: telemetry.NewMetrics(), profile: o.profile}
	// Every line the bridge, client and token cache write, at debug, as
	// JSON: what the PII canaries are checked against.
	s.log = zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(s.logs), zap.DebugLevel))
	if o.quiet {
		s.log = zap.NewNop()
	}

	if o.partitions == 0 {
		o.partitions = 4
	}
	e := testkit.StartEvents(t, testkit.EventsOptions{Topics: topics, Partitions: o.partitions})
	s.cluster, s.brokers, s.codec = e.Fake, e.Brokers, e.Codec

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if s.signer, err = signing.New(key, signing.Options{Issuer: sim.DefaultClientID, KID: partnerKID, Profile: o.profile}); err != nil {
		t.Fatal(err)
	}
	so := o.sim
	if so.Members == 0 {
		so.Members = 50
	}
	so.PartnerKeys = append(so.PartnerKeys, sim.PartnerKey{KID: partnerKID, Key: s.signer.PublicKey()})
	partner := testkit.StartSim(t, testkit.SimOptions{Options: so, Front: s.front})
	s.sim, s.simURL = partner.Server, partner.URL
	lo := loyalty.Options{Timeout: 5 * time.Second, Profile: o.profile, WriteGate: o.writeGate,
		Retry: loyalty.RetryPolicy{MaxAttempts: 2, Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond, MaxRetryAfter: 20 * time.Millisecond}}
	if o.clientSigner {
		lo.Signer = s.signer
	}
	c := testkit.NewClient(t, partner, testkit.ClientOptions{Password: o.password, Transport: loyalty.TransportOptions{MaxConns: 64},
		Client: lo, Logger: s.log})
	s.client, s.tokens = c.Client, c.Tokens
	return s
}

// front answers in front of the simulator as the test has set it up
// (intercept, failLookups, answer, answerTx), or lets the simulator answer.
func (s *stack) front(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if f := s.intercept.Load(); f != nil {
		(*f)(w, r, next)
		return
	}
	if s.failLookups.Load() && strings.HasSuffix(r.URL.Path, "/lookup-transaction-id") {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	if a := s.answer.Load(); a != nil && strings.HasSuffix(r.URL.Path, a.path) {
		a.write(w)
		return
	}
	if a := s.answerTx.Load(); a != nil && strings.HasSuffix(r.URL.Path, a.path) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if bytes.Contains(b, []byte(`"`+a.tx+`"`)) {
			a.write(w)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	next.ServeHTTP(w, r)
}

// bridge builds a Bridge over the stack; mod adjusts the options.
func (s *stack) bridge(mod func(*bridge.Options)) *bridge.Bridge {
	s.t.Helper()
	o := bridge.Options{Client: s.client, Codec: s.codec, Signer: s.signer, RetryBackoff: 5 * time.Millisecond, OriginalGrace: 200 * time.Millisecond,
		Metrics: s.metrics, Logger: s.log, Profile: s.profile}
	if mod != nil {
		mod(&o)
	}
	b, err := bridge.New(o)
	if err != nil {
		s.t.Fatal(err)
	}
	return b
}

func (s *stack) breaker(failures uint32, open time.Duration) *circuit.Breaker {
	s.t.Helper()
	// The default IsFailure on purpose: the bridge itself reports only API
	// failures.
	br, err := circuit.New(circuit.Options{ConsecutiveFailures: failures, OpenTimeout: open})
	if err != nil {
		s.t.Fatal(err)
	}
	return br
}

// dupWrites is how many accrual and redemption calls the simulator refused
// as duplicates: writes of a transaction already applied, each a double
// effect at a partner that does not deduplicate. (The simulator's ledger
// never shows more than one effect, so the ledger alone cannot prove there
// was no second write.) Only meaningful with DuplicateReject and no other
// 400s on those endpoints.
func (s *stack) dupWrites() int {
	return s.sim.Calls(sim.EndpointAccrual, http.StatusBadRequest) + s.sim.Calls(sim.EndpointRedemption, http.StatusBadRequest)
}

// freezeCommits keeps every committed offset at 0 (the start of the test's
// topics) while on is true, but lets the commits' metadata, the pipeline's
// dispatch horizon, through: a member stopped then has committed none of
// its progress, as after a kill -9, while what it may have sent to the
// partner is on record, as the pipeline makes sure before sending.
func (s *stack) freezeCommits(on *atomic.Bool) {
	s.cluster.ControlKey(int16(kmsg.OffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		s.cluster.KeepControl()
		if !on.Load() {
			return nil, nil, false
		}
		req := kreq.(*kmsg.OffsetCommitRequest)
		for i := range req.Topics {
			for k := range req.Topics[i].Partitions {
				req.Topics[i].Partitions[k].Offset = 0
			}
		}
		return nil, nil, false // kfake handles the rewritten request
	})
}

// --- direct handling ---

// record encodes ev as an input record at a made-up position.
func (s *stack) record(topic string, ev events.Event, headers ...kgo.RecordHeader) *kgo.Record {
	s.t.Helper()
	v, err := s.codec.Encode(topic, ev)
	if err != nil {
		s.t.Fatal(err)
	}
	key := []byte("k")
	if r, ok := ev.(*events.PurchaseRefunded); ok {
		key = []byte(r.LoyaltyID) // what the clawback cap needs (refundkey.go)
	}
	return &kgo.Record{Topic: topic, Partition: 1, Offset: 42, Key: key, Value: v, Headers: headers,
		Timestamp: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
}

func (s *stack) handle(b *bridge.Bridge, rec *kgo.Record, fresh bool) reply {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := b.Handle(ctx, rec, pipeline.Meta{Fresh: fresh})
	if err != nil {
		s.t.Fatalf("Handle: %v", err)
	}
	if len(out) != 1 {
		s.t.Fatalf("%d output records, want 1", len(out))
	}
	return s.decode(out[0])
}

// reply is one decoded output record.
type reply struct {
	rec    *kgo.Record
	result *events.LoyaltyResult
	err    *events.LoyaltyError
}

func (s *stack) decode(r *kgo.Record) reply {
	s.t.Helper()
	v, err := s.codec.Decode(context.Background(), r.Topic, r.Value)
	if err != nil {
		s.t.Fatalf("output on %s does not decode: %v", r.Topic, err)
	}
	rp := reply{rec: r}
	switch x := v.(type) {
	case *events.LoyaltyResult:
		rp.result = x
	case *events.LoyaltyError:
		rp.err = x
	default:
		s.t.Fatalf("output is %T", v)
	}
	return rp
}

// outcome is the result's outcome, or "error CATEGORY [REASON]".
func (r reply) outcome() string {
	if r.result != nil {
		return string(r.result.Outcome)
	}
	o := "error " + string(r.err.Category)
	if r.err.Reason != nil {
		o += " " + *r.err.Reason
	}
	return o
}

func (r reply) detail() string {
	if r.err != nil {
		return r.err.Detail
	}
	return ""
}

func (r reply) header(k string) string {
	for _, h := range r.rec.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

// --- running pipelines ---

// member is one running pipeline (a consumer group member).
type member struct {
	stop context.CancelFunc
	done chan error
}

type memberOpts struct {
	bridge      *bridge.Bridge
	gate        *circuit.Breaker
	group       string
	maxInFlight int
	drain       time.Duration
	commit      time.Duration
	mode        ordering.Mode
	clientOpts  []kgo.Opt
}

func (s *stack) start(o memberOpts) *member {
	s.t.Helper()
	if o.group == "" {
		o.group = "bridge-test"
	}
	if o.maxInFlight == 0 {
		o.maxInFlight = 32
	}
	if o.commit == 0 {
		o.commit = 100 * time.Millisecond
	}
	po := pipeline.Options{Brokers: s.brokers, Group: o.group, Topics: o.bridge.Inputs(),
		Handler: o.bridge.Handle, Fallback: o.bridge.Fallback, MaxInFlight: o.maxInFlight,
		CommitInterval: o.commit, DrainTimeout: o.drain, Logger: s.log.Named("pipeline"),
		ClientOpts: []kgo.Opt{kgo.HeartbeatInterval(100 * time.Millisecond), kgo.SessionTimeout(6 * time.Second)}}
	if o.gate != nil {
		po.Gate = o.gate
	}
	po.Mode = o.mode
	po.ClientOpts = append(po.ClientOpts, o.clientOpts...)
	p, err := pipeline.New(po)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	m := &member{stop: stop, done: make(chan error, 1)}
	go func() { m.done <- p.Run(ctx) }()
	s.t.Cleanup(func() { m.halt(s.t) })
	return m
}

// halt cancels the member and waits for Run; safe to call twice.
func (m *member) halt(t testing.TB) {
	t.Helper()
	if m.done == nil {
		return
	}
	m.stop()
	select {
	case err := <-m.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Error("Run did not return after cancel")
	}
	m.done = nil
}

// outputs follows every reply topic and keeps decoded replies by key
// (transactionId), in arrival order.
type outputs struct {
	mu   sync.Mutex
	byID map[string][]reply
	n    int
}

func (s *stack) follow() *outputs {
	s.t.Helper()
	var replies []string
	for _, in := range topics.Inputs() {
		replies = append(replies, topics.ResultTopic(in), topics.ErrorTopic(in))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.ConsumeTopics(replies...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		s.t.Fatal(err)
	}
	o := &outputs{byID: map[string][]reply{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				v, err := s.codec.Decode(ctx, r.Topic, r.Value)
				if err != nil {
					s.t.Errorf("reply on %s does not decode: %v", r.Topic, err)
					return
				}
				rp := reply{rec: r}
				switch x := v.(type) {
				case *events.LoyaltyResult:
					rp.result = x
				case *events.LoyaltyError:
					rp.err = x
				}
				o.mu.Lock()
				o.byID[string(r.Key)] = append(o.byID[string(r.Key)], rp)
				o.n++
				o.mu.Unlock()
			})
		}
	})
	s.t.Cleanup(func() { cancel(); wg.Wait(); cl.Close() })
	return o
}

func (o *outputs) get(id string) []reply {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]reply(nil), o.byID[id]...)
}

func (o *outputs) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

func (o *outputs) all() []reply {
	o.mu.Lock()
	defer o.mu.Unlock()
	var all []reply
	for _, rs := range o.byID {
		all = append(all, rs...)
	}
	return all
}

// waitAll waits until every id has at least one output.
func (o *outputs) waitAll(t *testing.T, ids []string, d time.Duration) {
	t.Helper()
	testkit.Eventually(t, d, func() (bool, string) {
		missing := 0
		o.mu.Lock()
		for _, id := range ids {
			if len(o.byID[id]) == 0 {
				missing++
			}
		}
		o.mu.Unlock()
		if missing > 0 {
			return false, fmt.Sprintf("%d of %d transactions have no output", missing, len(ids))
		}
		return true, ""
	})
}

// producer writes input records, keyed as upstream is told to key them.
type producer struct {
	s  *stack
	cl *kgo.Client
}

func (s *stack) producer() *producer {
	s.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(cl.Close)
	return &producer{s: s, cl: cl}
}

func (p *producer) send(topic, key string, ev events.Event, headers ...kgo.RecordHeader) {
	p.s.t.Helper()
	v, err := p.s.codec.Encode(topic, ev)
	if err != nil {
		p.s.t.Fatal(err)
	}
	p.raw(topic, key, v, headers...)
}

func (p *producer) raw(topic, key string, value []byte, headers ...kgo.RecordHeader) {
	p.cl.Produce(context.Background(), &kgo.Record{Topic: topic, Key: []byte(key), Value: value, Headers: headers},
		func(_ *kgo.Record, err error) {
			if err != nil {
				p.s.t.Errorf("produce: %v", err)
			}
		})
}

func (p *producer) flush() {
	p.s.t.Helper()
	if err := p.cl.Flush(context.Background()); err != nil {
		p.s.t.Fatal(err)
	}
}

// --- events ---

func purchase(id string, member int, amount float64) *events.PurchaseCompleted {
	return &events.PurchaseCompleted{TransactionID: id, LoyaltyID: sim.MemberID(member), TransactionDate: time.Now(), Amount: amount, Currency: "VND"}
}

func redemption(id string, member int, points int64) *events.RedemptionRequested {
	return &events.RedemptionRequested{TransactionID: id, LoyaltyID: sim.MemberID(member), TransactionDate: time.Now(), Amount: 1000, UsedPoint: points}
}

// Canary personal data, none of which may reach an output (other than
// inside the original record value, by design) or a log line.
const (
	canaryPhone    = "+84987650001"
	canaryName     = "Canary Fullname Nguyen"
	canaryFirst    = "Canaryfirst"
	canaryLast     = "Canarylast"
	canaryEmail    = "canary.person@example.org"
	canaryID       = "079199000777"
	canaryPassport = "C9988776"
	canaryAddress  = "77 Canary Street"
	canaryBirthday = "1987-06-05"
	canaryBirthPl  = "Canaryville"
	canaryIssuePl  = "Canary Issuing Office"
)

var canaries = []string{canaryPhone, canaryName, canaryFirst, canaryLast, canaryEmail, canaryID, canaryPassport,
	canaryAddress, canaryBirthday, canaryBirthPl, canaryIssuePl, sim.DefaultClientSecret, sim.DefaultPassword}

func onboarding(id, externalID string) *events.MemberOnboardRequested {
	email, idn, pp, first, last := canaryEmail, canaryID, canaryPassport, canaryFirst, canaryLast
	return &events.MemberOnboardRequested{TransactionID: id, Phone: canaryPhone, FullName: canaryName, FirstName: &first,
		LastName: &last, Gender: "female", Birthday: canaryBirthday, Email: &email, IsKYC: true, IDNumber: &idn, PassportNumber: &pp,
		PlaceOfIssue: canaryIssuePl, PlaceOfBirth: canaryBirthPl, IssueDate: "2015-01-02", ExpireDate: "2035-01-02", Nationality: "VNM",
		Address: canaryAddress, ExternalID: externalID}
}

// noPII fails t if any output (its value minus the original record it
// carries by design, and its decoded fields) or the logs carry a canary.
func (s *stack) noPII(t *testing.T, rs []reply) {
	t.Helper()
	for _, r := range rs {
		raw := string(r.rec.Value)
		if r.err != nil && len(r.err.OriginalValue) > 0 {
			raw = strings.ReplaceAll(raw, string(r.err.OriginalValue), "")
		}
		raw += fmt.Sprintf("%+v %+v", r.result, r.err) // OriginalValue prints as numbers
		for _, h := range r.rec.Headers {
			raw += h.Key + "=" + string(h.Value)
		}
		for _, c := range canaries {
			if strings.Contains(raw, c) {
				t.Errorf("output %s carries %q", r.rec.Key, c)
			}
		}
	}
	logs := s.logs.String()
	for _, c := range canaries {
		if strings.Contains(logs, c) {
			t.Errorf("logs carry %q", c)
		}
	}
}
